// The shared conformance vectors against PostgreSQL (the plpgsql twins), client clock mode. The
// vectors call the store directly (no deny cache); the limiter cases of the suite run with it on.
import { afterAll } from 'vitest'
import { postgresStore } from '../../packages/sluice/src/stores/postgres/index.js'
import { freshTable, postgresPool } from '../helpers/postgres-clients.js'
import { runConformance } from './suite.js'

const pool = postgresPool()
const table = freshTable('conf')
let truncate = false
afterAll(() => pool.end())

runConformance('postgres', async (now) => {
  const store = postgresStore(pool, { table, clock: 'client', now, cleanupIntervalMs: 0 })
  // One table for the file; vectors run one at a time, each on an empty table.
  if (truncate) await pool.query(`TRUNCATE "${table}", "${table}_records", "${table}_records_version"`)
  else await store.apply([], 'peek').then(() => store.cleanup())
  truncate = true
  return store
})
