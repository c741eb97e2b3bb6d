// The compact layout of the counting algorithms (docs/stores.md#stored-values): on the Redis clock a
// state is one integer whose time is the key's own expiry. Written on the server clock (standalone and
// Cluster); read back as the memory store's state (values laid out by hand, on a client clock far
// enough ahead that Redis keeps the keys); and states of the value layouts, as earlier releases write
// them, carried over by the scripts that write compact ones (a rolling deploy).
import type { Cluster, Redis } from 'ioredis'
import { afterAll, describe, expect, it } from 'vitest'
import { type Policy, resolvePolicy } from '../../../packages/sluice/src/policy.js'
import type { Step } from '../../../packages/sluice/src/store.js'
import { memoryStore } from '../../../packages/sluice/src/stores/memory.js'
import { redisStore } from '../../../packages/sluice/src/stores/redis/index.js'
import { stepKeys } from '../../../packages/sluice/src/stores/redis/keys.js'
import { freshPrefix, ioredis, ioredisCluster } from '../../helpers/redis-clients.js'

const standalone = ioredis()
const cluster = ioredisCluster()
afterAll(() => {
  standalone.disconnect()
  cluster.disconnect()
})

const COUNTING = ['fixed-window', 'sliding-window-counter', 'token-bucket', 'gcra'] as const
type Counting = (typeof COUNTING)[number]
const MINUTE = 60_000

async function redisNow(client: Redis | Cluster): Promise<number> {
  const [seconds = 0, micros = 0] = (await client.time()).map(Number)
  return seconds * 1000 + Math.floor(micros / 1000)
}

describe('on the Redis clock, a state is one integer expiring when it stops mattering', () => {
  for (const [label, client] of [
    ['standalone', standalone],
    ['cluster', cluster],
  ] as const) {
    for (const algorithm of COUNTING) {
      it(`${label}: ${algorithm}, 3 per minute`, async () => {
        const prefix = freshPrefix('compact')
        const store = redisStore(client, { prefix, slotSecret: false })
        const step: Step = {
          policy: resolvePolicy('p', { algorithm, limit: 3, window: MINUTE }),
          key: 'k',
          cost: 1,
        }
        const key = stepKeys(prefix, step).state
        const before = await redisNow(client)
        const results = []
        for (let i = 0; i < 4; i++) {
          results.push((await store.apply([step], 'consume'))[0]!)
          if (i === 0) {
            // One unit of three: the count (fixed window, sliding counter), two whole tokens left
            // (token bucket), the TAT's lead of one emission interval, 20 s (GCRA).
            const first = {
              'fixed-window': '1',
              'sliding-window-counter': '1',
              'token-bucket': '2',
              gcra: '20000',
            }
            expect(await client.get(key)).toBe(first[algorithm])
            // The end: the window's (fixed), the next window's (sliding counter), when the bucket is
            // full again or the TAT (token bucket, GCRA: one unit back in 20 s).
            const end = Number(await client.pexpiretime(key))
            const lead = {
              'fixed-window': MINUTE,
              'sliding-window-counter': 2 * MINUTE,
              'token-bucket': 20_000,
              gcra: 20_000,
            }
            expect(end).toBeGreaterThan(before)
            expect(end).toBeLessThanOrEqual(before + lead[algorithm] + 2000)
            if (algorithm !== 'sliding-window-counter')
              expect(end).toBeGreaterThan(before + lead[algorithm] - 2000)
          }
          if (i < 3) expect(await client.object('ENCODING', key)).toBe('int')
        }
        expect(results.map((r) => [r.allowed, r.remaining])).toEqual([
          [true, 2],
          [true, 1],
          [true, 0],
          [false, 0],
        ])
        expect(results[3]!.retryAfterMs).toBeGreaterThan(0)
        expect(results[3]!.retryAfterMs).toBeLessThanOrEqual(2 * MINUTE)
        await store.reset([step])
        expect(await client.exists(key)).toBe(0)
      })
    }
  }
})

describe('a token bucket refilled by whole milliseconds stays whole tokens', () => {
  for (const [label, client] of [
    ['standalone', standalone],
    ['cluster', cluster],
  ] as const) {
    it(`${label}: 5 per minute, a token spent, then another a millisecond or more later`, async () => {
      const prefix = freshPrefix('compact-whole')
      const store = redisStore(client, { prefix, slotSecret: false })
      const step: Step = {
        policy: resolvePolicy('p', { algorithm: 'token-bucket', limit: 5, window: MINUTE }),
        key: 'k',
        cost: 1,
      }
      const key = stepKeys(prefix, step).state
      await store.apply([step], 'consume')
      expect(await client.get(key)).toBe('4')
      const first = Number(await client.pexpiretime(key))
      // The next decision must see its own millisecond: then the bucket holds 3 tokens and the
      // refill of at least 1 ms (a twelfth of a token per second), which is not whole tokens.
      const written = await redisNow(client)
      while ((await redisNow(client)) === written) {}
      const [second] = await store.apply([step], 'consume')
      expect(second).toMatchObject({ allowed: true, remaining: 3 })
      // 3 whole tokens, a small shared integer, where the level is 3 tokens and the refill.
      expect(await client.get(key)).toBe('3')
      expect(await client.object('ENCODING', key)).toBe('int')
      // Two tokens of 5 per minute refill in 24 s from the first spend, whenever the second was.
      expect(Number(await client.pexpiretime(key))).toBe(first + 12_000)
      await store.reset([step])
    })
  }

  it('a level no whole number of ms refills to (written under another limit) stays -1 - level', async () => {
    const prefix = freshPrefix('compact-part')
    const store = redisStore(standalone, { prefix })
    const step: Step = {
      policy: resolvePolicy('p', { algorithm: 'token-bucket', limit: 5, window: MINUTE }),
      key: 'k',
      cost: 1,
    }
    const key = stepKeys(prefix, step).state
    // 3 tokens and 1 unit (tokens x ms) at now, as an earlier release's value layout: 5 per minute
    // refills 5 units per ms, so the level stays 1 above a multiple of 5 whatever time passes.
    const span = Math.ceil((5 * MINUTE - 180_001) / 5)
    await standalone.psetex(key, span, `180001:${await redisNow(standalone)}:${span}`)
    const [result] = await store.apply([step], 'consume')
    expect(result).toMatchObject({ allowed: true, remaining: 2 })
    // Whole tokens (2) would drop that unit: the exact level is written, 2 tokens and a part.
    const level = -1 - Number(await standalone.get(key))
    expect(level % 5).toBe(1)
    expect(Math.floor(level / MINUTE)).toBe(2)
    await store.reset([step])
  })
})

/** A state of the memory store, laid out by hand as the compact layout holds it. */
interface Scenario {
  algorithm: Counting
  /** The steps (ms after T, cost) that make the state, on the memory store. */
  steps: [number, number][]
  /** The compact value and its expiry (ms after T) that hold the same state. */
  value: string
  endsAt: number
}

const scenarios: Scenario[] = [
  // 2 of 5 in the window [T, T + 1 min).
  { algorithm: 'fixed-window', steps: [[0, 2]], value: '2', endsAt: MINUTE },
  // 2 in the window of T, then 1 in the next: previous 2, current 1, live 2 windows from T + 1 min.
  {
    algorithm: 'sliding-window-counter',
    steps: [
      [10_000, 2],
      [70_000, 1],
    ],
    value: '200000001',
    endsAt: 3 * MINUTE,
  },
  // 3 whole tokens of 5 left, full again 24 s later.
  { algorithm: 'token-bucket', steps: [[0, 2]], value: '3', endsAt: 24_000 },
  // Then 1 s of refill (5,000) and one more token spent: 125,000 tokens x ms, full at 1 s + 35 s.
  {
    algorithm: 'token-bucket',
    steps: [
      [0, 2],
      [1000, 1],
    ],
    value: '-125001',
    endsAt: 36_000,
  },
  // The same state as the scripts write it: its 2 whole tokens (120,000), read as of 1 s before
  // the write, so the 5,000 units refilled since come back.
  {
    algorithm: 'token-bucket',
    steps: [
      [0, 2],
      [1000, 1],
    ],
    value: '2',
    endsAt: 36_000,
  },
  // TAT 2 emission intervals (12 s each) ahead, written with that lead.
  { algorithm: 'gcra', steps: [[0, 2]], value: '24000', endsAt: 24_000 },
]

describe('a compact value reads as the memory store holds the same state', () => {
  // Far enough ahead that Redis keeps the keys (PXAT is on its clock), on a window boundary.
  const T = Math.ceil((Date.now() + 10 * 365 * 24 * 3600_000) / MINUTE) * MINUTE
  for (const s of scenarios) {
    it(`${s.algorithm} ${s.value}`, async () => {
      const last = s.steps.at(-1)![0]
      for (const probe of [0, 1, 500, 11_999, 12_000, 23_999, 24_000, 59_999, 60_000, 61_000, 125_000]) {
        let now = T
        const clock = () => now
        const prefix = freshPrefix('compact-read')
        const redis = redisStore(standalone, { prefix, clock: 'client', now: clock })
        const memory = memoryStore({ now: clock })
        const policy = resolvePolicy('p', { algorithm: s.algorithm, limit: 5, window: MINUTE } as Policy)
        const step: Step = { policy, key: 'k', cost: 1 }
        for (const [at, cost] of s.steps) {
          now = T + at
          await memory.apply([{ ...step, cost }], 'consume')
        }
        await standalone.set(stepKeys(prefix, step).state, s.value, 'PXAT', T + s.endsAt)
        now = T + last + probe
        for (const mode of ['peek', 'consume', 'consume'] as const)
          expect(await redis.apply([step], mode), `${mode} at +${probe}`).toEqual(
            await memory.apply([step], mode),
          )
        await redis.reset([step])
      }
    })
  }
})

describe('a rolling deploy: states of the value layouts carry over into compact ones', () => {
  // What earlier releases wrote on the Redis clock, 2 of 3 units spent, and what follows.
  const old: Record<Counting, (now: number) => [value: string, ttlMs: number]> = {
    'fixed-window': (now) => [`${now - 1000}:2:${MINUTE}`, MINUTE - 1000],
    'sliding-window-counter': (now) => {
      const aligned = Math.floor(now / MINUTE) * MINUTE
      return [`${aligned}:0:2:${MINUTE}`, aligned + 2 * MINUTE - now]
    },
    // One token of three left at now, full again in 40 s.
    'token-bucket': (now) => [`${MINUTE}:${now}:40000`, 40_000],
    // TAT 40 s ahead, written with that lead.
    gcra: (now) => [`-40000${String(now + 40_000).padStart(13, '0')}`, 40_000],
  }
  for (const algorithm of COUNTING) {
    it(`${algorithm}: the third unit is admitted once, then the key holds one integer`, async () => {
      const prefix = freshPrefix('compact-old')
      const store = redisStore(standalone, { prefix })
      const step: Step = {
        policy: resolvePolicy('p', { algorithm, limit: 3, window: MINUTE }),
        key: 'k',
        cost: 1,
      }
      const key = stepKeys(prefix, step).state
      const [value, ttl] = old[algorithm](await redisNow(standalone))
      await standalone.psetex(key, ttl, value)
      const [third] = await store.apply([step], 'consume')
      expect(third).toMatchObject({ allowed: true, remaining: 0 })
      expect((await store.apply([step], 'consume'))[0]).toMatchObject({ allowed: false, remaining: 0 })
      expect(await standalone.object('ENCODING', key)).toBe('int')
      expect(await standalone.get(key)).not.toContain(':')
      await store.reset([step])
    })
  }
})

/** A value of the value layouts: with a colon, or GCRA's minus the lead then a 13-digit TAT. */
const isValueLayout = (value: string) => value.includes(':') || (value.startsWith('-') && value.length > 14)

describe('compactValues: false, for a deploy alongside releases that read only the value layouts', () => {
  for (const algorithm of COUNTING) {
    it(`${algorithm}: writes the value layout on the Redis clock, and both stores read what the other wrote`, async () => {
      const prefix = freshPrefix('compact-off')
      const values = redisStore(standalone, { prefix, compactValues: false })
      const compact = redisStore(standalone, { prefix })
      const step: Step = {
        policy: resolvePolicy('p', { algorithm, limit: 4, window: MINUTE }),
        key: 'k',
        cost: 1,
      }
      const key = stepKeys(prefix, step).state
      const remaining = []
      for (const store of [values, compact, values, compact, values]) {
        const [result] = await store.apply([step], 'consume')
        remaining.push(result!.allowed ? result!.remaining : -1)
        if (result!.allowed) {
          const value = (await standalone.get(key))!
          expect(isValueLayout(value), value).toBe(store === values)
        }
      }
      expect(remaining).toEqual([3, 2, 1, 0, -1])
      await values.reset([step])
    })
  }

  it('is checked like every option', () => {
    expect(() => redisStore(standalone, { compactValues: 'no' as never })).toThrow(
      expect.objectContaining({ code: 'SLUICE_INVALID_OPTIONS' }),
    )
  })
})
