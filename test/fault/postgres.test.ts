// Fault tests against a real PostgreSQL of their own (the shared one must not die under other
// suites): the server is killed under load (pg_ctl stop -m immediate: every backend exits at once,
// no checkpoint, the restart runs crash recovery) and started again, once per onStoreError mode.
// Every request is answered within the timeout, the mode holds, recovery is measured.
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import type { StoreErrorMode } from '../../packages/sluice/src/policy.js'
import { postgresStore } from '../../packages/sluice/src/stores/postgres/index.js'
import { type PostgresServer, startPostgres } from '../helpers/postgres-harness.js'
import { sleep, startLoad } from './load.js'
import { expectModeHeld, latencyStats, outageSummary } from './outage.js'
import { record, round } from './results.js'

// A decision is one function call that takes a row lock and commits: on this shared 2-core machine
// its p99 under 64 in flight is tens of ms, so the timeout is above the Redis tests' 100 ms default.
const TIMEOUT_MS = 250
const IN_FLIGHT = 64
const KEYS = ['k0', 'k1', 'k2', 'k3']
const INSTANCES = 2
const MEMORY_SHARE = Math.ceil(50 / INSTANCES)

let server: PostgresServer
beforeAll(async () => {
  server = await startPostgres()
}, 60_000)
afterAll(async () => {
  await server?.stop()
})

describe('PostgreSQL killed under load, 64 in flight', () => {
  for (const mode of ['open', 'closed', 'memory'] as const satisfies readonly StoreErrorMode[]) {
    it(`onStoreError: ${mode}`, async () => {
      const pool = new pg.Pool({ connectionString: server.url, max: 16, connectionTimeoutMillis: 1000 })
      pool.on('error', () => {})
      const store = postgresStore(pool, { table: `fault_${mode}`, cleanupIntervalMs: 0 })
      const limiter = createLimiter({
        store,
        onStoreError: mode,
        storeTimeout: TIMEOUT_MS,
        breaker: { failures: 5, cooldown: '500ms' },
        instances: INSTANCES,
        logger: { warn() {} },
        localDenyCache: false,
        policies: {
          wide: { algorithm: 'token-bucket', limit: 10_000_000, window: '1h' },
          tight: { algorithm: 'token-bucket', limit: 100, window: '1h', burst: 50 },
        },
      })
      const policy = mode === 'memory' ? 'tight' : 'wide'
      // The schema is in place before the load starts.
      await limiter.consume(policy, 'warm-up')
      const load = startLoad(limiter, { policy, keys: KEYS, inFlight: IN_FLIGHT })
      try {
        await sleep(800)
        const killedAt = load.now()
        await server.kill()
        await load.waitFor((s) => s.degraded, killedAt, 2000)
        await sleep(300)
        const outageHealth = limiter.health()
        const repairedAt = load.now()
        await server.restart()
        const back = await load.waitFor((s) => !s.degraded, repairedAt, 15_000)
        const recoveryMs = back.at + back.latencyMs - repairedAt
        await sleep(1000)
        const samples = await load.stop()

        const { p99, max, late } = latencyStats(samples, TIMEOUT_MS, load.loopDelayMaxMs())
        const run = outageSummary(samples, mode, `share ${MEMORY_SHARE}`)
        const { degraded, threw, unavailable, rule } = run
        const afterRecovery = samples.filter((s) => s.at > back.at + 100)
        record('postgres', {
          fault: 'PostgreSQL killed (stop -m immediate) under load (64 in flight), restarted after ~0.3 s',
          mode,
          clientsSaw: `${rule}; health during outage: ${outageHealth.status}; no call threw`,
          decisions: samples.length,
          degraded: degraded.length,
          unavailable: unavailable.length,
          failed: threw.length + late,
          p99Ms: round(p99),
          maxMs: round(max),
          recoveryMs: Math.round(recoveryMs),
          notes: `storeTimeout ${TIMEOUT_MS} ms, pg Pool max 16; recovery includes the server's own start and crash recovery; event loop stalled up to ${round(load.loopDelayMaxMs())} ms`,
        })

        expect(threw).toEqual([])
        expect(degraded.length).toBeGreaterThan(0)
        expect(late).toBe(0)
        expect(recoveryMs).toBeLessThan(15_000)
        expect(afterRecovery.length).toBeGreaterThan(50)
        expect(afterRecovery.filter((s) => s.degraded).length).toBeLessThan(afterRecovery.length / 10)
        expectModeHeld(mode, run, outageHealth, MEMORY_SHARE, false)
      } finally {
        await load.stop()
        await limiter.close()
        await pool.end().catch(() => {})
      }
    }, 40_000)
  }
})
