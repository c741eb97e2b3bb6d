// The local deny cache against a private real redis-server: a denied hot key costs zero Redis
// calls (counted by the server's INFO commandstats), numbers stay right, and refund, reset, block,
// layered checks and concurrency policies behave.
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { createMetrics } from '../../packages/sluice/src/metrics/index.js'
import { resolvePolicy } from '../../packages/sluice/src/policy.js'
import { LocalDenyCache } from '../../packages/sluice/src/scale/deny-cache.js'
import { redisStore } from '../../packages/sluice/src/stores/redis/index.js'
import { type RedisServer, startRedis } from '../helpers/redis-harness.js'

let server: RedisServer
let client: Redis
let admin: Redis
let prefixCount = 0
const prefix = () => `dc${++prefixCount}`

beforeAll(async () => {
  server = await startRedis()
  client = new Redis(server.port, '127.0.0.1')
  admin = new Redis(server.port, '127.0.0.1')
})
afterAll(async () => {
  client.disconnect()
  admin.disconnect()
  await server.stop()
})

/** Script calls the server has executed (EVALSHA + EVAL), from INFO commandstats. */
async function scriptCalls(): Promise<number> {
  const text = await admin.info('commandstats')
  let total = 0
  for (const m of text.matchAll(/^cmdstat_(evalsha|eval):calls=(\d+)/gm)) total += Number(m[2])
  return total
}

const policies = {
  api: { algorithm: 'fixed-window', limit: 3, window: '2s' },
  bucket: { algorithm: 'token-bucket', limit: 2, window: '2s' },
  wide: { algorithm: 'sliding-window-counter', limit: 100, window: '1m' },
  slots: { algorithm: 'concurrency', limit: 1, timeout: '10s' },
} as const

describe('local deny cache', () => {
  it('a denied hot key costs zero Redis calls, with counting-down numbers and metrics', async () => {
    const limiter = createLimiter({ store: redisStore(client, { prefix: prefix() }), policies })
    const metrics = createMetrics()
    limiter.subscribe((e) => metrics.observe(e))
    for (let i = 0; i < 3; i++) expect((await limiter.consume('api', 'hot')).allowed).toBe(true)
    const first = await limiter.consume('api', 'hot')
    expect(first.allowed).toBe(false)
    expect(first.cached).toBeUndefined()
    const before = await scriptCalls()
    let last = first
    for (let i = 0; i < 2000; i++) {
      const d = await limiter.consume('api', 'hot')
      expect(d.allowed).toBe(false)
      expect(d.cached).toBe(true)
      expect(d.remaining).toBe(0)
      expect(d.reason).toBe('limit')
      expect(d.retryAfterMs).toBeLessThanOrEqual(last.retryAfterMs)
      expect(d.retryAfterMs).toBeGreaterThan(0)
      expect(d.resetMs).toBeGreaterThanOrEqual(d.retryAfterMs)
      last = d
    }
    expect(await scriptCalls()).toBe(before)
    const text = await metrics.registry.metrics()
    expect(text).toMatch(/sluice_local_cache_hits_total\{policy="api"\} 2000/)
    // Another key still asks the store.
    await limiter.consume('api', 'cold')
    expect(await scriptCalls()).toBe(before + 1)
    // Once the retry time has passed, the store decides again and admits.
    await new Promise((r) => setTimeout(r, last.retryAfterMs + 20))
    const after = await limiter.consume('api', 'hot')
    expect(after.allowed).toBe(true)
    expect(after.cached).toBeUndefined()
  })

  it('never denies locally past the store: the cached retry time is at most the store one', async () => {
    const limiter = createLimiter({ store: redisStore(client, { prefix: prefix() }), policies })
    await limiter.consume('bucket', 'k', { cost: 2 })
    const denied = await limiter.consume('bucket', 'k')
    const cached = await limiter.consume('bucket', 'k')
    expect(cached.cached).toBe(true)
    expect(cached.retryAfterMs).toBeLessThanOrEqual(denied.retryAfterMs)
    // A bigger cost is denied locally too; the peek of a cheaper request is not answered locally.
    expect((await limiter.consume('bucket', 'k', { cost: 2 })).cached).toBe(true)
  })

  it('refund, reset and block invalidate the entry', async () => {
    const limiter = createLimiter({ store: redisStore(client, { prefix: prefix() }), policies })
    for (let i = 0; i < 4; i++) await limiter.consume('api', 'r')
    expect((await limiter.consume('api', 'r')).cached).toBe(true)
    await limiter.refund('api', 'r')
    const afterRefund = await limiter.consume('api', 'r')
    expect(afterRefund.allowed).toBe(true)
    expect((await limiter.consume('api', 'r')).cached).toBeUndefined()
    expect((await limiter.consume('api', 'r')).cached).toBe(true)
    await limiter.reset('api', 'r')
    expect((await limiter.consume('api', 'r')).allowed).toBe(true)
    await limiter.block('api', 'r', '5s')
    const blocked = await limiter.consume('api', 'r')
    expect(blocked).toMatchObject({ allowed: false, reason: 'blocked' })
    const blockedCached = await limiter.consume('api', 'r')
    expect(blockedCached).toMatchObject({ allowed: false, reason: 'blocked', cached: true })
    await limiter.reset('api', 'r')
    expect((await limiter.consume('api', 'r')).allowed).toBe(true)
  })

  it('layered checks are denied locally only when one of their layers is cached', async () => {
    const limiter = createLimiter({ store: redisStore(client, { prefix: prefix() }), policies })
    for (let i = 0; i < 4; i++) await limiter.consume('api', 'L')
    // Load the mixed-algorithm script first (its first call meets NOSCRIPT and loads it).
    await limiter.consume([
      { policy: 'wide', key: 'warm' },
      { policy: 'api', key: 'warm' },
    ])
    const before = await scriptCalls()
    const d = await limiter.consume([
      { policy: 'wide', key: 'L' },
      { policy: 'api', key: 'L' },
    ])
    expect(d).toMatchObject({ allowed: false, cached: true, deniedBy: 'api', remaining: 0 })
    expect(await scriptCalls()).toBe(before)
    // No layer cached: the store decides, and nothing was charged on 'wide' by the local denial.
    const other = await limiter.consume([
      { policy: 'wide', key: 'M' },
      { policy: 'api', key: 'M' },
    ])
    expect(other.allowed).toBe(true)
    expect(other.cached).toBeUndefined()
    expect(other.results[0]!.remaining).toBe(99)
    expect(await scriptCalls()).toBe(before + 1)
  })

  it('does not apply to concurrency policies (a release frees a slot early)', async () => {
    const limiter = createLimiter({ store: redisStore(client, { prefix: prefix() }), policies })
    const lease = await limiter.acquire('slots', 'c')
    expect(lease.allowed).toBe(true)
    const denied = await limiter.acquire('slots', 'c')
    expect(denied.allowed).toBe(false)
    await lease.lease!.release()
    const again = await limiter.acquire('slots', 'c')
    expect(again.allowed).toBe(true)
    expect(again.cached).toBeUndefined()
  })

  it('can be turned off', async () => {
    const limiter = createLimiter({
      store: redisStore(client, { prefix: prefix() }),
      policies,
      localDenyCache: false,
    })
    for (let i = 0; i < 4; i++) await limiter.consume('api', 'off')
    const before = await scriptCalls()
    for (let i = 0; i < 10; i++) expect((await limiter.consume('api', 'off')).cached).toBeUndefined()
    expect(await scriptCalls()).toBe(before + 10)
  })
})

describe('LocalDenyCache bounds', () => {
  it('holds at most maxKeys entries, dropping the oldest', () => {
    const cache = new LocalDenyCache({ maxKeys: 100 })
    const policy = resolvePolicy('p', { algorithm: 'fixed-window', limit: 1, window: '1m' })
    const denied = { allowed: false, remaining: 0, resetMs: 60_000, retryAfterMs: 60_000, blocked: false }
    for (let i = 0; i < 1000; i++) cache.remember({ policy, key: `k${i}`, cost: 1 }, denied, 0, cache.epoch)
    expect(cache.entryCount).toBe(100)
    expect(cache.lookup({ policy, key: 'k0', cost: 1 }, 1)).toBeUndefined()
    expect(cache.lookup({ policy, key: 'k999', cost: 1 }, 1)).toMatchObject({ retryAfterMs: 59_999 })
    // An answer sent before an invalidation is not cached.
    const epoch = cache.epoch
    cache.forget({ policy, key: 'k999', cost: 1 })
    cache.remember({ policy, key: 'late', cost: 1 }, denied, 0, epoch)
    expect(cache.lookup({ policy, key: 'late', cost: 1 }, 1)).toBeUndefined()
  })
})
