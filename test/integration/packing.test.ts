// Token bucket state packed into one integer (Redis int encoding: no separate string allocation),
// exact across the wrap of the packed time field and with the text fallback when it does not fit.
import { afterAll, describe, expect, it } from 'vitest'
import { ALGORITHMS, type Policy, resolvePolicy } from '../../packages/sluice/src/policy.js'
import type { Step } from '../../packages/sluice/src/store.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { redisStore } from '../../packages/sluice/src/stores/redis/index.js'
import { stepKeys } from '../../packages/sluice/src/stores/redis/keys.js'
import { freshPrefix, ioredis } from './clients.js'

const client = ioredis()
afterAll(() => client.disconnect())

describe('token bucket packing', () => {
  it('stores 100/h as one integer (int encoding), no larger than a GCRA key', async () => {
    const prefix = freshPrefix('pack')
    const store = redisStore(client, { prefix })
    const tb = resolvePolicy('api', { algorithm: 'token-bucket', limit: 100, window: '1h' })
    const step: Step = { policy: tb, key: 'user-1', cost: 1 }
    await store.apply([step], 'consume')
    const key = stepKeys(prefix, step).state
    expect(await client.object('ENCODING', key)).toBe('int')
    const value = await client.get(key)
    expect(value).toMatch(/^1\d{18}$/)
    const gcra = resolvePolicy('api', { algorithm: 'gcra', limit: 100, window: '1h' })
    const other: Step = { policy: gcra, key: 'user-2', cost: 1 }
    await store.apply([other], 'consume')
    expect(await client.memory('USAGE', key)).toBeLessThanOrEqual(
      Number(await client.memory('USAGE', stepKeys(prefix, other).state)),
    )
  })

  it('falls back to "level:at" text when capacity x window leaves no room for the time', async () => {
    const prefix = freshPrefix('pack')
    const store = redisStore(client, { prefix })
    const tb = resolvePolicy('big', { algorithm: 'token-bucket', limit: 1_000_000, window: '1h' })
    const step: Step = { policy: tb, key: 'user-1', cost: 5 }
    const [r] = await store.apply([step], 'consume')
    expect(r!.remaining).toBe(999_995)
    expect(await client.get(stepKeys(prefix, step).state)).toMatch(/^\d+:\d+$/)
  })

  const cases: [string, Policy, number][] = [
    // full = 3000 (4 digits): the time field holds 14 digits, so it wraps at 10^14 ms.
    ['3/s burst 3', { algorithm: 'token-bucket', limit: 3, window: 1000 }, 1e14],
    // full = 100 x 3.6e6 (9 digits): the time field wraps every 10^9 ms.
    ['100/h', { algorithm: 'token-bucket', limit: 100, window: '1h' }, 5e9],
  ]
  for (const [label, p, wrap] of cases) {
    it(`${label}: same results as the memory store across the wrap at ${wrap} ms, clock steps back too`, async () => {
      let now = wrap - 2_500
      const clock = () => now
      const redis = redisStore(client, { prefix: freshPrefix('pack'), clock: 'client', now: clock })
      const memory = memoryStore({ now: clock })
      const policy = resolvePolicy('p', p)
      const moves = [0, 300, 400, 700, 1, 999, -600, 250, 2_000, -1_500, 3_000, 36_000, 5, 5]
      for (const [i, move] of moves.entries()) {
        now += move
        const steps: Step[] = [{ policy, key: 'k', cost: 1 + (i % 2) }]
        expect(await redis.apply(steps, 'consume'), `step ${i} at ${now}`).toEqual(
          await memory.apply(steps, 'consume'),
        )
      }
    })
  }
})

describe('flat single-step scripts (one-<algorithm>)', () => {
  for (const algorithm of ALGORITHMS) {
    it(`${algorithm}: a short block on a drained key reports the longer wait of the units, as memory does`, async () => {
      let now = 1_000_000
      const clock = () => now
      const redis = redisStore(client, { prefix: freshPrefix('flat'), clock: 'client', now: clock })
      const memory = memoryStore({ now: clock })
      const policy = resolvePolicy(
        'p',
        algorithm === 'concurrency'
          ? { algorithm, limit: 2, timeout: 10_000 }
          : { algorithm, limit: 2, window: 10_000 },
      )
      const steps: Step[] = [{ policy, key: 'k', cost: 1 }]
      for (const store of [redis, memory]) {
        await store.apply(steps, 'consume')
        await store.apply(steps, 'consume')
        await store.block(steps, 50)
      }
      for (const move of [0, 10, 60, 5_000]) {
        now += move
        for (const mode of ['peek', 'consume'] as const) {
          const got = await redis.apply(steps, mode)
          expect(got, `${mode} at +${move}`).toEqual(await memory.apply(steps, mode))
        }
      }
      const [held] = await redis.apply(steps, 'peek')
      expect(held!.blocked).toBe(false)
    })
  }
})
