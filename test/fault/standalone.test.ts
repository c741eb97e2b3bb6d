// Fault tests against real redis-server processes: SIGKILL under load (each mode), SIGSTOP (hang),
// SCRIPT FLUSH under load. Each test starts its own server (the shared one from the test harness
// must not be killed under other suites) and stops it whatever happens.
import type { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import { createLimiter, type Limiter } from '../../packages/sluice/src/limiter.js'
import type { StoreErrorMode } from '../../packages/sluice/src/policy.js'
import { redisStore } from '../../packages/sluice/src/stores/redis/index.js'
import { heldCommands, limiterClient, offlineQueueLength } from '../helpers/failover-clients.js'
import { type RedisProcess, startRedisProcess } from '../helpers/redis-process.js'
import { sleep, startLoad } from './load.js'
import { expectModeHeld, latencyStats, outageSummary } from './outage.js'
import { percentile, record, round } from './results.js'

const TIMEOUT_MS = 100 // the default storeTimeout
const IN_FLIGHT = 64
const KEYS = ['k0', 'k1', 'k2', 'k3']
// Token bucket, 100 per hour with a burst of 50: almost no refill during a test, so the memory
// fallback's share (burst / instances) is an exact ceiling on what it admits per key.
const INSTANCES = 2
const MEMORY_SHARE = Math.ceil(50 / INSTANCES)

let cleanup: (() => Promise<void>)[] = []
afterEach(async () => {
  const tasks = cleanup.reverse()
  cleanup = []
  for (const task of tasks) await task().catch(() => {})
})

async function setup(
  mode: StoreErrorMode,
  timeoutMs = TIMEOUT_MS,
): Promise<{ redis: RedisProcess; client: Redis; limiter: Limiter }> {
  const redis = await startRedisProcess()
  cleanup.push(() => redis.stop())
  const client = await limiterClient(redis.port)
  cleanup.push(async () => client.disconnect())
  const limiter = createLimiter({
    store: redisStore(client, { prefix: `fault-${mode}` }),
    onStoreError: mode,
    storeTimeout: timeoutMs,
    breaker: { failures: 5, cooldown: '500ms' },
    instances: INSTANCES,
    logger: { warn() {} },
    // Every decision must reach the store path under test; cached denials would skip it.
    localDenyCache: false,
    policies: {
      wide: { algorithm: 'token-bucket', limit: 10_000_000, window: '1h' },
      tight: { algorithm: 'token-bucket', limit: 100, window: '1h', burst: 50 },
    },
  })
  cleanup.push(() => limiter.close())
  return { redis, client, limiter }
}

describe('Redis killed (SIGKILL) under load, 64 in flight', () => {
  for (const mode of ['open', 'closed', 'memory'] as const) {
    it(`onStoreError: ${mode}`, async () => {
      const { redis, client, limiter } = await setup(mode)
      const policy = mode === 'memory' ? 'tight' : 'wide'
      const load = startLoad(limiter, { policy, keys: KEYS, inFlight: IN_FLIGHT })
      try {
        await sleep(500)
        const killedAt = load.now()
        redis.signal('SIGKILL')
        await load.waitFor((s) => s.degraded, killedAt, 1000)
        await sleep(200)
        const outageHealth = limiter.health()
        let offlinePeak = 0
        for (let i = 0; i < 10; i++) {
          offlinePeak = Math.max(offlinePeak, offlineQueueLength(client))
          await sleep(100)
        }
        const repairedAt = load.now()
        await redis.restart()
        // Back on Redis within 10 s: a loose bound; how fast is a budget of `npm run bench -- --check`.
        const back = await load.waitFor((s) => !s.degraded, repairedAt, 10_000)
        const recoveryMs = back.at + back.latencyMs - repairedAt
        await sleep(100)
        const errorsAtRecovery = limiter.health().counts.errors
        await sleep(1000)
        const samples = await load.stop()
        // Health turns ok with the next successful call (a timeout on this busy machine can leave
        // the last call failed for a moment).
        let healthAfter = limiter.health()
        for (let i = 0; i < 20 && healthAfter.status !== 'ok'; i++) {
          await limiter.consume(policy, 'health-check')
          healthAfter = limiter.health()
          await sleep(50)
        }
        const errorsAfter = limiter.health().counts.errors
        const afterRecovery = samples.filter((s) => s.at > back.at + 100)
        const degradedAfterRecovery = afterRecovery.filter((s) => s.degraded).length

        const outage = samples.filter((s) => s.at >= killedAt && s.at < back.at)
        const { p99, max, late, overTimeoutPlus10 } = latencyStats(samples, TIMEOUT_MS, load.loopDelayMaxMs())
        const run = outageSummary(samples, mode, `share ${MEMORY_SHARE} = burst 50 / ${INSTANCES} instances`)
        const { degraded, threw, unavailable, rule } = run
        record('standalone', {
          fault: 'SIGKILL redis-server under load (64 in flight), restart after ~1.2 s',
          mode,
          clientsSaw: `${rule}; health during outage: ${outageHealth.status}; no call threw; ${overTimeoutPlus10} decisions over timeout+10 ms (event loop stalled up to ${round(load.loopDelayMaxMs())} ms)`,
          decisions: samples.length,
          degraded: degraded.length,
          unavailable: unavailable.length,
          failed: threw.length + late,
          p99Ms: round(p99),
          maxMs: round(max),
          recoveryMs: Math.round(recoveryMs),
          notes: `storeTimeout ${TIMEOUT_MS} ms, breaker 5 failures / 500 ms; ioredis offline queue peak ${offlinePeak}; ${degradedAfterRecovery} of ${afterRecovery.length} decisions in the second after recovery degraded (timeouts)`,
        })

        expect(threw).toEqual([])
        expect(outage.length).toBeGreaterThan(0)
        expect(degraded.length).toBeGreaterThan(0)
        // No decision waited past the timeout by more than this machine's own stalls; the p99 and
        // the recovery time are budgets of `npm run bench -- --check`.
        expect(late).toBe(0)
        expect(offlinePeak).toBe(0)
        expect(healthAfter.status).toBe('ok')
        expectModeHeld(mode, run, outageHealth, MEMORY_SHARE, true)
        // After recovery decisions are Redis's again: no store error at all, and only the odd call
        // that timed out while this shared machine was starved of CPU (reported in the table).
        expect(errorsAfter).toBe(errorsAtRecovery)
        expect(afterRecovery.length).toBeGreaterThan(100)
        expect(degradedAfterRecovery).toBeLessThan(afterRecovery.length / 10)
      } finally {
        await load.stop()
      }
    }, 30_000)
  }
})

describe('Redis paused (SIGSTOP) under load: a hang', () => {
  it('timeouts and the breaker keep latency bounded; SIGCONT recovers', async () => {
    const { redis, limiter } = await setup('open')
    const load = startLoad(limiter, { policy: 'wide', keys: KEYS, inFlight: IN_FLIGHT })
    try {
      await sleep(500)
      const stoppedAt = load.now()
      redis.signal('SIGSTOP')
      await sleep(2000)
      const hangHealth = limiter.health()
      const resumedAt = load.now()
      redis.signal('SIGCONT')
      const back = await load.waitFor((s) => !s.degraded, resumedAt, 10_000)
      const recoveryMs = back.at + back.latencyMs - resumedAt
      await sleep(300)
      const samples = await load.stop()
      const hang = samples.filter((s) => s.at >= stoppedAt && s.at < resumedAt)
      const degraded = samples.filter((s) => s.degraded)
      const { p99, max, late, overTimeoutPlus10 } = latencyStats(samples, TIMEOUT_MS, load.loopDelayMaxMs())
      const hangP99 = percentile(
        hang.map((s) => s.latencyMs),
        99,
      )
      const timeouts = limiter.health().counts.timeouts
      record('standalone', {
        fault: 'SIGSTOP redis-server for 2 s under load (64 in flight), then SIGCONT',
        mode: 'open',
        clientsSaw: `${hang.length} decisions during the hang, all admitted (degraded), p99 ${round(hangP99)} ms during the hang; ${timeouts} calls timed out, the rest skipped by the open circuit; health: ${hangHealth.status}; ${overTimeoutPlus10} decisions over timeout+10 ms (event loop stalled up to ${round(load.loopDelayMaxMs())} ms)`,
        decisions: samples.length,
        degraded: degraded.length,
        unavailable: 0,
        failed: samples.filter((s) => s.reason === 'threw').length + late,
        p99Ms: round(p99),
        maxMs: round(max),
        recoveryMs: Math.round(recoveryMs),
        notes: `storeTimeout ${TIMEOUT_MS} ms, breaker 5 failures / 500 ms`,
      })
      expect(samples.filter((s) => s.reason === 'threw')).toEqual([])
      expect(hang.length).toBeGreaterThan(100)
      expect(hang.every((s) => s.allowed)).toBe(true)
      expect(late).toBe(0)
      // The breaker opened: far fewer timeouts than decisions made during the hang.
      expect(timeouts).toBeLessThan(hang.length / 10)
      expect(hangHealth.status).toBe('degraded')
      expect(['open', 'half-open']).toContain(hangHealth.circuit)
    } finally {
      redis.signal('SIGCONT')
      await load.stop()
    }
  }, 30_000)
})

describe('SCRIPT FLUSH under load', () => {
  it('no failed and no degraded decision: NOSCRIPT is reloaded by the store', async () => {
    // A generous timeout: this test is about NOSCRIPT, so a slow call on a busy machine must not
    // count; any failed script call shows as a store_unavailable denial (closed mode).
    const { redis, limiter } = await setup('closed', 2000)
    const admin = await limiterClient(redis.port)
    cleanup.push(async () => admin.disconnect())
    const load = startLoad(limiter, { policy: 'wide', keys: KEYS, inFlight: IN_FLIGHT })
    let flushes = 0
    try {
      await sleep(200)
      for (let i = 0; i < 10; i++) {
        await admin.script('FLUSH')
        flushes++
        await sleep(100)
      }
      await sleep(200)
    } finally {
      await load.stop()
    }
    const samples = load.samples
    const bad = samples.filter((s) => s.degraded || !s.allowed)
    const { p99, max } = latencyStats(samples, TIMEOUT_MS, load.loopDelayMaxMs())
    record('standalone', {
      fault: `SCRIPT FLUSH x${flushes} under load (64 in flight)`,
      mode: 'closed',
      clientsSaw: `${samples.length - bad.length} of ${samples.length} decisions from Redis, ${bad.length} degraded or denied`,
      decisions: samples.length,
      degraded: samples.filter((s) => s.degraded).length,
      unavailable: samples.filter((s) => s.reason === 'store_unavailable').length,
      failed: samples.filter((s) => s.reason === 'threw').length,
      p99Ms: round(p99),
      maxMs: round(max),
      recoveryMs: null,
      notes:
        'closed mode and storeTimeout 2 s, so any failed script call would show as a store_unavailable denial',
    })
    expect(samples.length).toBeGreaterThan(500)
    expect(bad).toEqual([])
    expect(limiter.health().counts).toMatchObject({ errors: 0, timeouts: 0 })
  }, 20_000)
})

describe('ioredis with its default options (offline queue on)', () => {
  it('the limiter bounds what ioredis queues to maxInFlight while Redis is down', async () => {
    const redis = await startRedisProcess()
    cleanup.push(() => redis.stop())
    // Defaults except a quiet error listener: enableOfflineQueue true, autoResend true, 20 retries.
    const client = await limiterClient(redis.port, {
      enableOfflineQueue: true,
      autoResendUnfulfilledCommands: true,
      maxRetriesPerRequest: 20,
    })
    cleanup.push(async () => client.disconnect())
    const maxInFlight = 100
    const limiter = createLimiter({
      store: redisStore(client, { prefix: 'fault-defaults' }),
      storeTimeout: TIMEOUT_MS,
      // A breaker that never opens, so every decision tries Redis and only maxInFlight protects it.
      breaker: { failures: 1_000_000 },
      maxInFlight,
      logger: { warn() {} },
      policies: { wide: { algorithm: 'token-bucket', limit: 10_000_000, window: '1h' } },
    })
    cleanup.push(() => limiter.close())
    const load = startLoad(limiter, { policy: 'wide', keys: KEYS, inFlight: IN_FLIGHT * 4 })
    let peak = 0
    try {
      await sleep(300)
      const killedAt = load.now()
      redis.signal('SIGKILL')
      for (let i = 0; i < 30; i++) {
        peak = Math.max(peak, heldCommands(client))
        await sleep(50)
      }
      const samples = (await load.stop()).filter((s) => s.at >= killedAt)
      const { p99, max, late } = latencyStats(samples, TIMEOUT_MS, load.loopDelayMaxMs())
      const counts = limiter.health().counts
      record('standalone', {
        fault:
          'SIGKILL redis-server, ioredis default options (offline queue on), breaker disabled, 256 clients',
        mode: 'open',
        clientsSaw: `ioredis held at most ${peak} commands (offline queue + sent + awaiting resend) (maxInFlight ${maxInFlight}); ${counts.rejected} calls refused by the in-flight bound, ${counts.timeouts} timed out; every decision admitted (degraded)`,
        decisions: samples.length,
        degraded: samples.filter((s) => s.degraded).length,
        unavailable: 0,
        failed: samples.filter((s) => s.reason === 'threw').length + late,
        p99Ms: round(p99),
        maxMs: round(max),
        recoveryMs: null,
        notes:
          'shows why the recommended options disable the offline queue: without them, queued consumes run late',
      })
      expect(samples.filter((s) => s.reason === 'threw')).toEqual([])
      expect(peak).toBeGreaterThan(0)
      expect(peak).toBeLessThanOrEqual(maxInFlight)
      expect(counts.rejected).toBeGreaterThan(0)
      expect(late).toBe(0)
    } finally {
      await load.stop()
    }
  }, 20_000)
})
