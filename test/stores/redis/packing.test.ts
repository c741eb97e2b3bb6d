// What the token bucket and GCRA store: GCRA's arrival time and lead in one integer (Redis int
// encoding: no separate string allocation) while they fit, the text form when they do not; the token
// bucket's level, time and span as text. Both decide as the memory store does across the 13-digit
// boundary of GCRA's packed time and with the clock stepping back.
import { afterAll, describe, expect, it } from 'vitest'
import { ALGORITHMS, type Policy, resolvePolicy } from '../../../packages/sluice/src/policy.js'
import type { Step } from '../../../packages/sluice/src/store.js'
import { memoryStore } from '../../../packages/sluice/src/stores/memory.js'
import { redisStore } from '../../../packages/sluice/src/stores/redis/index.js'
import { stepKeys } from '../../../packages/sluice/src/stores/redis/keys.js'
import { freshPrefix, ioredis } from '../../helpers/redis-clients.js'

const client = ioredis()
afterAll(() => client.disconnect())

describe('token bucket and GCRA layouts', () => {
  it('GCRA stores 100/h as one integer (int encoding): minus its lead, then the arrival time in 13 digits', async () => {
    let now = 1_700_000_000_000
    const prefix = freshPrefix('pack')
    const store = redisStore(client, { prefix, clock: 'client', now: () => now })
    const gcra = resolvePolicy('api', { algorithm: 'gcra', limit: 100, window: '1h' })
    const step: Step = { policy: gcra, key: 'user-1', cost: 1 }
    await store.apply([step], 'consume')
    const key = stepKeys(prefix, step).state
    expect(await client.object('ENCODING', key)).toBe('int')
    // One unit is 36 s: the arrival time 36000 ms ahead of the admit that wrote it. Negative, so a
    // script that reads it as a bare arrival time sees one long past, never one far ahead.
    expect(await client.get(key)).toBe(`-36000${now + 36_000}`)
    // Past 10^13 ms the time takes more digits: the text form, "ms:rem:lead".
    now = 10_000_000_000_000
    await store.apply([step], 'consume')
    expect(await client.get(key)).toBe(`${now + 36_000}:0:36000`)
  })

  it('the token bucket stores "level:at:span" (level = tokens x window, live until at + span)', async () => {
    const now = 1_700_000_000_000
    const prefix = freshPrefix('pack')
    const store = redisStore(client, { prefix, clock: 'client', now: () => now })
    const tb = resolvePolicy('api', { algorithm: 'token-bucket', limit: 100, window: '1h' })
    const step: Step = { policy: tb, key: 'user-1', cost: 5 }
    const [r] = await store.apply([step], 'consume')
    expect(r!.remaining).toBe(95)
    // 95 x 3,600,000 at now; 5 tokens refill in 5 x 36 s.
    expect(await client.get(stepKeys(prefix, step).state)).toBe(`342000000:${now}:180000`)
  })

  const cases: [string, Policy, number][] = [
    ['token bucket 3/s burst 3', { algorithm: 'token-bucket', limit: 3, window: 1000 }, 1e13],
    ['token bucket 100/h', { algorithm: 'token-bucket', limit: 100, window: '1h' }, 5e9],
    // Units of 1000 ms: a remainder of 0, so the packed form up to 10^13 and the text after it.
    ['gcra 1/s burst 3', { algorithm: 'gcra', limit: 1, window: 1000, burst: 3 }, 1e13],
    ['gcra 3/s burst 3', { algorithm: 'gcra', limit: 3, window: 1000 }, 1e13],
  ]
  for (const [label, p, around] of cases) {
    it(`${label}: same results as the memory store around ${around} ms, clock steps back too`, async () => {
      let now = around - 2_500
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
