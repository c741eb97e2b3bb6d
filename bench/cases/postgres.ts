// PostgreSQL store benchmark: decisions/s and p50/p99 latency at 1 and 64 in flight for the
// postgres store (fixed window, GCRA), next to the Redis store (same algorithms) and to
// rate-limiter-flexible's RateLimiterPostgres (a fixed window, one upsert per call), all in the
// same run against a PostgreSQL and a redis-server started here; the server's CPU per decision
// (PostgreSQL's processes together, or redis-server, from /proc) and this process's; plus table
// bytes per row (pg_total_relation_size, indexes included, over 10,000 keys) for Sluice and
// rate-limiter-flexible.
// Run: npm run bench -- --only postgres (or, after npm run build: node --import tsx bench/cases/postgres.ts).
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { Redis } from 'ioredis'
import pg from 'pg'
import { RateLimiterPostgres } from 'rate-limiter-flexible'
import { createLimiter } from '../../packages/sluice/dist/index.js'
import { postgresStore } from '../../packages/sluice/dist/postgres.js'
import { redisStore } from '../../packages/sluice/dist/redis.js'
import { startPostgres } from '../../test/helpers/postgres-harness.js'
import { startRedis } from '../../test/helpers/redis-harness.js'
import { processCpuMicros, processTreeCpuMicros } from '../load.js'
import { throughput } from '../throughput.js'
import type { BenchCase, BenchRow } from '../types.js'

const KEYS = 10_000
const subjects = Array.from({ length: KEYS }, (_, i) => `user-${String(i).padStart(5, '0')}`)

interface Subject {
  name: string
  decide(key: string): Promise<unknown>
  /** Its server, and the CPU (µs) that server has used so far (undefined where there is no /proc). */
  server: { name: string; cpu(): number | undefined }
}

async function tableBytesPerRow(pool: pg.Pool, table: string): Promise<{ bytes: number; rows: number }> {
  await pool.query(`VACUUM ANALYZE ${table}`)
  const { rows } = await pool.query(
    `SELECT pg_total_relation_size('${table}')::float8 AS bytes, (SELECT count(*) FROM ${table})::float8 AS n`,
  )
  const row = rows[0] as { bytes: number; n: number }
  return { bytes: row.bytes / row.n, rows: row.n }
}

async function run({ quick }: { quick: boolean }): Promise<BenchRow[]> {
  const [postgres, redis] = await Promise.all([startPostgres(), startRedis()])
  const pool = new pg.Pool({ connectionString: postgres.url, max: 64 })
  const client = new Redis(redis.port, '127.0.0.1')
  const out: BenchRow[] = []
  try {
    const policies = {
      fixed: { algorithm: 'fixed-window', limit: 1_000_000, window: '1h' },
      gcra: { algorithm: 'gcra', limit: 1_000_000, window: '1h' },
    } as const
    const pgLimiter = createLimiter({
      store: postgresStore(pool, { table: 'sluice_limits', cleanupIntervalMs: 0 }),
      policies,
      storeTimeout: 10_000,
      localDenyCache: false,
    })
    const redisLimiter = createLimiter({
      store: redisStore(client, { prefix: 'bench-pg' }),
      policies,
      storeTimeout: 10_000,
      localDenyCache: false,
    })
    const flexible = await new Promise<RateLimiterPostgres>((resolve, reject) => {
      const limiter: RateLimiterPostgres = new RateLimiterPostgres(
        {
          storeClient: pool,
          storeType: 'pool',
          tableName: 'rlflx',
          points: 1_000_000,
          duration: 3600,
          clearExpiredByTimeout: false,
        },
        (error?: unknown) => (error ? reject(error) : resolve(limiter)),
      )
    })
    // PostgreSQL is a postmaster and a backend per connection; Redis is one process.
    const postmaster = Number(
      readFileSync(join(postgres.dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0],
    )
    const redisPid = Number(/process_id:(\d+)/.exec(await client.info('server'))?.[1])
    const pgServer = { name: "PostgreSQL's processes", cpu: () => processTreeCpuMicros(postmaster) }
    const redisServer = { name: 'redis-server', cpu: () => processCpuMicros(redisPid) }
    const list: Subject[] = [
      {
        name: 'sluice postgres fixed-window',
        decide: (k) => pgLimiter.consume('fixed', k),
        server: pgServer,
      },
      { name: 'sluice postgres gcra', decide: (k) => pgLimiter.consume('gcra', k), server: pgServer },
      {
        name: 'sluice redis fixed-window',
        decide: (k) => redisLimiter.consume('fixed', k),
        server: redisServer,
      },
      { name: 'sluice redis gcra', decide: (k) => redisLimiter.consume('gcra', k), server: redisServer },
      {
        name: 'rate-limiter-flexible RateLimiterPostgres',
        decide: (k) => flexible.consume(k),
        server: pgServer,
      },
    ]
    // Every key once, so the throughput runs update rows that exist (the steady state) and the
    // tables hold 10,000 rows each for the size measurement.
    for (const s of list)
      for (let i = 0; i < KEYS; i += 64) await Promise.all(subjects.slice(i, i + 64).map((k) => s.decide(k)))
    const ms = quick ? 1000 : 3000
    const reference = (metric: string, inFlight: number) =>
      out.find(
        (r) =>
          r.metric === metric &&
          r.subject === `rate-limiter-flexible RateLimiterPostgres, ${inFlight} in flight`,
      )!.value
    for (const inFlight of [1, 64]) {
      for (const s of list) {
        let before: number | undefined
        let after: number | undefined
        const r = await throughput(s.decide, inFlight, ms, subjects, {
          before: () => {
            before = s.server.cpu()
          },
          after: () => {
            after = s.server.cpu()
          },
        })
        const subject = `${s.name}, ${inFlight} in flight`
        out.push({
          subject,
          metric: 'decisions/s',
          value: r.rate,
          unit: '/s',
          note: `p50 ${r.p50.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms`,
        })
        if (before !== undefined && after !== undefined)
          out.push({
            subject,
            metric: 'server CPU per decision',
            value: (after - before) / r.decisions,
            unit: 'µs',
            note: `${s.server.name}; this process ${(r.cpuUs / r.decisions).toFixed(1)} µs`,
          })
      }
      // Ratios once every subject of this level ran: against rate-limiter-flexible's Postgres store.
      for (const row of out.filter((r) => r.subject.endsWith(`, ${inFlight} in flight`)))
        row.ratio = row.value / reference(row.metric, inFlight)
    }
    const sluice = await tableBytesPerRow(pool, 'sluice_limits')
    const rlf = await tableBytesPerRow(pool, 'rlflx')
    out.push(
      {
        subject: 'sluice postgres table (2 policies x 10,000 keys)',
        metric: 'bytes per row',
        value: sluice.bytes,
        unit: 'B',
        ratio: sluice.bytes / rlf.bytes,
        note: `${sluice.rows} rows, pg_total_relation_size (heap, primary key, expiry index)`,
      },
      {
        subject: 'rate-limiter-flexible RateLimiterPostgres table',
        metric: 'bytes per row',
        value: rlf.bytes,
        unit: 'B',
        ratio: 1,
        note: `${rlf.rows} rows`,
      },
    )
    await pgLimiter.close()
    await redisLimiter.close()
  } finally {
    client.disconnect()
    await pool.end()
    await Promise.all([postgres.stop(), redis.stop()])
  }
  return out
}

export const benchCase: BenchCase = { name: 'postgres', run }

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const rows = await run({ quick: process.argv.includes('--quick') })
  for (const r of rows)
    console.log(
      `${r.subject} | ${r.metric} | ${Math.round(r.value)} ${r.unit} | ${r.ratio?.toFixed(2) ?? ''} | ${r.note ?? ''}`,
    )
}
