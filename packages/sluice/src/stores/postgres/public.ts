// The `sluice/postgres` entry: the factory, its types and the schema SQL, nothing of the store's internals.
export type { PostgresClientLike, PostgresStore, PostgresStoreOptions } from './index.js'
export { postgresSchemaSql, postgresStore } from './index.js'
