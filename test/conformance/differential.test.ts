// Differential test: random sequences of operations on the memory store (which runs the TypeScript
// transitions) and on the Redis store (the Lua twins), same fake clock, including blocks, refunds,
// resets and layered all-or-nothing steps. Every StepResult must match.
import { afterAll, describe, it } from 'vitest'
import { postgresStore } from '../../packages/sluice/src/stores/postgres/index.js'
import { redisStore } from '../../packages/sluice/src/stores/redis/index.js'
import { compareWithMemory as compare, policies } from '../helpers/differential.js'
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

const all = Object.keys(policies)
// More seeds for a longer search: SLUICE_DIFF_SEEDS=100 npx vitest run test/conformance/differential.test.ts
const SEEDS = Number(process.env.SLUICE_DIFF_SEEDS ?? 6)
describe('redis store equals the memory store (random sequences)', () => {
  for (const name of all) {
    it(`standalone: ${name}`, async () => {
      for (let seed = 1; seed <= SEEDS; seed++)
        await compare(name, (now) => redisStore(standalone, { now, prefix: freshPrefix('diff') }), seed, [
          name,
        ])
    })
  }
  it('standalone: mixed algorithms, layered', async () => {
    for (let seed = 100; seed < 100 + 2 * SEEDS; seed++)
      await compare('mixed', (now) => redisStore(standalone, { now, prefix: freshPrefix('diff') }), seed, all)
  })
  it('cluster: mixed algorithms, layered (cross-slot groups)', async () => {
    for (let seed = 200; seed < 200 + SEEDS; seed++)
      await compare('cluster', (now) => redisStore(cluster, { now, prefix: freshPrefix('diffc') }), seed, all)
  })
})

describe('postgres store equals the memory store (random sequences)', () => {
  // One table per test, emptied before each seed (creating the schema costs more than a sequence).
  const table = freshTable('diff')
  const postgres = async (now: () => number) => {
    const store = postgresStore(pool, { table, now, cleanupIntervalMs: 0 })
    await store.cleanup()
    await pool.query(`TRUNCATE "${table}"`)
    return store
  }
  for (const name of all) {
    it(`postgres: ${name}`, async () => {
      for (let seed = 1; seed <= SEEDS; seed++) await compare(name, postgres, seed, [name])
    })
  }
  it('postgres: mixed algorithms, layered', async () => {
    for (let seed = 100; seed < 100 + 2 * SEEDS; seed++) await compare('mixed', postgres, seed, all)
  })
})
