// settle's forced charge on real Redis and Redis Cluster: the same sequence of reserve, settle past
// the limit and consume on the memory store (TypeScript) and the Redis store (Lua), same fake
// clock, every decision equal; layered settles across Cluster slots; a concurrency wait on Redis.
import { afterAll, describe, expect, it } from 'vitest'
import { createLimiter } from '../../../packages/sluice/src/limiter.js'
import type { Policy } from '../../../packages/sluice/src/policy.js'
import type { Store } from '../../../packages/sluice/src/store.js'
import { memoryStore } from '../../../packages/sluice/src/stores/memory.js'
import { redisStore } from '../../../packages/sluice/src/stores/redis/index.js'
import { freshPrefix, ioredis, ioredisCluster } from '../../helpers/redis-clients.js'

const standalone = ioredis()
const cluster = ioredisCluster()
afterAll(() => {
  standalone.disconnect()
  cluster.disconnect()
})

const shapes: Record<string, Policy> = {
  fw: { algorithm: 'fixed-window', limit: 10, window: 1000 },
  swl: { algorithm: 'sliding-window-log', limit: 10, window: 1000 },
  swc: { algorithm: 'sliding-window-counter', limit: 10, window: 1000 },
  tb: { algorithm: 'token-bucket', limit: 10, window: 1000, burst: 4 },
  gcra: { algorithm: 'gcra', limit: 10, window: 1000, burst: 3 },
}

/** Reserve, settle well past the limit, then consume every 50 ms until admitted: what each answered. */
async function sequence(store: Store, clock: { t: number }, name: string): Promise<unknown[]> {
  const limiter = createLimiter({ store, localDenyCache: false, policies: { p: shapes[name]! } })
  const seen: unknown[] = []
  const r = await limiter.reserve('p', 'user:{k}', { cost: 2 })
  seen.push([r.allowed, r.remaining])
  await r.settle(17)
  for (let i = 0; i < 60; i++) {
    const d = await limiter.consume('p', 'user:{k}')
    seen.push([d.allowed, d.remaining, d.retryAfterMs, d.resetMs])
    clock.t += 50
  }
  return seen
}

describe('forced charge: Redis decides like the memory store', () => {
  for (const [label, client] of [
    ['standalone Redis', () => standalone],
    ['Redis Cluster', () => cluster],
  ] as const) {
    for (const name of Object.keys(shapes)) {
      it(`${label}, ${name}: reserve 2, settle 17, then consume until the debt drained`, async () => {
        const start = 1_700_000_000_000
        const memClock = { t: start }
        const redisClock = { t: start }
        const expected = await sequence(memoryStore({ now: () => memClock.t }), memClock, name)
        const actual = await sequence(
          redisStore(client(), { prefix: freshPrefix('charge'), now: () => redisClock.t }),
          redisClock,
          name,
        )
        expect(actual).toEqual(expected)
        // The overshoot was real: the first consume after the settle was denied.
        expect((expected[1] as unknown[])[0]).toBe(false)
      })
    }
  }

  it('Redis Cluster: a layered reservation across slots settles every layer', async () => {
    const limiter = createLimiter({
      store: redisStore(cluster, { prefix: freshPrefix('charge-layered') }),
      policies: {
        tokens: { algorithm: 'fixed-window', limit: 10_000, window: '1m' },
        org: { algorithm: 'fixed-window', limit: 50_000, window: '1m' },
      },
    })
    const r = await limiter.reserve([
      { policy: 'tokens', key: 'user-1', cost: 1_000 },
      { policy: 'org', key: 'acme', cost: 1_000 },
    ])
    await r.settle(12_000)
    expect(await limiter.peek('tokens', 'user-1')).toMatchObject({ allowed: false, remaining: 0 })
    expect((await limiter.peek('org', 'acme')).remaining).toBe(38_000)
    await expect(r.settle(1)).rejects.toMatchObject({ code: 'SLUICE_RESERVATION_SETTLED' })
  })

  it('standalone Redis: a concurrency waiter gets the lease a release frees', async () => {
    const limiter = createLimiter({
      store: redisStore(standalone, { prefix: freshPrefix('wait-lease') }),
      policies: { jobs: { algorithm: 'concurrency', limit: 1, timeout: '30s' } },
    })
    const first = await limiter.acquire('jobs', 'k')
    const waiting = limiter.wait('jobs', 'k', { maxWaitMs: 3_000 })
    setTimeout(() => void first.lease!.release(), 150)
    // Admitted within maxWaitMs (the lease itself would run 30 s).
    const d = await waiting
    expect(d.allowed).toBe(true)
    await d.lease!.release()
  })
})
