// The PostgreSQL store: every algorithm runs as its plpgsql twin (schema.ts), one function call, so
// one round trip and one transaction, per decision; layered steps are all or nothing inside it. Works
// with node-postgres (`pg`) `Pool` or `Client`, or anything with the same `query(text, values)`.
import { createHash } from 'node:crypto'
import { periodAt } from '../../calendar.js'
import { InvalidOptionsError, StoreClosedError, StoreError, UnsupportedError } from '../../errors.js'
import type { Step, StepResult, Store } from '../../store.js'
import { type PostgresStoreOptions, postgresStoreSettings } from './options.js'
import { postgresRecords, recordStatements } from './records.js'
import { postgresSchemaSql, schemaNames } from './schema.js'

export type { PostgresStoreOptions } from './options.js'

export { postgresSchemaSql } from './schema.js'

/** The subset of a node-postgres `Pool` or `Client` the store uses (structural: `pg` is optional). */
export interface PostgresClientLike {
  query(config: { text: string; values?: unknown[]; name?: string }): Promise<{ rows: unknown[] }>
}

export interface PostgresStore extends Store {
  /** A network store: always a promise. */
  apply(steps: readonly Step[], mode: 'consume' | 'peek'): Promise<StepResult[]>
  /**
   * Delete rows whose state and block have both ended, a batch at a time, skipping rows a decision
   * holds. Resolves with the number deleted. The store calls it every `cleanupIntervalMs`.
   */
  cleanup(): Promise<number>
}

/**
 * In client clock mode rows are deleted this long after they stop meaning anything, to absorb host
 * clock skew (the Redis store keeps keys the same extra time).
 */
const CLIENT_CLOCK_SLACK_MS = 1000
/** Cleanup statements one `cleanup()` runs at most: the rest waits for the next run. */
const MAX_CLEANUP_ROUNDS = 100
/** Keys up to this many UTF-8 bytes are stored as they are; longer ones as a SHA-256. */
const MAX_RAW_KEY_BYTES = 64
/** Marks a hashed key: 0xff never occurs in UTF-8, so no raw key can equal a hashed one. */
const HASHED = Buffer.from([0xff])
const LONE_SURROGATE = /[\uD800-\uDFFF]/

/**
 * The key column of a step. Raw UTF-8 when short and well-formed (any bytes, NUL included: it is a
 * bytea parameter, never SQL text); otherwise 0xff + SHA-256 of the UTF-16 code units, which keeps
 * lone surrogates apart. The policy id is its own column, so no two policies share a row.
 */
export function postgresKey(key: string): Buffer {
  if (key.length <= MAX_RAW_KEY_BYTES && !LONE_SURROGATE.test(key)) {
    const raw = Buffer.from(key, 'utf8')
    if (raw.length <= MAX_RAW_KEY_BYTES) return raw
  }
  return Buffer.concat([HASHED, createHash('sha256').update(key, 'utf16le').digest()])
}

/** A lease id as text the database compares exactly (hex of its UTF-16 code units; '' stays ''). */
function leaseText(leaseId: string | undefined): string {
  return leaseId === undefined ? '' : Buffer.from(leaseId, 'utf16le').toString('hex')
}

/** SQLSTATEs after which the same call is simply tried again: deadlock, serialization failure. */
const RETRY_CODES = new Set(['40P01', '40001'])

/**
 * A store backed by PostgreSQL. The store does not own the pool: `close()` stops the store (and its
 * cleanup timer), and the caller ends the pool.
 * @example
 * const store = postgresStore(new pg.Pool({ connectionString: process.env.DATABASE_URL }), { table: 'sluice_limits' })
 */
export function postgresStore(client: PostgresClientLike, options: PostgresStoreOptions = {}): PostgresStore {
  if (typeof (client as Partial<PostgresClientLike> | null)?.query !== 'function') {
    throw new InvalidOptionsError(
      'postgresStore: pass a pg Pool or Client (new pg.Pool({ connectionString }))',
    )
  }
  const {
    table,
    clientClock,
    now,
    migrate,
    cleanupBatch: batch,
    cleanupIntervalMs: intervalMs,
    preparedStatements: prepared,
  } = postgresStoreSettings(options)
  const names = schemaNames(table)
  const sql = {
    apply: `SELECT ${names.fn('apply')}($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) AS r`,
    refund: `SELECT ${names.fn('refund')}($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) AS r`,
    block: `SELECT ${names.fn('block')}($1, $2, $3, $4) AS r`,
    reset: `DELETE FROM ${names.table} WHERE (policy, key) IN (SELECT * FROM unnest($1::text[], $2::bytea[]))`,
    cleanup: `SELECT ${names.fn('cleanup')}(${names.fn('now')}($1) - $2, $3) AS r`,
    ...recordStatements(names),
  }
  /** Statement names: `sluice_` + a hash of the text, which names the table. */
  const statementNames = new Map(
    Object.values(sql).map((text) => [
      text,
      `sluice_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`,
    ]),
  )
  let closed = false
  let ready: Promise<void> | undefined
  let cleaning: Promise<number> | undefined

  const clock = (): number | null => (clientClock ? Math.floor(now()) : null)

  function wrap(error: unknown): StoreError {
    if (error instanceof StoreError) return error
    const detail = error instanceof Error ? error.message : String(error)
    const hint =
      // 42883: a function is missing, 42P01: a table (the records tables of an older schema).
      ['42883', '42P01'].includes(String((error as { code?: unknown }).code)) && !migrate
        ? ` (run docs/postgres-schema.sql for table ${table}, or use migrate: true)`
        : ''
    return new StoreError(`postgres store: ${detail}${hint}`, { cause: error })
  }

  /** The schema, once per store (again after a failure, e.g. the database was down at start). */
  function schema(): Promise<void> {
    if (!migrate) return Promise.resolve()
    ready ??= client.query({ text: postgresSchemaSql(table) }).then(
      () => {},
      (error: unknown) => {
        ready = undefined
        throw wrap(error)
      },
    )
    return ready
  }

  async function query(text: string, values: unknown[]): Promise<unknown> {
    if (closed) throw new StoreClosedError('postgresStore: the store is closed')
    await schema()
    for (let attempt = 0; ; attempt++) {
      try {
        const result = await client.query(
          prepared ? { name: statementNames.get(text)!, text, values } : { text, values },
        )
        return (result.rows[0] as { r?: unknown } | undefined)?.r
      } catch (error) {
        // The function is one transaction: a deadlock victim changed nothing and can run again.
        const code = (error as { code?: unknown }).code
        if (attempt < 2 && typeof code === 'string' && RETRY_CODES.has(code)) continue
        throw wrap(error)
      }
    }
  }

  /**
   * The step columns every function takes: policy ids, keys, algorithms, limits, windows,
   * capacities, calendar periods, the next periods' lengths, costs, leases. `at` is the call's
   * clock argument (null: the server's), which draws the calendar periods.
   */
  function columns(steps: readonly Step[], at: number | null = null): unknown[] {
    let nowMs = at
    const n = steps.length
    const policies = new Array<string>(n)
    const keys = new Array<Buffer>(n)
    const algorithms = new Array<string>(n)
    const limits = new Array<number>(n)
    const windows = new Array<number>(n)
    const capacities = new Array<number>(n)
    const periods = new Array<number>(n)
    const followings = new Array<number>(n)
    const costs = new Array<number>(n)
    const leases = new Array<string>(n)
    for (let i = 0; i < n; i++) {
      const step = steps[i]!
      const p = step.policy
      policies[i] = p.id
      keys[i] = postgresKey(step.key)
      algorithms[i] = p.algorithm
      limits[i] = p.limit
      capacities[i] = p.capacity
      if (p.calendar === undefined) {
        windows[i] = p.windowMs
        periods[i] = -1
        followings[i] = p.windowMs
      } else {
        // The period by this process's clock (docs/policies.md#calendar-quotas: clock skew).
        nowMs ??= Date.now()
        const period = periodAt(nowMs, p.calendar)
        windows[i] = period.endMs - period.startMs
        periods[i] = period.startMs
        followings[i] = period.nextEndMs - period.endMs
      }
      costs[i] = step.cost
      leases[i] = leaseText(step.leaseId)
    }
    return [policies, keys, algorithms, limits, windows, capacities, periods, followings, costs, leases]
  }

  function results(reply: unknown, n: number): StepResult[] {
    if (!Array.isArray(reply) || reply.length !== n * 5) {
      throw new StoreError(`postgres store: unexpected reply from the apply function: ${String(reply)}`)
    }
    const out = new Array<StepResult>(n)
    for (let i = 0; i < n; i++) {
      const at = i * 5
      out[i] = {
        allowed: Number(reply[at]) === 1,
        remaining: Number(reply[at + 1]),
        resetMs: Number(reply[at + 2]),
        retryAfterMs: Number(reply[at + 3]),
        blocked: Number(reply[at + 4]) === 1,
      }
    }
    return out
  }

  async function cleanupOnce(): Promise<number> {
    let deleted = 0
    for (let round = 0; round < MAX_CLEANUP_ROUNDS; round++) {
      const n = Number(await query(sql.cleanup, [clock(), clientClock ? CLIENT_CLOCK_SLACK_MS : 0, batch]))
      deleted += n
      if (n < batch || closed) break
    }
    return deleted
  }

  let timer: ReturnType<typeof setInterval> | undefined
  if (intervalMs > 0) {
    timer = setInterval(() => {
      if (cleaning !== undefined || closed) return
      // A failed run (database down) is the next decision's error to report, not the timer's.
      store.cleanup().catch(() => {})
    }, intervalMs)
    timer.unref()
  }

  const store: PostgresStore = {
    name: 'postgres',
    inProcess: false,
    // Client clock: the functions decide on `now`, so the limiter's deny cache must time with it too.
    now: clientClock ? () => Math.floor(now()) : Date.now,
    // No plpgsql forced charge: settle above the estimate is refused, nothing written.
    async charge() {
      throw new UnsupportedError(
        'postgres store: no forced charge (settle above the estimate); settle at most the estimate',
      )
    },
    async apply(steps, mode) {
      if (steps.length === 0) return []
      const at = clock()
      const reply = await query(sql.apply, [mode === 'peek', at, ...columns(steps, at)])
      return results(reply, steps.length)
    },
    async refund(steps) {
      if (steps.length === 0) return
      const at = clock()
      await query(sql.refund, [at, ...columns(steps, at)])
    },
    async block(steps, durationMs) {
      if (steps.length === 0) return
      if (!Number.isSafeInteger(durationMs) || durationMs <= 0) {
        throw new InvalidOptionsError(
          `block: duration must be a positive whole number of ms, got ${durationMs}`,
        )
      }
      const [policies, keys] = columns(steps)
      await query(sql.block, [clock(), durationMs, policies, keys])
    },
    async reset(steps) {
      if (steps.length === 0) return
      const [policies, keys] = columns(steps)
      await query(sql.reset, [policies, keys])
    },
    cleanup() {
      cleaning ??= cleanupOnce().finally(() => {
        cleaning = undefined
      })
      return cleaning
    },
    records: postgresRecords(query, sql, clock),
    async close() {
      closed = true
      if (timer !== undefined) clearInterval(timer)
      await cleaning?.catch(() => {})
    },
  }
  return store
}
