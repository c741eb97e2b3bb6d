// One OS process of the PostgreSQL exactness test: keeps `inFlight` requests in flight (each on its
// own connection) against one key per algorithm and prints how many were admitted.
// Run: node --import tsx postgres-hammer-worker.ts <json config>
import pg from 'pg'
import { postgresStore } from '../../../packages/sluice/src/stores/postgres/index.js'
import { hammerOneKey } from '../../helpers/hammer.js'

interface Config {
  url: string
  table: string
  algorithms: ('fixed-window' | 'sliding-window-log' | 'token-bucket' | 'gcra')[]
  attempts: number
  inFlight: number
  limit: number
  window: string
  /** Wall-clock ms at which every worker starts, so the processes overlap. */
  startAt: number
}

const config = JSON.parse(process.argv[2]!) as Config
const pool = new pg.Pool({ connectionString: config.url, max: config.inFlight })
const store = postgresStore(pool, { table: config.table, cleanupIntervalMs: 0 })
// Connect every client before the start, so the race is between decisions, not connections.
const clients = await Promise.all(Array.from({ length: config.inFlight }, () => pool.connect()))
for (const c of clients) c.release()

await new Promise((r) => setTimeout(r, Math.max(0, config.startAt - Date.now())))
const admitted = await hammerOneKey(store, {
  algorithms: config.algorithms,
  attempts: config.attempts,
  lanes: config.inFlight / config.algorithms.length,
  limit: config.limit,
  window: config.window,
})
process.stdout.write(JSON.stringify(admitted))
await store.close()
await pool.end()
