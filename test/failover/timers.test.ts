// The failover layer's timeouts against a real, paused redis-server (SIGSTOP): every call of a store
// has the same timeout, so one timer armed for the oldest call in flight serves them all, and each
// call still times out, never before its own storeTimeout. How soon after it is a budget of
// `npm run bench -- --check`; test/failover/deadlines.test.ts pins the exact times on fake timers.
import type { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import { createLimiter, type Decision } from '../../packages/sluice/src/limiter.js'
import { redisStore } from '../../packages/sluice/src/stores/redis/index.js'
import { limiterClient } from '../helpers/failover-clients.js'
import { type RedisProcess, startRedisProcess } from '../helpers/redis-process.js'

const IN_FLIGHT = 64
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/**
 * setTimeout calls made while `work` starts (the failover layer's timers are unref'd, so
 * process.getActiveResourcesInfo() does not list them: count the calls instead).
 */
function timersArmedBy<T>(work: () => T): { value: T; armed: number } {
  const original = globalThis.setTimeout
  let armed = 0
  globalThis.setTimeout = ((...args: Parameters<typeof setTimeout>) => {
    armed++
    return original(...args)
  }) as typeof setTimeout
  try {
    return { value: work(), armed }
  } finally {
    globalThis.setTimeout = original
  }
}

let cleanup: (() => Promise<void>)[] = []
afterEach(async () => {
  const tasks = cleanup.reverse()
  cleanup = []
  for (const task of tasks) await task().catch(() => {})
})

async function setup(
  storeTimeoutMs: number,
): Promise<{ redis: RedisProcess; client: Redis; limiter: ReturnType<typeof limiterOn> }> {
  const redis = await startRedisProcess()
  cleanup.push(() => redis.stop())
  // Resumed before it is stopped, whatever the test did.
  cleanup.push(async () => redis.signal('SIGCONT'))
  const client = await limiterClient(redis.port)
  cleanup.push(async () => client.disconnect())
  const limiter = limiterOn(client, storeTimeoutMs)
  cleanup.push(() => limiter.close())
  // Scripts loaded, connection warm.
  await limiter.consume('api', 'warm')
  return { redis, client, limiter }
}

function limiterOn(client: Redis, storeTimeoutMs: number) {
  return createLimiter({
    store: redisStore(client, { prefix: `timers-${storeTimeoutMs}` }),
    storeTimeout: storeTimeoutMs,
    onStoreError: 'open',
    // A burst of timeouts must not open the circuit between the waves of the second test.
    breaker: { failures: 1000, cooldown: '1s' },
    localDenyCache: false,
    logger: { warn() {} },
    policies: { api: { algorithm: 'token-bucket', limit: 1_000_000, window: '1h' } },
  })
}

describe('failover timeouts: one timer for the calls in flight', () => {
  it(`${IN_FLIGHT} decisions in flight against a paused Redis hold one timer, not one each`, async () => {
    const { redis, limiter } = await setup(5_000)
    redis.signal('SIGSTOP')
    const { value: decisions, armed } = timersArmedBy(() =>
      Array.from({ length: IN_FLIGHT }, (_, i) => limiter.consume('api', `k${i}`)),
    )
    await sleep(50)
    redis.signal('SIGCONT')
    const answered = await Promise.all(decisions)
    // The store answered every one (nothing timed out at 5 s): none degraded.
    expect(answered.filter((d) => d.degraded === true)).toHaveLength(0)
    expect(answered.every((d) => d.allowed)).toBe(true)
    expect(armed).toBeLessThanOrEqual(1)
  })

  it('calls made later time out later: none before its own storeTimeout', async () => {
    const TIMEOUT = 150
    const { redis, limiter } = await setup(TIMEOUT)
    redis.signal('SIGSTOP')
    const waves: Promise<{ d: Decision; ms: number }>[] = []
    for (let wave = 0; wave < 3; wave++) {
      if (wave > 0) await sleep(60)
      for (let i = 0; i < IN_FLIGHT / 4; i++) {
        const sent = performance.now()
        waves.push(limiter.consume('api', `w${wave}-${i}`).then((d) => ({ d, ms: performance.now() - sent })))
      }
    }
    const all = await Promise.all(waves)
    redis.signal('SIGCONT')
    expect(all.every(({ d }) => d.degraded === true && d.allowed)).toBe(true)
    // Never before its own deadline (timers have whole-ms resolution).
    expect(Math.min(...all.map(({ ms }) => ms))).toBeGreaterThanOrEqual(TIMEOUT - 2)
    expect(limiter.health().counts.timeouts).toBe((IN_FLIGHT * 3) / 4)
  })
})
