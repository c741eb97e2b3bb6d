// The options of `postgresStore`, checked once when the store is made and resolved with their defaults.
import { InvalidOptionsError } from '../../errors.js'
import { boolean, must, object, oneOf, optional, text, wholeNumber } from '../../option-checks.js'
import { checkKnownKeys, isOptionsObject, keysOf } from '../../options.js'
import { TABLE_NAME } from './schema.js'

export interface PostgresStoreOptions {
  /** The table (optionally `schema.table`), lower case `[a-z0-9_]`. Default `sluice_limits`. */
  table?: string
  /**
   * Whose clock decides: `server` (default) reads the database's clock inside the function, so
   * hosts with skewed clocks agree; `client` uses `now()` of this process (deterministic tests).
   */
  clock?: 'server' | 'client'
  /** The clock in ms for `clock: 'client'` (default `Date.now`). Giving it implies `clock: 'client'`. */
  now?: () => number
  /**
   * Create the table and functions if missing (default `true`), on first use, idempotently. With
   * `false` run docs/postgres-schema.sql (or `postgresSchemaSql(table)`) yourself beforehand.
   */
  migrate?: boolean
  /** How often dead rows are deleted, in ms (default 60,000; 0 turns the timer off: call `cleanup()`). */
  cleanupIntervalMs?: number
  /** Most rows one cleanup statement deletes (default 1,000): bounds how long it holds row locks. */
  cleanupBatch?: number
  /**
   * Named prepared statements (default `true`): each connection parses and plans a statement once.
   * Names are unique per table and statement text, so two stores never clash. Turn off behind a
   * pooler in transaction mode (PgBouncer before 1.21), which cannot keep them.
   */
  preparedStatements?: boolean
}

/** What `postgresStore` runs with. */
export interface PostgresStoreSettings {
  table: string
  /** Whether this process's `now()` decides (`clock: 'client'`, or a `now` given). */
  clientClock: boolean
  now: () => number
  migrate: boolean
  cleanupIntervalMs: number
  cleanupBatch: number
  preparedStatements: boolean
}

const OPTION_KEYS = keysOf<PostgresStoreOptions>({
  table: true,
  clock: true,
  now: true,
  migrate: true,
  cleanupIntervalMs: true,
  cleanupBatch: true,
  preparedStatements: true,
})

// Checked in this order (not OPTION_KEYS's): the first problem is the one reported.
const validateOptions = object(
  {
    table: optional(
      text(TABLE_NAME, {
        mismatch: 'table must be [schema.]name in lower case letters, digits and _ (at most 41 characters)',
      }),
    ),
    clock: optional(oneOf(['server', 'client'], "clock must be 'server' or 'client'")),
    now: optional(must((v) => typeof v === 'function', 'now must be a function returning ms')),
    migrate: optional(boolean('migrate must be true or false')),
    preparedStatements: optional(boolean('preparedStatements must be true or false')),
    cleanupIntervalMs: optional(
      wholeNumber(0, 2 ** 31 - 1, 'cleanupIntervalMs must be a whole number of ms from 0 (off) to 2^31 - 1'),
    ),
    cleanupBatch: optional(wholeNumber(1, 100_000, 'cleanupBatch must be a whole number from 1 to 100,000')),
  } satisfies Record<keyof PostgresStoreOptions, unknown>,
  true,
)

/** Validate the options of `postgresStore` (throws `InvalidOptionsError`) and apply the defaults. */
export function postgresStoreSettings(options: PostgresStoreOptions): PostgresStoreSettings {
  if (!isOptionsObject(options)) throw new InvalidOptionsError('postgresStore: options must be an object')
  checkKnownKeys('postgresStore', options, OPTION_KEYS)
  const problem = validateOptions(options)
  if (problem !== undefined) throw new InvalidOptionsError(`postgresStore: ${problem.message}`)
  if (options.clock === 'server' && options.now !== undefined) {
    throw new InvalidOptionsError("postgresStore: now is only used with clock: 'client'; remove one of them")
  }
  return {
    table: options.table ?? 'sluice_limits',
    clientClock: options.clock === 'client' || options.now !== undefined,
    now: options.now ?? Date.now,
    migrate: options.migrate ?? true,
    cleanupIntervalMs: options.cleanupIntervalMs ?? 60_000,
    cleanupBatch: options.cleanupBatch ?? 1000,
    preparedStatements: options.preparedStatements ?? true,
  }
}
