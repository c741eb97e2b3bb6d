// Exactness on PostgreSQL under real concurrency: 4 OS processes x 64 decisions in flight (64
// connections each) on one key per algorithm, limit 1,000 in a window far longer than the test
// (no token refills before the timeout):
// exactly 1,000 admitted per algorithm. Row locks, taken inside the one function call, serialize them.
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import pg from 'pg'
import { expect, inject, it } from 'vitest'
import { postgresSchemaSql } from '../../../packages/sluice/src/stores/postgres/index.js'
import { freshTable } from '../../helpers/postgres-clients.js'

const run = promisify(execFile)
const EXACT = ['fixed-window', 'sliding-window-log', 'token-bucket', 'gcra'] as const

it('4 processes x 64 in flight, limit 1,000: exactly 1,000 admitted per algorithm', {
  // Seconds when the machine is quiet; a stop only, generous for a loaded one (four node processes, 256 connections).
  timeout: 300_000,
}, async () => {
  const { url } = inject('postgres')
  const table = freshTable('exact')
  // The schema first, so the workers race on decisions only.
  const admin = new pg.Client({ connectionString: url })
  await admin.connect()
  await admin.query(postgresSchemaSql(table))
  const config = {
    url,
    table,
    algorithms: EXACT,
    // 4 x 300 = 1,200 attempts per algorithm: 200 more than the limit.
    attempts: 300,
    // 64 in flight per process, spread over the four keys (16 lanes each).
    inFlight: 64,
    limit: 1000,
    // A token bucket earns one token back per window / limit: 30 days / 1,000 is 43 minutes, far
    // beyond the timeout, so every admission counted here came from the first 1,000.
    window: '30d',
    startAt: Date.now() + 3000,
  }
  try {
    const workers = Array.from({ length: 4 }, () =>
      run('node', ['--import', 'tsx', 'test/stores/postgres/hammer-worker.ts', JSON.stringify(config)]),
    )
    const perProcess = (await Promise.all(workers)).map(
      ({ stdout }) => JSON.parse(stdout) as Record<string, number>,
    )
    for (const algorithm of EXACT) {
      const counts = perProcess.map((p) => p[algorithm] ?? 0)
      const total = counts.reduce((a, b) => a + b, 0)
      expect(total, `${algorithm}: admitted per process ${counts.join(', ')}`).toBe(1000)
    }
    // Every process took part: none admitted everything alone.
    for (const p of perProcess) expect(Object.values(p).reduce((a, b) => a + b, 0)).toBeGreaterThan(0)
  } finally {
    await admin.query(`DROP TABLE "${table}" CASCADE`)
    await admin.end()
  }
})
