// A policy's parameters changing under keys Redis already holds: two limiters sharing one policy
// id on one Redis (the server's clock, as deployed), and values stored in the layouts that carry no
// record of the parameters that wrote them. The conformance vectors hold every store to the same
// numbers; these hold Redis to bounded waits and TTLs.
import { afterAll, describe, expect, it } from 'vitest'
import { createLimiter } from '../../../packages/sluice/src/limiter.js'
import {
  ALGORITHMS,
  type AlgorithmName,
  type Policy,
  resolvePolicy,
} from '../../../packages/sluice/src/policy.js'
import type { Step } from '../../../packages/sluice/src/store.js'
import { memoryStore } from '../../../packages/sluice/src/stores/memory.js'
import { redisStore } from '../../../packages/sluice/src/stores/redis/index.js'
import { stepKeys } from '../../../packages/sluice/src/stores/redis/keys.js'
import { freshPrefix, ioredis } from '../../helpers/redis-clients.js'

const client = ioredis()
afterAll(() => client.disconnect())

const tokens = (burst: number): Policy => ({
  id: 'tokens',
  algorithm: 'token-bucket',
  limit: 100,
  window: '1m',
  burst,
})

describe('a policy whose parameters change, on Redis', () => {
  it('two limiters, one policy id: 51 spent of 100 per minute, then burst 5 admits 5 and waits a token, never years', async () => {
    const prefix = freshPrefix('change')
    const store = redisStore(client, { prefix })
    const before = createLimiter({ store, policies: { tokens: tokens(100) } })
    const after = createLimiter({ store, policies: { tokens: tokens(5) } })
    const key = stepKeys(prefix, { policy: resolvePolicy('tokens', tokens(5)), key: 'k', cost: 1 }).state
    for (let i = 0; i < 51; i++) expect((await before.consume('tokens', 'k')).allowed).toBe(true)
    const admitted = []
    for (let i = 0; i < 5; i++) admitted.push((await after.consume('tokens', 'k')).allowed)
    expect(admitted).toEqual([true, true, true, true, true])
    const denied = await after.consume('tokens', 'k')
    expect(denied.allowed).toBe(false)
    // One token refills in 600 ms; the bucket of 5 in 3 s.
    expect(denied.retryAfterMs).toBeGreaterThan(0)
    expect(denied.retryAfterMs).toBeLessThanOrEqual(600)
    expect(denied.resetMs).toBeLessThanOrEqual(3000)
    const ttl = await client.pttl(key)
    expect(ttl).toBeGreaterThan(0)
    expect(ttl).toBeLessThanOrEqual(3000)
  })
})

/** A value of the layout that records nothing of the parameters, from one of today's. */
function earlier(algorithm: AlgorithmName, value: string, full: number): string {
  switch (algorithm) {
    case 'fixed-window': // start:count:span -> start:count
    case 'sliding-window-counter': // start:previous:current:window -> start:previous:current
      return value.slice(0, value.lastIndexOf(':'))
    case 'token-bucket': {
      // level:at:span -> "1", level in d digits, at modulo 10^(18 - d) (d = digits of full)
      const [level, at] = value.split(':')
      const d = String(full).length
      const kd = 18 - d
      return `1${level!.padStart(d, '0')}${String(BigInt(at!) % 10n ** BigInt(kd)).padStart(kd, '0')}`
    }
    case 'gcra': // -(lead, then ms in 13 digits) -> ms
      return value.includes(':') ? value : value.slice(-13)
    default:
      return value
  }
}

describe('values of the layouts that record no parameters are read as written under the ones in force', () => {
  for (const algorithm of ALGORITHMS) {
    if (algorithm === 'concurrency') continue
    it(`${algorithm}: after the layout change, decisions go on as the memory store's`, async () => {
      let now = 1_700_000_000_000
      const clock = () => now
      const prefix = freshPrefix('layout')
      const redis = redisStore(client, { prefix, clock: 'client', now: clock })
      const memory = memoryStore({ now: clock })
      const policy = resolvePolicy('p', { algorithm, limit: 4, window: 1000 } as Policy)
      const step: Step = { policy, key: 'k', cost: 1 }
      const key = stepKeys(prefix, step).state
      for (const store of [redis, memory]) await store.apply([{ ...step, cost: 3 }], 'consume')
      if (algorithm === 'sliding-window-log') {
        // The head of the list without the span: "0:1000" -> "0".
        expect(await client.lindex(key, 0)).toBe('0:1000')
        await client.lset(key, 0, '0')
      } else {
        const value = await client.get(key)
        const ttl = await client.pttl(key)
        await client.set(key, earlier(algorithm, value!, policy.capacity * policy.windowMs), 'PX', ttl)
      }
      for (const move of [100, 0, 300, 250, 700]) {
        now += move
        for (const mode of ['peek', 'consume'] as const) {
          expect(await redis.apply([step], mode), `${mode} at +${move}`).toEqual(
            await memory.apply([step], mode),
          )
        }
      }
    })
  }

  it('token bucket: a one-integer value written under another burst never reads as a wait past a full refill', async () => {
    const now = 1_700_000_012_345
    const prefix = freshPrefix('layout')
    const redis = redisStore(client, { prefix, clock: 'client', now: () => now })
    const wrote = resolvePolicy('tokens', tokens(100))
    const reads = resolvePolicy('tokens', tokens(5))
    const key = stepKeys(prefix, { policy: wrote, key: 'k', cost: 1 }).state
    // 49 tokens of 100 at now, as the one-integer layout laid it out for burst 100 (7 digits).
    await client.set(key, earlier('token-bucket', `${49 * 60_000}:${now}:30600`, 100 * 60_000), 'PX', 30_600)
    const results = []
    for (let i = 0; i < 7; i++)
      results.push((await redis.apply([{ policy: reads, key: 'k', cost: 1 }], 'consume'))[0]!)
    for (const r of results) {
      expect(r.retryAfterMs).toBeLessThanOrEqual(600)
      expect(r.resetMs).toBeLessThanOrEqual(3000)
    }
    expect(results.filter((r) => r.allowed).length).toBeGreaterThanOrEqual(1)
    // A full refill, plus the second the client clock's keys live beyond what they mean.
    expect(await client.pttl(key)).toBeLessThanOrEqual(3000 + 1000)
  })
})
