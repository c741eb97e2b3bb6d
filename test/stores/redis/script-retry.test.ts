// How long the script runner keeps retrying after NOSCRIPT: within its budget (from the first
// NOSCRIPT) and at most MAX_SCRIPT_RETRIES times, then the call fails as a store error. No real
// server answers NOSCRIPT to every retry, so this drives the runner with an adapter that does, and
// a clock the test moves (test/stores/redis/noscript.test.ts has the real SCRIPT FLUSH).
import { describe, expect, it } from 'vitest'
import { StoreError } from '../../../packages/sluice/src/errors.js'
import type { ClientAdapter } from '../../../packages/sluice/src/stores/redis/client.js'
import { MAX_SCRIPT_RETRIES, script, scriptRunner } from '../../../packages/sluice/src/stores/redis/script.js'

/** A reply error as ioredis makes it (replyErrorCode reads its name and first word). */
class ReplyError extends Error {
  override name = 'ReplyError'
}

/** An adapter whose EVALSHA answers NOSCRIPT `losses` times, then OK; every call moves the clock by `stepMs`. */
function losingAdapter(losses: number, clock: { now: number }, stepMs: number) {
  const counts = { evalsha: 0, loads: 0 }
  const adapter: ClientAdapter = {
    library: 'ioredis',
    cluster: false,
    async evalsha() {
      counts.evalsha++
      clock.now += stepMs
      if (counts.evalsha <= losses) throw new ReplyError('NOSCRIPT No matching script. Please use EVAL.')
      return 'OK'
    },
    async loadScript() {
      counts.loads++
    },
    async loadMissing() {},
    async del() {},
    async get() {
      return undefined
    },
    async setIfAbsent() {},
  }
  return { adapter, counts }
}

const wrap = (error: unknown) => new StoreError('wrapped', { cause: error })
const s = script('apply/gcra')

describe('NOSCRIPT retries', () => {
  it('retries while within the budget: three losses in a row are recovered', async () => {
    const clock = { now: 0 }
    const { adapter, counts } = losingAdapter(3, clock, 1)
    let noScripts = 0
    const runner = scriptRunner(adapter, wrap, {
      retryMs: 100,
      now: () => clock.now,
      onNoScript: () => noScripts++,
    })
    await expect(runner.run(s, ['k'], [], false, (r) => r)).resolves.toBe('OK')
    expect(counts).toEqual({ evalsha: 4, loads: 3 })
    expect(noScripts).toBe(3)
  })

  it('gives up once the budget has passed: the call fails with what NOSCRIPT wraps to', async () => {
    const clock = { now: 0 }
    const { adapter, counts } = losingAdapter(1000, clock, 30)
    const runner = scriptRunner(adapter, wrap, { retryMs: 100, now: () => clock.now })
    const failure = runner.run(s, ['k'], [], false, (r) => r)
    await expect(failure).rejects.toBeInstanceOf(StoreError)
    // The first NOSCRIPT (at 30 ms) sets the deadline to 130: retries answer at 60, 90, 120 and 150,
    // and the one at 150 is the last.
    expect(counts.evalsha).toBe(5)
  })

  it('a budget of 0 still makes the one retry', async () => {
    const clock = { now: 0 }
    const { adapter, counts } = losingAdapter(1, clock, 1)
    const runner = scriptRunner(adapter, wrap, { retryMs: 0, now: () => clock.now })
    await expect(runner.run(s, ['k'], [], false, (r) => r)).resolves.toBe('OK')
    expect(counts.evalsha).toBe(2)
  })

  it('at most MAX_SCRIPT_RETRIES retries, however long the budget', async () => {
    const clock = { now: 0 }
    const { adapter, counts } = losingAdapter(1000, clock, 0)
    const runner = scriptRunner(adapter, wrap, { retryMs: 60_000, now: () => clock.now })
    await expect(runner.run(s, ['k'], [], false, (r) => r)).rejects.toBeInstanceOf(StoreError)
    expect(counts.evalsha).toBe(1 + MAX_SCRIPT_RETRIES)
  })

  it('an error that is not NOSCRIPT is not retried', async () => {
    const clock = { now: 0 }
    const { adapter, counts } = losingAdapter(0, clock, 0)
    adapter.evalsha = async () => {
      counts.evalsha++
      throw new ReplyError('ERR something else')
    }
    const runner = scriptRunner(adapter, wrap, { retryMs: 100, now: () => clock.now })
    await expect(runner.run(s, ['k'], [], false, (r) => r)).rejects.toBeInstanceOf(StoreError)
    expect(counts).toEqual({ evalsha: 1, loads: 0 })
  })
})
