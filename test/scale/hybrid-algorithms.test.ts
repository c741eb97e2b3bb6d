// Hybrid mode for every counting algorithm, one process, fake clock, real redis-server: the local
// decision of sliding-window-counter, token-bucket and gcra, how a sync merges the other instances'
// admissions into it, and what stays refused (sliding-window-log, concurrency, layers, block).
import { Redis } from 'ioredis'
import { afterAll, describe, expect, inject, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { type RatePolicy, resolvePolicy } from '../../packages/sluice/src/policy.js'
import { HybridPolicy } from '../../packages/sluice/src/scale/hybrid.js'
import { hybridRedis } from '../../packages/sluice/src/stores/redis/index.js'

const { port } = inject('redis')
const client = new Redis(port, '127.0.0.1')
afterAll(() => client.disconnect())

let run = 0
/** Two instances of one hybrid policy sharing Redis, on one fake clock (the timer never fires: syncEvery 10 s). */
function pair(policy: Omit<RatePolicy, 'mode' | 'syncEvery'>, startMs: number) {
  const resolved = resolvePolicy('h', { ...policy, mode: 'hybrid', syncEvery: '10s' })
  const clock = { now: startMs }
  const backend = hybridRedis(client, { prefix: `hyalg${Date.now()}-${run++}` })
  const make = () => new HybridPolicy(resolved, backend, () => clock.now)
  const a = make()
  const b = make()
  const step = { policy: resolved, key: 'k', cost: 1 }
  const take = (h: HybridPolicy, n: number) => {
    let admitted = 0
    for (let i = 0; i < n; i++) if (h.apply(step, 'consume').allowed) admitted++
    return admitted
  }
  return { a, b, clock, step, take, backend, close: () => Promise.all([a.close(), b.close()]) }
}

// A start on a whole 100 s boundary of a recent clock, so window indexes are round.
const T0 = Math.floor(Date.now() / 100_000) * 100_000

describe('hybrid policy validation', () => {
  for (const algorithm of ['sliding-window-counter', 'token-bucket', 'gcra'] as const)
    it(`accepts ${algorithm}`, () => {
      expect(resolvePolicy('h', { algorithm, limit: 5, window: '1s', mode: 'hybrid' }).syncEveryMs).toBe(100)
    })
  it('refuses sliding-window-log and concurrency, naming the algorithms that work', () => {
    for (const policy of [
      { algorithm: 'sliding-window-log', limit: 5, window: '1s', mode: 'hybrid' },
      { algorithm: 'concurrency', limit: 5, timeout: '1s', mode: 'hybrid' },
    ]) {
      let error: unknown
      try {
        resolvePolicy('h', policy)
      } catch (e) {
        error = e
      }
      expect(error).toMatchObject({ code: 'SLUICE_INVALID_POLICY' })
      expect((error as Error).message).toContain(
        'hybrid mode works for fixed-window, sliding-window-counter, token-bucket, gcra',
      )
      expect((error as Error).message).toContain(policy.algorithm)
    }
  })
})

describe('sliding-window-counter, hybrid', () => {
  it('weighs the previous window, and a sync brings the other instance into both windows', async () => {
    const { a, b, clock, step, take, close } = pair(
      { algorithm: 'sliding-window-counter', limit: 10, window: '10s' },
      T0 + 1000,
    )
    expect(take(a, 6)).toBe(6)
    expect(take(b, 3)).toBe(3)
    await a.flush()
    await b.flush()
    // b has seen a's 6: 9 used of 10.
    expect(b.apply(step, 'peek')).toMatchObject({ allowed: true, remaining: 1 })
    expect(take(b, 2)).toBe(1)
    await b.flush()
    // Only a key decided on since the last flush is pulled: a touches it first.
    a.apply(step, 'peek')
    await a.flush()
    expect(a.apply(step, 'peek')).toMatchObject({ allowed: false, remaining: 0 })
    // Halfway into the next window the 10 of the previous one weigh 5.
    clock.now = T0 + 15_000
    expect(a.apply(step, 'peek')).toMatchObject({ allowed: true, remaining: 5 })
    expect(take(a, 4)).toBe(4)
    await a.flush()
    b.apply(step, 'peek')
    await b.flush()
    // b: previous 10 x 0.5 + a's 4 in this window = 9.
    expect(b.apply(step, 'peek')).toMatchObject({ allowed: true, remaining: 1 })
    expect(take(b, 3)).toBe(1)
    const denied = b.apply(step, 'consume')
    expect(denied.allowed).toBe(false)
    expect(denied.retryAfterMs).toBeGreaterThan(0)
    await close()
  })

  it("pulls the previous window again after it ended, so another instance's late flush of it counts", async () => {
    const { a, b, clock, step, take, close } = pair(
      { algorithm: 'sliding-window-counter', limit: 10, window: '100s' },
      T0 + 1000,
    )
    expect(take(a, 5)).toBe(5)
    await a.flush()
    expect(take(b, 1)).toBe(1)
    await b.flush()
    // a admits 3 more that it has not flushed when the window ends.
    expect(take(a, 3)).toBe(3)
    clock.now = T0 + 101_000
    b.apply(step, 'peek')
    await b.flush()
    // b knows 6 of the previous window (weight 0.99): 5.94 used.
    expect(b.apply(step, 'peek')).toMatchObject({ remaining: 4 })
    // a's next flush carries its 3 into the ended window; b's next pull (within 4 syncs) sees them.
    a.apply(step, 'peek')
    await a.flush()
    await b.flush()
    expect(b.apply(step, 'peek')).toMatchObject({ allowed: true, remaining: 1 })
    await close()
  })

  it('a new instance reads the previous window too before it counts the key', async () => {
    const { a, b, clock, step, take, close } = pair(
      { algorithm: 'sliding-window-counter', limit: 10, window: '10s' },
      T0 + 2000,
    )
    expect(take(a, 10)).toBe(10)
    await a.flush()
    clock.now = T0 + 12_000
    // b never saw the key: its first decision is optimistic, its first pull reads both windows.
    b.apply(step, 'peek')
    await b.flush()
    expect(b.apply(step, 'peek')).toMatchObject({ allowed: true, remaining: 2 })
    await close()
  })
})

for (const algorithm of ['token-bucket', 'gcra'] as const)
  describe(`${algorithm}, hybrid`, () => {
    it('decides on the local bucket and merges the other instance at a sync', async () => {
      // 10 per 10 s: one unit a second, burst 10.
      const { a, b, clock, step, take, close } = pair({ algorithm, limit: 10, window: '10s' }, T0 + 500)
      expect(take(a, 7)).toBe(7)
      await a.flush()
      // b decides on the key once (on a full bucket: it knows nothing yet), its pull brings a's 7.
      expect(b.apply(step, 'peek')).toMatchObject({ allowed: true, remaining: 10 })
      await b.flush()
      // b sees a's 7 spent: 3 left.
      expect(b.apply(step, 'peek')).toMatchObject({ allowed: true, remaining: 3 })
      expect(take(b, 5)).toBe(3)
      await b.flush()
      a.apply(step, 'peek')
      await a.flush()
      expect(a.apply(step, 'peek')).toMatchObject({ allowed: false, remaining: 0 })
      // Two seconds refill two units, on both instances.
      clock.now += 2000
      expect(take(a, 5)).toBe(2)
      await a.flush()
      b.apply(step, 'peek')
      await b.flush()
      expect(b.apply(step, 'peek')).toMatchObject({ allowed: false, remaining: 0 })
      await close()
    })

    it('both instances drain the bucket before a sync: the merge leaves a debt that delays both', async () => {
      const { a, b, clock, step, take, close } = pair({ algorithm, limit: 10, window: '10s' }, T0 + 500)
      expect(take(a, 10)).toBe(10)
      expect(take(b, 10)).toBe(10)
      await a.flush()
      await b.flush()
      a.apply(step, 'peek')
      await a.flush()
      // 20 spent of a bucket of 10: the next unit is 11 s away on both (10 s of debt + 1 s).
      for (const h of [a, b]) {
        const d = h.apply(step, 'consume')
        expect(d).toMatchObject({ allowed: false, remaining: 0 })
        expect(d.retryAfterMs).toBe(11_000)
      }
      clock.now += 11_000
      expect(take(a, 2)).toBe(1)
      await close()
    })

    it('a refund reaches the other instance as a credit', async () => {
      const { a, b, step, take, close } = pair({ algorithm, limit: 10, window: '10s' }, T0 + 500)
      expect(take(a, 10)).toBe(10)
      await a.flush()
      b.apply(step, 'peek')
      await b.flush()
      expect(b.apply(step, 'peek').allowed).toBe(false)
      a.refund({ ...step, cost: 3 })
      expect(a.apply(step, 'peek')).toMatchObject({ allowed: true, remaining: 3 })
      await a.flush()
      b.apply(step, 'peek')
      await b.flush()
      expect(b.apply(step, 'peek')).toMatchObject({ allowed: true, remaining: 3 })
      await close()
    })

    it('counts a bucket in slices of at least one full refill, and Redis holds what was admitted', async () => {
      // Burst 300 at one unit a second: 300 s to refill (more than 10 syncs of 10 s).
      const { a, b, clock, backend, take, close } = pair(
        { algorithm, limit: 10, window: '10s', burst: 300 },
        T0,
      )
      expect(a.sliceMs).toBe(300_000)
      const first = Math.floor(T0 / 300_000)
      expect(take(a, 4) + take(b, 5)).toBe(9)
      clock.now = (first + 1) * 300_000 + 1000
      expect(take(a, 2)).toBe(2)
      await close()
      const counts = await client.mget(backend.keyOf('h', 'k', first), backend.keyOf('h', 'k', first + 1))
      expect(counts.map(Number)).toEqual([9, 2])
    })
  })

describe('hybrid: a failed flush', () => {
  it('keeps every count, across a slice change, until Redis answers again', async () => {
    // A client to a port nothing listens on, with no offline queue: every flush fails at once.
    const dead = new Redis(1, '127.0.0.1', {
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
    })
    dead.on('error', () => {})
    const prefix = `hyfail${Date.now()}`
    const live = hybridRedis(client, { prefix })
    let backend = hybridRedis(dead, { prefix })
    const policy = resolvePolicy('h', {
      algorithm: 'token-bucket',
      limit: 10,
      window: '10s',
      mode: 'hybrid',
      syncEvery: '10s',
    })
    const clock = { now: T0 + 500 }
    const h = new HybridPolicy(
      policy,
      { add: (c) => backend.add(c), remove: (k) => backend.remove(k), keyOf: live.keyOf },
      () => clock.now,
    )
    const step = { policy, key: 'k', cost: 1 }
    for (let i = 0; i < 4; i++) h.apply(step, 'consume')
    await h.flush()
    expect(h.lastError).toBeDefined()
    clock.now += h.sliceMs
    for (let i = 0; i < 2; i++) h.apply(step, 'consume')
    await h.flush()
    expect(h.lastError).toBeDefined()
    backend = live
    await h.close()
    expect(h.lastError).toBeUndefined()
    const first = Math.floor((T0 + 500) / h.sliceMs)
    const counts = await client.mget(live.keyOf('h', 'k', first), live.keyOf('h', 'k', first + 1))
    expect(counts.map(Number)).toEqual([4, 2])
    dead.disconnect()
  })
})

describe('hybrid: layers and block stay refused', () => {
  for (const algorithm of ['fixed-window', 'sliding-window-counter', 'token-bucket', 'gcra'] as const)
    it(`${algorithm}: no layered check, no block`, async () => {
      const limiter = createLimiter({
        hybrid: hybridRedis(client, { prefix: `hyref${Date.now()}` }),
        policies: {
          h: { algorithm, limit: 5, window: '1s', mode: 'hybrid' },
          plain: { algorithm: 'fixed-window', limit: 5, window: '1s' },
        },
      })
      await expect(
        limiter.consume([
          { policy: 'h', key: 'k' },
          { policy: 'plain', key: 'k' },
        ]),
      ).rejects.toMatchObject({ code: 'SLUICE_INVALID_OPTIONS' })
      await expect(limiter.block('h', 'k', '1s')).rejects.toMatchObject({ code: 'SLUICE_INVALID_OPTIONS' })
      expect((await limiter.consume('h', 'k')).allowed).toBe(true)
      await limiter.close()
    })
})
