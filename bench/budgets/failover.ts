// Latency of decisions while Redis fails, for the budget check: the failover layer's timeouts, breaker
// and recovery measured against real redis-server processes that are killed (SIGKILL) or paused
// (SIGSTOP) under load, as test/fault/standalone.test.ts does it (that test asserts what clients get;
// the time bounds are judged here), and calls made in waves against a paused server, each of which
// must be answered at its own timeout (src/failover/deadlines.ts).
import type { Redis } from 'ioredis'
// The build (dist/), as users run it.
import { createLimiter, type Decision } from '../../packages/sluice/dist/index.js'
import { redisStore } from '../../packages/sluice/dist/redis.js'
import { type Load, sleep, startLoad } from '../../test/fault/load.js'
import { percentile } from '../../test/fault/results.js'
import { limiterClient } from '../../test/helpers/failover-clients.js'
import { type RedisProcess, startRedisProcess } from '../../test/helpers/redis-process.js'

const TIMEOUT_MS = 100 // the default storeTimeout
const IN_FLIGHT = 64
const KEYS = ['k0', 'k1', 'k2', 'k3']

type Mode = 'open' | 'closed' | 'memory'

/** Measured values by budget id (bench/budgets/check.ts). */
export type Measured = Map<string, number>

interface Setup {
  mode: Mode
  timeoutMs: number
  /** Failures that open the circuit (the cool-down is 500 ms). */
  failures: number
}

async function withRedis<T>(
  setup: Setup,
  run: (redis: RedisProcess, limiter: ReturnType<typeof limiterOn>) => Promise<T>,
): Promise<T> {
  const redis = await startRedisProcess()
  let client: Redis | undefined
  let limiter: ReturnType<typeof limiterOn> | undefined
  try {
    client = await limiterClient(redis.port)
    limiter = limiterOn(client, setup)
    await limiter.consume('wide', 'warm')
    return await run(redis, limiter)
  } finally {
    redis.signal('SIGCONT')
    await limiter?.close().catch(() => {})
    client?.disconnect()
    await redis.stop()
  }
}

// The fault tests' limiter: two instances' memory share, no deny cache (every decision takes the
// store path).
function limiterOn(client: Redis, { mode, timeoutMs, failures }: Setup) {
  return createLimiter({
    store: redisStore(client, { prefix: `budget-${mode}` }),
    onStoreError: mode,
    storeTimeout: timeoutMs,
    breaker: { failures, cooldown: '500ms' },
    instances: 2,
    logger: { warn() {} },
    localDenyCache: false,
    policies: {
      wide: { algorithm: 'token-bucket', limit: 10_000_000, window: '1h' },
      tight: { algorithm: 'token-bucket', limit: 100, window: '1h', burst: 50 },
    },
  })
}

/** Load ms from `since` to the first decision after it that Redis answered (not degraded). */
async function recovery(load: Load, since: number): Promise<number> {
  const back = await load.waitFor((s) => !s.degraded, since, 10_000)
  return back.at + back.latencyMs - since
}

/** SIGKILL under load, restart after about a second: p99 latency and recovery time. */
async function killed(mode: Mode, out: Measured): Promise<void> {
  await withRedis({ mode, timeoutMs: TIMEOUT_MS, failures: 5 }, async (redis, limiter) => {
    const load = startLoad(limiter, {
      policy: mode === 'memory' ? 'tight' : 'wide',
      keys: KEYS,
      inFlight: IN_FLIGHT,
    })
    try {
      await sleep(500)
      const killedAt = load.now()
      redis.signal('SIGKILL')
      await load.waitFor((s) => s.degraded, killedAt, 2_000)
      await sleep(1_000)
      const repairedAt = load.now()
      await redis.restart()
      out.set(`failover/sigkill-${mode}-recovery`, await recovery(load, repairedAt))
      await sleep(500)
    } finally {
      const samples = await load.stop()
      out.set(
        `failover/sigkill-${mode}-p99`,
        percentile(
          samples.map((s) => s.latencyMs),
          99,
        ),
      )
    }
  })
}

/** SIGSTOP for 2 s under load, then SIGCONT: p99 latency and recovery time. */
async function paused(out: Measured): Promise<void> {
  await withRedis({ mode: 'open', timeoutMs: TIMEOUT_MS, failures: 5 }, async (redis, limiter) => {
    const load = startLoad(limiter, { policy: 'wide', keys: KEYS, inFlight: IN_FLIGHT })
    try {
      await sleep(500)
      redis.signal('SIGSTOP')
      await sleep(2_000)
      const resumedAt = load.now()
      redis.signal('SIGCONT')
      out.set('failover/sigstop-recovery', await recovery(load, resumedAt))
      await sleep(300)
    } finally {
      const samples = await load.stop()
      out.set(
        'failover/sigstop-p99',
        percentile(
          samples.map((s) => s.latencyMs),
          99,
        ),
      )
    }
  })
}

/**
 * Three waves of 16 decisions, 60 ms apart, against a paused server with storeTimeout 150 ms: how
 * long past its own timeout the latest answer came (a call made later must time out later, not be
 * held for a timer armed for someone else).
 */
async function waves(out: Measured): Promise<void> {
  const TIMEOUT = 150
  // A burst of timeouts must not open the circuit between the waves.
  await withRedis({ mode: 'open', timeoutMs: TIMEOUT, failures: 1000 }, async (redis, limiter) => {
    redis.signal('SIGSTOP')
    const pending: Promise<{ d: Decision; ms: number }>[] = []
    for (let wave = 0; wave < 3; wave++) {
      if (wave > 0) await sleep(60)
      for (let i = 0; i < 16; i++) {
        const sent = performance.now()
        pending.push(
          limiter.consume('wide', `w${wave}-${i}`).then((d) => ({ d, ms: performance.now() - sent })),
        )
      }
    }
    const all = await Promise.all(pending)
    if (!all.every(({ d }) => d.degraded === true))
      throw new Error('a decision of the waves was not a timeout')
    out.set('failover/late-past-own-timeout', Math.max(...all.map(({ ms }) => ms)) - TIMEOUT)
  })
}

/** Every failover budget, one scenario after another (each on its own redis-server). */
export async function measureFailover(out: Measured, notes: Map<string, string>): Promise<void> {
  const scenarios: [string[], () => Promise<void>][] = [
    ...(['open', 'closed', 'memory'] as const).map((mode): [string[], () => Promise<void>] => [
      [`failover/sigkill-${mode}-p99`, `failover/sigkill-${mode}-recovery`],
      () => killed(mode, out),
    ]),
    [['failover/sigstop-p99', 'failover/sigstop-recovery'], () => paused(out)],
    [['failover/late-past-own-timeout'], () => waves(out)],
  ]
  for (const [ids, run] of scenarios) {
    try {
      await run()
    } catch (error) {
      for (const id of ids) if (!out.has(id)) notes.set(id, `not measured: ${(error as Error).message}`)
    }
  }
}
