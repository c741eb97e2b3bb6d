// The bound on records: a (kind, policy) holds at most MAX_RECORDS_PER_POLICY live records on every
// store that keeps them (memory, Redis, Redis Cluster, PostgreSQL). A put of a new subject past it is
// refused with SLUICE_TOO_MANY_RECORDS and writes nothing; replacing a subject it holds is not
// refused, and records that expired make room.
import { afterAll, describe, expect, it } from 'vitest'
import { MAX_RECORDS_PER_POLICY } from '../../packages/sluice/src/records.js'
import type { Store } from '../../packages/sluice/src/store.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { postgresStore } from '../../packages/sluice/src/stores/postgres/index.js'
import { redisStore } from '../../packages/sluice/src/stores/redis/index.js'
import { freshTable, postgresPool } from '../helpers/postgres-clients.js'
import { freshPrefix, ioredis, ioredisCluster } from '../helpers/redis-clients.js'

const standalone = ioredis()
const cluster = ioredisCluster()
const pool = postgresPool()
afterAll(async () => {
  standalone.disconnect()
  cluster.disconnect()
  await pool.end()
})

const stores: [string, (now: () => number) => Store][] = [
  ['memory', (now) => memoryStore({ now })],
  ['redis', (now) => redisStore(standalone, { clock: 'client', now, prefix: freshPrefix('rb') })],
  ['redis cluster', (now) => redisStore(cluster, { clock: 'client', now, prefix: freshPrefix('rbc') })],
  [
    'postgres',
    (now) => postgresStore(pool, { table: freshTable('rb'), clock: 'client', now, cleanupIntervalMs: 0 }),
  ],
]

describe.each(stores)('records bound on %s', (_, make) => {
  it(`holds ${MAX_RECORDS_PER_POLICY} live records per (kind, policy), refuses the next, and expired ones make room`, async () => {
    let clock = 1_700_000_000_000
    const store = make(() => clock)
    try {
      const { records } = store
      // The first ten expire after 1 s; the rest never do.
      for (let from = 0; from < MAX_RECORDS_PER_POLICY; from += 500)
        await Promise.all(
          Array.from({ length: 500 }, (_, i) =>
            records.put('deny', 'p', `s${from + i}`, 'v', from + i < 10 ? 1000 : undefined),
          ),
        )
      const version = await records.version()
      await expect(records.put('deny', 'p', 'one-more', 'v')).rejects.toMatchObject({
        code: 'SLUICE_TOO_MANY_RECORDS',
      })
      expect(await records.get('deny', 'p', 'one-more')).toBeUndefined()
      expect(await records.version()).toBe(version)
      // Another kind and another policy have their own bound.
      await records.put('allow', 'p', 'one-more', 'v')
      await records.put('deny', 'q', 'one-more', 'v')
      // Replacing a subject the set holds is no new record.
      await records.put('deny', 'p', 's20', 'replaced')
      expect((await records.get('deny', 'p', 's20'))?.value).toBe('replaced')
      clock += 1000
      await records.put('deny', 'p', 'one-more', 'v')
      expect(await records.list('deny', 'p')).toHaveLength(MAX_RECORDS_PER_POLICY - 10 + 1)
    } finally {
      await store.close()
    }
  }, 120_000)
})
