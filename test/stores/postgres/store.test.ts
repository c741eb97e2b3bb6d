// The PostgreSQL store against the real server of the global setup: keys of any bytes, one round
// trip per decision, layered all or nothing, expiry and bounded cleanup, the server clock, the schema
// file for `migrate: false`, and option validation.
import { readFileSync } from 'node:fs'
import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import { createLimiter } from '../../../packages/sluice/src/limiter.js'
import { resolvePolicy } from '../../../packages/sluice/src/policy.js'
import type { Step } from '../../../packages/sluice/src/store.js'
import {
  type PostgresClientLike,
  postgresSchemaSql,
  postgresStore,
} from '../../../packages/sluice/src/stores/postgres/index.js'
import { freshTable, postgresPool, rowCount } from '../../helpers/postgres-clients.js'

const pool = postgresPool()
afterAll(() => pool.end())

const fw = resolvePolicy('fw', { algorithm: 'fixed-window', limit: 1, window: '1s' })
const other = resolvePolicy('other', { algorithm: 'fixed-window', limit: 1, window: '1s' })

/** A client that counts the queries it forwards (round trips: pg sends one query per round trip). */
function counting(): PostgresClientLike & { queries: string[] } {
  const queries: string[] = []
  return {
    queries,
    query(config) {
      queries.push(config.text)
      return pool.query(config)
    },
  }
}

describe('keys of any bytes', () => {
  const keys = [
    'plain',
    'ünïcødé ✓ 日本語 🚦',
    "quote ' and '' and \\' ); DROP TABLE x; --",
    'nul \u0000 inside',
    '\u0000',
    'x'.repeat(10_240),
    `${'y'.repeat(10_239)}z`,
    'lone \uD800 surrogate',
    'lone \uDBFF surrogate',
    'a'.repeat(64),
    'a'.repeat(65),
    '\\x00',
    '%s %d {} $1',
  ]

  it('each key is its own counter, apart from every other key and from other policies', async () => {
    const table = freshTable('keys')
    const store = postgresStore(pool, { table, now: () => 1_700_000_000_000, cleanupIntervalMs: 0 })
    for (const key of keys) {
      const [first] = await store.apply([{ policy: fw, key, cost: 1 }], 'consume')
      expect(first, JSON.stringify(key.slice(0, 40))).toMatchObject({ allowed: true, remaining: 0 })
    }
    for (const key of keys) {
      const [again] = await store.apply([{ policy: fw, key, cost: 1 }], 'consume')
      expect(again!.allowed, JSON.stringify(key.slice(0, 40))).toBe(false)
      // The same key under another policy id is another row.
      const [elsewhere] = await store.apply([{ policy: other, key, cost: 1 }], 'consume')
      expect(elsewhere!.allowed).toBe(true)
    }
    expect(await rowCount(pool, table)).toBe(keys.length * 2)
    // Long keys are hashed: no row holds more than a short key column.
    const { rows } = await pool.query(`SELECT max(octet_length(key))::int AS longest FROM "${table}"`)
    expect((rows[0] as { longest: number }).longest).toBeLessThanOrEqual(64)
    // reset of one key removes exactly its row.
    await store.reset([{ policy: fw, key: keys[3]!, cost: 1 }])
    expect(await rowCount(pool, table)).toBe(keys.length * 2 - 1)
    await store.close()
  })
})

describe('one round trip per decision', () => {
  it('a single and a layered consume are one query each; a layered denial charges no layer', async () => {
    const client = counting()
    const table = freshTable('trips')
    let clock = 1_700_000_000_000
    const store = postgresStore(client, { table, now: () => clock, cleanupIntervalMs: 0 })
    const wide = resolvePolicy('wide', { algorithm: 'token-bucket', limit: 10, window: '1s' })
    await store.cleanup() // creates the schema
    client.queries.length = 0
    const layered: Step[] = [
      { policy: wide, key: 'k', cost: 1 },
      { policy: fw, key: 'k', cost: 1 },
    ]
    expect((await store.apply(layered, 'consume')).map((r) => r.allowed)).toEqual([true, true])
    expect(client.queries).toHaveLength(1)
    const denied = await store.apply(layered, 'consume')
    expect(denied.map((r) => r.allowed)).toEqual([true, false])
    expect(client.queries).toHaveLength(2)
    // The bucket was not charged by the denied decision: 9 left (10 - the first decision's 1).
    expect(denied[0]!.remaining).toBe(9)
    const [peeked] = await store.apply([{ policy: wide, key: 'k', cost: 1 }], 'peek')
    expect(peeked!.remaining).toBe(9)
    await store.refund([{ policy: fw, key: 'k', cost: 1 }])
    await store.block([{ policy: fw, key: 'k', cost: 1 }], 500)
    expect(client.queries).toHaveLength(5)
    const [blocked] = await store.apply([{ policy: fw, key: 'k', cost: 1 }], 'consume')
    expect(blocked).toMatchObject({ allowed: false, blocked: true, retryAfterMs: 500 })
    clock += 500
    expect((await store.apply([{ policy: fw, key: 'k', cost: 1 }], 'consume'))[0]!.allowed).toBe(true)
    await store.close()
  })
})

describe('the local deny cache over the postgres store', () => {
  for (const cache of [true, false]) {
    it(`deny cache ${cache ? 'on: a denied key costs no query until its retry time' : 'off: every decision is a query'}`, async () => {
      const client = counting()
      let clock = 1_700_000_000_000
      const store = postgresStore(client, {
        table: freshTable('deny'),
        now: () => clock,
        cleanupIntervalMs: 0,
      })
      const limiter = createLimiter({
        store,
        policies: { once: { algorithm: 'fixed-window', limit: 1, window: '1s' } },
        localDenyCache: cache ? { maxKeys: 100 } : false,
      })
      expect((await limiter.consume('once', 'k')).allowed).toBe(true)
      const before = client.queries.length
      for (let i = 0; i < 10; i++) expect((await limiter.consume('once', 'k')).allowed).toBe(false)
      expect(client.queries.length - before).toBe(cache ? 1 : 10)
      clock += 1000
      const d = await limiter.consume('once', 'k')
      expect(d).toMatchObject({ allowed: true, remaining: 0 })
      expect(client.queries.length - before).toBe(cache ? 2 : 11)
      await limiter.close()
    })
  }
})

describe('nothing outlives its meaning', () => {
  it('after every window passes and cleanup runs, the table is empty', async () => {
    const table = freshTable('expiry')
    let clock = 1_700_000_000_000
    const store = postgresStore(pool, { table, now: () => clock, cleanupIntervalMs: 0, cleanupBatch: 7 })
    const limiter = createLimiter({
      store,
      policies: {
        fw: { algorithm: 'fixed-window', limit: 3, window: '1s' },
        swl: { algorithm: 'sliding-window-log', limit: 3, window: '2s' },
        swc: { algorithm: 'sliding-window-counter', limit: 3, window: '1s' },
        tb: { algorithm: 'token-bucket', limit: 3, window: '1s' },
        gcra: { algorithm: 'gcra', limit: 3, window: '1s' },
        conc: { algorithm: 'concurrency', limit: 3, timeout: '3s' },
      },
      localDenyCache: false,
    })
    const names = ['fw', 'swl', 'swc', 'tb', 'gcra', 'conc'] as const
    for (let i = 0; i < 20; i++) {
      for (const name of names) await limiter.consume(name, `user-${i}`)
    }
    await limiter.block('fw', 'blocked-user', '5s')
    expect(await rowCount(pool, table)).toBe(20 * names.length + 1)
    // Nothing has ended yet: cleanup deletes nothing.
    expect(await store.cleanup()).toBe(0)
    // The longest meaning is the 5 s block; the sliding counter's state lasts 2 windows.
    clock += 4000
    const partly = await store.cleanup()
    expect(partly).toBe(20 * names.length)
    expect(await rowCount(pool, table)).toBe(1)
    clock += 1000 + 1000 // the block ends; plus the client-clock slack
    expect(await store.cleanup()).toBe(1)
    expect(await rowCount(pool, table)).toBe(0)
    await limiter.close()
  })

  it('a decision that empties a state deletes its row; a denied first hit leaves none', async () => {
    const table = freshTable('empty')
    const store = postgresStore(pool, { table, now: () => 1_700_000_000_000, cleanupIntervalMs: 0 })
    const slots = resolvePolicy('slots', { algorithm: 'concurrency', limit: 1, timeout: '10s' })
    await store.apply([{ policy: slots, key: 'k', cost: 1, leaseId: 'L' }], 'consume')
    expect(await rowCount(pool, table)).toBe(1)
    await store.refund([{ policy: slots, key: 'k', cost: 1, leaseId: 'L' }])
    expect(await rowCount(pool, table)).toBe(0)
    // A cost above the limit is denied on a fresh key: the placeholder row is gone again.
    const [denied] = await store.apply([{ policy: fw, key: 'fresh', cost: 2 }], 'consume')
    expect(denied!.allowed).toBe(false)
    expect(await rowCount(pool, table)).toBe(0)
    await store.close()
  })

  it('cleanup deletes in batches and never waits on a row a decision holds', async () => {
    const table = freshTable('batch')
    let clock = 1_700_000_000_000
    const store = postgresStore(pool, { table, now: () => clock, cleanupIntervalMs: 0, cleanupBatch: 10 })
    for (let i = 0; i < 35; i++) await store.apply([{ policy: fw, key: `k${i}`, cost: 1 }], 'consume')
    clock += 10_000
    // Another session holds one dead row locked, as a decision in flight would.
    const holder = await pool.connect()
    try {
      await holder.query('BEGIN')
      await holder.query(`SELECT 1 FROM "${table}" WHERE key = $1 FOR UPDATE`, [Buffer.from('k7')])
      const started = Date.now()
      expect(await store.cleanup()).toBe(34)
      expect(Date.now() - started).toBeLessThan(5000)
      expect(await rowCount(pool, table)).toBe(1)
    } finally {
      await holder.query('ROLLBACK')
      holder.release()
    }
    expect(await store.cleanup()).toBe(1)
    await store.close()
  })

  it('the cleanup timer runs by itself', async () => {
    const table = freshTable('timer')
    let clock = 1_700_000_000_000
    const store = postgresStore(pool, { table, now: () => clock, cleanupIntervalMs: 50 })
    await store.apply([{ policy: fw, key: 'k', cost: 1 }], 'consume')
    clock += 5000
    const deadline = Date.now() + 5000
    while ((await rowCount(pool, table)) > 0 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50))
    expect(await rowCount(pool, table)).toBe(0)
    await store.close()
  })
})

describe('the server clock (default)', () => {
  it('decides on the database clock: a window closes after its time on the server', async () => {
    const table = freshTable('server')
    const store = postgresStore(pool, { table, cleanupIntervalMs: 0 })
    // The server's clock decides; the store's `now` is this process's, for the deny cache's timing.
    expect(Math.abs(store.now() - Date.now())).toBeLessThan(1_000)
    const short = resolvePolicy('short', { algorithm: 'fixed-window', limit: 1, window: 300 })
    const [a] = await store.apply([{ policy: short, key: 'k', cost: 1 }], 'consume')
    const [b] = await store.apply([{ policy: short, key: 'k', cost: 1 }], 'consume')
    expect(a!.allowed).toBe(true)
    expect(b!.allowed).toBe(false)
    expect(b!.retryAfterMs).toBeGreaterThan(0)
    expect(b!.retryAfterMs).toBeLessThanOrEqual(300)
    await new Promise((r) => setTimeout(r, b!.retryAfterMs + 20))
    const [c] = await store.apply([{ policy: short, key: 'k', cost: 1 }], 'consume')
    expect(c!.allowed).toBe(true)
    await store.close()
  })
})

describe('schema', () => {
  it('docs/postgres-schema.sql is the SQL migrate runs for the default table', () => {
    const file = readFileSync(new URL('../../../docs/postgres-schema.sql', import.meta.url), 'utf8')
    expect(file).toBe(postgresSchemaSql('sluice_limits'))
  })

  it('migrate: false works on a schema created from the SQL, and says what to run when it is missing', async () => {
    const table = freshTable('manual')
    const missing = postgresStore(pool, { table, migrate: false, cleanupIntervalMs: 0 })
    const error = await missing.apply([{ policy: fw, key: 'k', cost: 1 }], 'consume').catch((e: unknown) => e)
    expect(error).toMatchObject({ code: 'SLUICE_STORE_ERROR' })
    expect((error as Error).message).toMatch(/postgres-schema\.sql/)
    await pool.query(postgresSchemaSql(table))
    const store = postgresStore(pool, { table, migrate: false, cleanupIntervalMs: 0 })
    expect((await store.apply([{ policy: fw, key: 'k', cost: 1 }], 'consume'))[0]!.allowed).toBe(true)
    await store.close()
  })

  it('processes migrating at once do not fail (advisory lock), and a schema-qualified table works', async () => {
    await pool.query('CREATE SCHEMA IF NOT EXISTS sluice_test')
    const table = `sluice_test.${freshTable('schema')}`
    const stores = Array.from({ length: 4 }, () => postgresStore(pool, { table, cleanupIntervalMs: 0 }))
    const results = await Promise.all(
      stores.map((s) => s.apply([{ policy: fw, key: 'k', cost: 1 }], 'consume')),
    )
    expect(results.map((r) => r[0]!.allowed).sort()).toEqual([false, false, false, true])
    for (const s of stores) await s.close()
  })
})

describe('options', () => {
  it('are checked at construction with typed errors', () => {
    const bad: [unknown, RegExp][] = [
      [{ tabel: 'x' }, /did you mean 'table'/],
      [{ table: 'Robert"); DROP TABLE students;--' }, /table must be/],
      [{ table: 'a'.repeat(42) }, /table must be/],
      [{ clock: 'server', now: () => 1 }, /now is only used with clock: 'client'/],
      [{ clock: 'database' }, /clock must be/],
      [{ cleanupIntervalMs: -1 }, /cleanupIntervalMs/],
      [{ cleanupBatch: 0 }, /cleanupBatch/],
      [{ migrate: 'yes' }, /migrate must be/],
    ]
    for (const [options, message] of bad) {
      let caught: unknown
      try {
        postgresStore(pool, options as never)
      } catch (error) {
        caught = error
      }
      expect(caught, JSON.stringify(options)).toMatchObject({ code: 'SLUICE_INVALID_OPTIONS' })
      expect((caught as Error).message).toMatch(message)
    }
    expect(() => postgresStore('postgres://localhost' as never)).toThrow(/pg Pool or Client/)
  })

  it('works without named prepared statements (for poolers in transaction mode)', async () => {
    const client = counting()
    const store = postgresStore(client, {
      table: freshTable('unnamed'),
      preparedStatements: false,
      cleanupIntervalMs: 0,
    })
    expect((await store.apply([{ policy: fw, key: 'k', cost: 1 }], 'consume'))[0]!.allowed).toBe(true)
    expect((await store.apply([{ policy: fw, key: 'k', cost: 1 }], 'consume'))[0]!.allowed).toBe(false)
    await store.close()
  })

  it('works with a pg Client as well as a Pool', async () => {
    const client = new pg.Client({
      connectionString: (pool.options as { connectionString: string }).connectionString,
    })
    await client.connect()
    const store = postgresStore(client, { table: freshTable('client'), cleanupIntervalMs: 0 })
    expect((await store.apply([{ policy: fw, key: 'k', cost: 1 }], 'consume'))[0]!.allowed).toBe(true)
    await store.close()
    await client.end()
  })

  it('after close, calls reject with SLUICE_STORE_CLOSED', async () => {
    const store = postgresStore(pool, { table: freshTable('closed'), cleanupIntervalMs: 0 })
    await store.close()
    await expect(store.apply([{ policy: fw, key: 'k', cost: 1 }], 'consume')).rejects.toMatchObject({
      code: 'SLUICE_STORE_CLOSED',
    })
  })
})
