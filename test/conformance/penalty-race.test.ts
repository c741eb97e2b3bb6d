// Two limiters, each with its own connection to one store, racing denials of one key under a
// `penalty` policy, on every store: every denial is counted once (exactly `after` of them earn one
// penalty, one less earns none), one offence earns one penalty whoever sees it, and the levels
// climb one per offence. Redis, Redis Cluster, PostgreSQL and memcached; the clock is the client's.
import { afterAll, describe, expect, it } from 'vitest'
import { createLimiter, type Decision, type Limiter } from '../../packages/sluice/src/index.js'
import type { Store } from '../../packages/sluice/src/store.js'
import { memcachedStore } from '../../packages/sluice/src/stores/memcached/index.js'
import { postgresStore } from '../../packages/sluice/src/stores/postgres/index.js'
import { redisStore } from '../../packages/sluice/src/stores/redis/index.js'
import { memcachedClient, freshPrefix as memcachedPrefix } from '../helpers/memcached-clients.js'
import { freshTable, postgresPool } from '../helpers/postgres-clients.js'
import { freshPrefix, ioredis, ioredisCluster } from '../helpers/redis-clients.js'
import { PATIENT } from './limiter-stores.js'

const policies = {
  api: {
    algorithm: 'fixed-window',
    limit: 2,
    window: '1m',
    penalty: { after: 4, within: '1h', block: '1m', factor: 3, max: '1h' },
  },
} as const

const closers: (() => unknown)[] = []
afterAll(async () => {
  for (const close of closers) await close()
})

/** Two stores on one place of truth, each over a connection of its own. */
type Pair = (now: () => number) => [Store, Store]
const two = (make: () => Store): [Store, Store] => [make(), make()]
const pairs: [string, Pair][] = [
  [
    'redis',
    (now) => {
      const prefix = freshPrefix('penalty-race')
      return two(() => {
        const client = ioredis()
        closers.push(() => client.disconnect())
        return redisStore(client, { clock: 'client', now, prefix })
      })
    },
  ],
  [
    'redis cluster',
    (now) => {
      const prefix = freshPrefix('penalty-race-c')
      return two(() => {
        const client = ioredisCluster()
        closers.push(() => client.disconnect())
        return redisStore(client, { clock: 'client', now, prefix })
      })
    },
  ],
  [
    'postgres',
    (now) => {
      const table = freshTable('penalty_race')
      return two(() => {
        const pool = postgresPool(4)
        closers.push(() => pool.end())
        return postgresStore(pool, { table, clock: 'client', now, cleanupIntervalMs: 0 })
      })
    },
  ],
  [
    'memcached',
    (now) => {
      const prefix = memcachedPrefix('penalty-race')
      return two(() => {
        const client = memcachedClient()
        closers.push(() => client.close())
        return memcachedStore(client, { clock: 'client', now, prefix })
      })
    },
  ],
]

describe.each(pairs)('penalty with two limiters on one %s', (_, makePair) => {
  let clock = 1_700_000_000_000
  const limiters: Limiter<'api'>[] = makePair(() => clock).map((store) =>
    createLimiter({ ...PATIENT, store, policies }),
  )
  afterAll(async () => {
    await Promise.all(limiters.map((l) => l.close()))
  })

  /** `count` consumes of `key`, alternating between the two limiters, all in flight at once. */
  function race(key: string, count: number): Promise<Decision[]> {
    return Promise.all(Array.from({ length: count }, (_, i) => limiters[i % 2]!.consume('api', key)))
  }
  const penalties = (ds: Decision[]) => ds.filter((d) => d.penalty !== undefined)

  it('counts every racing denial once: after - 1 earn nothing, after earn one penalty', async () => {
    // 2 admitted + 3 denials: one short.
    const first = await race('exact', 5)
    expect(first.filter((d) => d.allowed)).toHaveLength(2)
    expect(first.filter((d) => d.reason === 'limit')).toHaveLength(3)
    expect(penalties(first)).toEqual([])
    // The fourth denial, from either limiter, is the one.
    const fourth = await race('exact', 1)
    expect(fourth[0]).toMatchObject({ reason: 'blocked', retryAfterMs: 60_000, penalty: { level: 0 } })
  })

  it('one offence earns one penalty, and each repeat climbs one level', async () => {
    const expected = [60_000, 180_000, 540_000, 1_620_000, 3_600_000, 3_600_000]
    for (const [level, blockMs] of expected.entries()) {
      // 2 admitted, then 38 denials racing: the fourth earns the penalty, the rest are denials
      // racing it (not counted) or blocked.
      const ds = await race('hammered', 40)
      const got = penalties(ds)
      expect(got).toHaveLength(1)
      expect(got[0]).toMatchObject({ reason: 'blocked', retryAfterMs: blockMs, penalty: { level, blockMs } })
      expect(ds.filter((d) => d.allowed)).toHaveLength(2)
      expect(await limiters[level % 2]!.peek('api', 'hammered')).toMatchObject({
        reason: 'blocked',
        retryAfterMs: blockMs,
      })
      // The block's end: the window has ended too, and the level is remembered (2 h).
      clock += blockMs
    }
  })
})
