// Every store Sluice ships, each on a fresh prefix or table and on the client clock it is given:
// for the cases that hold through a limiter on every store (blockDuration, costAboveCapacity).
import type { Store } from '../../packages/sluice/src/store.js'
import { memcachedStore } from '../../packages/sluice/src/stores/memcached/index.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { postgresStore } from '../../packages/sluice/src/stores/postgres/index.js'
import { redisStore } from '../../packages/sluice/src/stores/redis/index.js'
import { memcachedClient, freshPrefix as memcachedPrefix } from '../helpers/memcached-clients.js'
import { freshTable, postgresPool } from '../helpers/postgres-clients.js'
import { freshPrefix, ioredis, ioredisCluster } from '../helpers/redis-clients.js'

export type LimiterStoreFactory = (now: () => number) => Store

/**
 * Limiter options for these cases: they pin what a store decides, not how the limiter copes with a
 * slow one, so a call that a busy machine (or a first call that creates its table) makes slower than
 * the default 100 ms `storeTimeout` must still reach the store instead of being decided degraded.
 */
export const PATIENT = { storeTimeout: '30s' } as const

/** The stores by name, and a function that closes their clients (call it in afterAll). */
export function limiterStores(label: string): {
  stores: [string, LimiterStoreFactory][]
  close(): Promise<void>
} {
  const standalone = ioredis()
  const cluster = ioredisCluster()
  const pool = postgresPool(2)
  const memcached = memcachedClient()
  return {
    stores: [
      ['memory', (now) => memoryStore({ now })],
      ['redis', (now) => redisStore(standalone, { clock: 'client', now, prefix: freshPrefix(label) })],
      [
        'redis cluster',
        (now) => redisStore(cluster, { clock: 'client', now, prefix: freshPrefix(`${label}-c`) }),
      ],
      [
        'postgres',
        (now) =>
          postgresStore(pool, { table: freshTable(label), clock: 'client', now, cleanupIntervalMs: 0 }),
      ],
      [
        'memcached',
        (now) => memcachedStore(memcached, { clock: 'client', now, prefix: memcachedPrefix(label) }),
      ],
    ],
    async close() {
      standalone.disconnect()
      cluster.disconnect()
      memcached.close()
      await pool.end()
    },
  }
}
