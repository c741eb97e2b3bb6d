// A Decision's times are whole milliseconds. The Store contract asks stores for whole ms; a store
// that answers a fraction anyway (a hand-written one, say) has it rounded up, so a caller is never
// told to retry before the store would admit it.
import { describe, expect, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import type { StepResult } from '../../packages/sluice/src/store.js'
import { forwardStore, isPending } from '../../packages/sluice/src/store.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'

/** A memory store whose answers carry `resetMs` and `retryAfterMs` with a fraction added. */
function fractionalStore(fraction: number) {
  const inner = memoryStore({ now: () => 1_000_000 })
  const shifted = (results: StepResult[]): StepResult[] =>
    results.map((r) => ({
      ...r,
      resetMs: r.resetMs + fraction,
      retryAfterMs: r.retryAfterMs + fraction,
    }))
  return forwardStore(inner, {
    apply(steps, mode) {
      const answer = inner.apply(steps, mode)
      return isPending(answer) ? answer.then(shifted) : shifted(answer)
    },
  })
}

function limiterOver(fraction: number) {
  return createLimiter({
    store: fractionalStore(fraction),
    policies: {
      api: { algorithm: 'fixed-window', limit: 1, window: '10s' },
      burst: { algorithm: 'token-bucket', limit: 2, window: '1s' },
    },
    localDenyCache: false,
  })
}

describe('decision times', () => {
  it('rounds a fractional time from the store up to the next whole millisecond', async () => {
    const limiter = limiterOver(0.25)
    const first = await limiter.consume('api', 'u')
    expect(first).toMatchObject({ allowed: true, resetMs: 10_001, retryAfterMs: 1 })
    const denied = await limiter.consume('api', 'u')
    expect(denied).toMatchObject({ allowed: false, resetMs: 10_001, retryAfterMs: 10_001 })
  })

  it('rounds each layer of a layered check, and its headline', async () => {
    const limiter = limiterOver(0.5)
    const d = await limiter.consume([
      { policy: 'api', key: 'u' },
      { policy: 'burst', key: 'u' },
    ])
    for (const layer of [d, ...d.results]) {
      expect(Number.isInteger(layer.resetMs)).toBe(true)
      expect(Number.isInteger(layer.retryAfterMs)).toBe(true)
    }
    expect(d.results.map((r) => r.resetMs)).toEqual([10_001, 501])
  })

  it('leaves whole milliseconds as the store answered them', async () => {
    const limiter = limiterOver(0)
    expect(await limiter.consume('api', 'u')).toMatchObject({ resetMs: 10_000, retryAfterMs: 0 })
    expect(await limiter.consume('api', 'u')).toMatchObject({ resetMs: 10_000, retryAfterMs: 10_000 })
  })
})
