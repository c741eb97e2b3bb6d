// Fault test against a real memcached process: SIGKILL under load (64 in flight), restart on the
// same port, for each failure mode. The failover layer is the one every remote store gets: every
// decision is answered within the timeout, the policy's mode holds, and recovery is measured.
// Each test starts its own memcached (the shared one must not be killed under other suites).
import memjs from 'memjs'
import { afterEach, describe, expect, it } from 'vitest'
import { createLimiter, type Limiter } from '../../packages/sluice/src/limiter.js'
import type { StoreErrorMode } from '../../packages/sluice/src/policy.js'
import { memcachedStore } from '../../packages/sluice/src/stores/memcached/index.js'
import { type MemcachedServer, startMemcached } from '../helpers/memcached-harness.js'
import { sleep, startLoad } from './load.js'
import { expectModeHeld, latencyStats, outageSummary } from './outage.js'
import { record, round } from './results.js'

const TIMEOUT_MS = 100 // the default storeTimeout
const IN_FLIGHT = 64
const KEYS = ['k0', 'k1', 'k2', 'k3']
const INSTANCES = 2
const MEMORY_SHARE = Math.ceil(50 / INSTANCES)

let cleanup: (() => Promise<void>)[] = []
afterEach(async () => {
  const tasks = cleanup.reverse()
  cleanup = []
  for (const task of tasks) await task().catch(() => {})
})

async function setup(mode: StoreErrorMode): Promise<{ server: MemcachedServer; limiter: Limiter }> {
  const server = await startMemcached()
  cleanup.push(() => server.stop())
  // One try per call and a 1 s socket timeout: the limiter's 100 ms storeTimeout decides first.
  const client = memjs.Client.create(server.address, { retries: 1, timeout: 1, logger: { log: () => {} } })
  cleanup.push(async () => client.close())
  const limiter = createLimiter({
    store: memcachedStore(client, { prefix: `fault-${mode}` }),
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
  cleanup.push(() => limiter.close())
  return { server, limiter }
}

describe('memcached killed (SIGKILL) under load, 64 in flight', () => {
  for (const mode of ['open', 'closed', 'memory'] as const) {
    it(`onStoreError: ${mode}`, async () => {
      const { server, limiter } = await setup(mode)
      const policy = mode === 'memory' ? 'tight' : 'wide'
      const load = startLoad(limiter, { policy, keys: KEYS, inFlight: IN_FLIGHT })
      try {
        await sleep(500)
        const killedAt = load.now()
        server.process().kill('SIGKILL')
        await load.waitFor((s) => s.degraded, killedAt, 1000)
        await sleep(200)
        const outageHealth = limiter.health()
        await sleep(1000)
        const repairedAt = load.now()
        await server.restart()
        // Back on memcached within 10 s: a loose bound, since how fast depends on this machine.
        const back = await load.waitFor((s) => !s.degraded, repairedAt, 10_000)
        const recoveryMs = back.at + back.latencyMs - repairedAt
        await sleep(1000)
        const samples = await load.stop()
        let healthAfter = limiter.health()
        for (let i = 0; i < 20 && healthAfter.status !== 'ok'; i++) {
          await limiter.consume(policy, 'health-check')
          healthAfter = limiter.health()
          await sleep(50)
        }
        const afterRecovery = samples.filter((s) => s.at > back.at + 100)
        const degradedAfterRecovery = afterRecovery.filter((s) => s.degraded).length
        const outage = samples.filter((s) => s.at >= killedAt && s.at < back.at)
        const { p99, max, late, overTimeoutPlus10 } = latencyStats(samples, TIMEOUT_MS, load.loopDelayMaxMs())
        const run = outageSummary(samples, mode, `share ${MEMORY_SHARE} = burst 50 / ${INSTANCES} instances`)
        const { degraded, threw, unavailable, rule } = run
        record('memcached', {
          fault: 'SIGKILL memcached under load (64 in flight), fresh memcached on the same port after ~1.2 s',
          mode,
          clientsSaw: `${rule}; health during outage: ${outageHealth.status}; no call threw; ${overTimeoutPlus10} decisions over timeout+10 ms (event loop stalled up to ${round(load.loopDelayMaxMs())} ms)`,
          decisions: samples.length,
          degraded: degraded.length,
          unavailable: unavailable.length,
          failed: threw.length + late,
          p99Ms: round(p99),
          maxMs: round(max),
          recoveryMs: Math.round(recoveryMs),
          notes: `memjs retries 1, storeTimeout ${TIMEOUT_MS} ms, breaker 5 failures / 500 ms; the restarted memcached is empty (counters start over, as after any memcached restart); ${degradedAfterRecovery} of ${afterRecovery.length} decisions in the second after recovery degraded`,
        })

        expect(threw).toEqual([])
        expect(outage.length).toBeGreaterThan(0)
        expect(degraded.length).toBeGreaterThan(0)
        // No decision waited past the timeout by more than this machine's own stalls.
        expect(late).toBe(0)
        expect(healthAfter.status).toBe('ok')
        expectModeHeld(mode, run, outageHealth, MEMORY_SHARE, true)
        expect(afterRecovery.length).toBeGreaterThan(100)
        expect(degradedAfterRecovery).toBeLessThan(afterRecovery.length / 10)
      } finally {
        await load.stop()
      }
    }, 30_000)
  }
})
