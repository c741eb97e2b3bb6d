// PostgreSQL clients for integration tests, connected to the server the global setup started. Each
// caller gets its own table (and schema of functions), so test files never see each other's rows.
import pg from 'pg'
import { inject } from 'vitest'
import {
  type PostgresStore,
  type PostgresStoreOptions,
  postgresStore,
} from '../../packages/sluice/src/stores/postgres/index.js'

export function postgresPool(max = 8): pg.Pool {
  return new pg.Pool({ connectionString: inject('postgres').url, max })
}

let unique = 0
/** A table name no other test uses. */
export function freshTable(label: string): string {
  unique++
  return `t_${label}_${process.pid}_${unique}`
}

/** A client-clock store on a fresh table, its schema created. */
export async function freshPostgresStore(
  pool: pg.Pool,
  label: string,
  options: PostgresStoreOptions = {},
): Promise<PostgresStore> {
  const store = postgresStore(pool, { table: freshTable(label), cleanupIntervalMs: 0, ...options })
  return store
}

/** Rows in a table. */
export async function rowCount(pool: pg.Pool, table: string): Promise<number> {
  const { rows } = await pool.query(`SELECT count(*)::int AS n FROM "${table}"`)
  return (rows[0] as { n: number }).n
}
