// Per-key overrides through the limiter on every store that keeps records (memory, Redis, Redis
// Cluster, PostgreSQL), each on a controllable clock: limit, window, burst, unlimited, blocked, ttl,
// reason; layered checks per layer; refunds under the derived policy; bad input writes nothing.
import { afterAll, describe, expect, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import type { Store } from '../../packages/sluice/src/store.js'
import { memcachedStore } from '../../packages/sluice/src/stores/memcached/index.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { postgresStore } from '../../packages/sluice/src/stores/postgres/index.js'
import { redisStore } from '../../packages/sluice/src/stores/redis/index.js'
import { memcachedClient, freshPrefix as memcachedPrefix } from '../helpers/memcached-clients.js'
import { freshTable, postgresPool } from '../helpers/postgres-clients.js'
import { freshPrefix, ioredis, ioredisCluster } from '../helpers/redis-clients.js'

const standalone = ioredis()
const cluster = ioredisCluster()
const pool = postgresPool()
afterAll(async () => {
  standalone.disconnect()
  cluster.disconnect()
  await pool.end()
})

const T0 = 1_700_000_000_000
const STORES: [string, (now: () => number) => Store][] = [
  ['memory', (now) => memoryStore({ now })],
  ['redis', (now) => redisStore(standalone, { clock: 'client', now, prefix: freshPrefix('ov') })],
  ['redis cluster', (now) => redisStore(cluster, { clock: 'client', now, prefix: freshPrefix('ovc') })],
  [
    'postgres',
    (now) => postgresStore(pool, { table: freshTable('ov'), clock: 'client', now, cleanupIntervalMs: 0 }),
  ],
]
const policies = {
  api: { algorithm: 'fixed-window', limit: 2, window: '1m' },
  bucket: { algorithm: 'token-bucket', limit: 1, window: '1s', burst: 2 },
  daily: { algorithm: 'fixed-window', limit: 100, window: '1d' },
} as const

function setup(make: (now: () => number) => Store) {
  let clock = T0
  const store = make(() => clock)
  const limiter = createLimiter({ store, policies, localDenyCache: { maxKeys: 100 }, storeTimeout: '5s' })
  return {
    limiter,
    advance: (ms: number) => {
      clock += ms
    },
  }
}

async function allowedOf(
  limiter: ReturnType<typeof setup>['limiter'],
  policy: 'api' | 'bucket',
  key: string,
  n: number,
) {
  let allowed = 0
  for (let i = 0; i < n; i++) if ((await limiter.consume(policy, key)).allowed) allowed++
  return allowed
}

describe.each(STORES)('overrides on %s', (_, make) => {
  it('limit: the key gets its own limit at once, counts carry over, other keys keep the policy', async () => {
    const { limiter } = setup(make)
    try {
      expect((await limiter.consume('api', 'vip')).allowed).toBe(true)
      const set = await limiter.setOverride('api', 'vip', { limit: 5, reason: 'customer 7' })
      expect(set).toMatchObject({ policy: 'api', key: 'vip', limit: 5, reason: 'customer 7' })
      const d = await limiter.consume('api', 'vip')
      expect(d).toMatchObject({ allowed: true, limit: 5, remaining: 3, override: true })
      expect(await allowedOf(limiter, 'api', 'vip', 5)).toBe(3)
      expect(await allowedOf(limiter, 'api', 'other', 5)).toBe(2)
      expect((await limiter.consume('api', 'other')).override).toBeUndefined()
      expect(await limiter.getOverride('api', 'vip')).toMatchObject({ limit: 5, reason: 'customer 7' })
      expect(await limiter.listOverrides('api')).toEqual([expect.objectContaining({ key: 'vip', limit: 5 })])
      expect(await limiter.clearOverride('api', 'vip')).toBe(true)
      expect(await limiter.clearOverride('api', 'vip')).toBe(false)
      expect(await limiter.consume('api', 'vip')).toMatchObject({ allowed: false, limit: 2 })
      expect(await limiter.listOverrides('api')).toEqual([])
    } finally {
      await limiter.close()
    }
  })

  it('window and burst: a derived policy under the same storage id', async () => {
    const { limiter, advance } = setup(make)
    try {
      await limiter.setOverride('api', 'short', { window: '1s' })
      expect(await allowedOf(limiter, 'api', 'short', 3)).toBe(2)
      advance(1000)
      expect(await allowedOf(limiter, 'api', 'short', 3)).toBe(2)
      await limiter.setOverride('bucket', 'big', { burst: 5 })
      expect(await limiter.peek('bucket', 'big')).toMatchObject({ limit: 5, remaining: 5, override: true })
      expect(await allowedOf(limiter, 'bucket', 'big', 6)).toBe(5)
      expect(await allowedOf(limiter, 'bucket', 'small', 6)).toBe(2)
    } finally {
      await limiter.close()
    }
  })

  it('unlimited admits and blocked denies, each without a store call; blocked waits out its ttl', async () => {
    const { limiter, advance } = setup(make)
    try {
      await limiter.setOverride('api', 'free', { unlimited: true })
      expect(await allowedOf(limiter, 'api', 'free', 10)).toBe(10)
      expect(await limiter.peek('api', 'free')).toMatchObject({ allowed: true, override: true })
      await limiter.setOverride('api', 'bad', { blocked: true, ttl: '10s', reason: 'abuse' })
      expect(await limiter.consume('api', 'bad')).toMatchObject({
        allowed: false,
        reason: 'blocked',
        retryAfterMs: 10_000,
        override: true,
      })
      await limiter.setOverride('api', 'forever', { blocked: true })
      expect(await limiter.consume('api', 'forever')).toMatchObject({
        reason: 'blocked',
        retryAfterMs: 60_000,
      })
      advance(9_999)
      expect(await limiter.consume('api', 'bad')).toMatchObject({ allowed: false, retryAfterMs: 1 })
      advance(1)
      // The override expired by itself: the key is decided by the policy again, with fresh counts.
      expect(await limiter.consume('api', 'bad')).toMatchObject({ allowed: true, remaining: 1 })
      expect((await limiter.consume('api', 'bad')).override).toBeUndefined()
      expect(await limiter.getOverride('api', 'bad')).toBeUndefined()
      expect((await limiter.listOverrides('api')).map((o) => o.key).sort()).toEqual(['forever', 'free'])
    } finally {
      await limiter.close()
    }
  })

  it('ttl: a raised limit ends by itself on the store clock', async () => {
    const { limiter, advance } = setup(make)
    try {
      await limiter.setOverride('daily', 'k', { limit: 1, ttl: '1h' })
      expect(await limiter.getOverride('daily', 'k')).toMatchObject({ limit: 1, expiresAt: T0 + 3_600_000 })
      expect((await limiter.consume('daily', 'k')).allowed).toBe(true)
      expect((await limiter.consume('daily', 'k')).allowed).toBe(false)
      advance(3_600_000)
      expect(await limiter.consume('daily', 'k')).toMatchObject({ allowed: true, limit: 100 })
    } finally {
      await limiter.close()
    }
  })

  it('layered checks apply each layer its own override; a blocked layer commits nothing', async () => {
    const { limiter } = setup(make)
    try {
      await limiter.setOverride('daily', 'k', { limit: 1 })
      const first = await limiter.consume([
        { policy: 'api', key: 'k' },
        { policy: 'daily', key: 'k' },
      ])
      expect(first.allowed).toBe(true)
      expect(first.results.map((r) => [r.limit, r.remaining, r.override])).toEqual([
        [2, 1, undefined],
        [1, 0, true],
      ])
      const second = await limiter.consume([
        { policy: 'api', key: 'k' },
        { policy: 'daily', key: 'k' },
      ])
      expect(second).toMatchObject({ allowed: false, deniedBy: 'daily' })
      await limiter.setOverride('daily', 'j', { blocked: true })
      const blocked = await limiter.consume([
        { policy: 'api', key: 'j' },
        { policy: 'daily', key: 'j' },
      ])
      expect(blocked).toMatchObject({ allowed: false, deniedBy: 'daily', reason: 'blocked' })
      expect(await limiter.peek('api', 'j')).toMatchObject({ remaining: 2 })
    } finally {
      await limiter.close()
    }
  })

  it('refunds and wait go through the derived policy', async () => {
    const { limiter } = setup(make)
    try {
      await limiter.setOverride('api', 'k', { limit: 3 })
      expect(await allowedOf(limiter, 'api', 'k', 4)).toBe(3)
      await limiter.refund('api', 'k', 1)
      expect(await limiter.peek('api', 'k')).toMatchObject({ allowed: true, remaining: 1, limit: 3 })
      const waited = await limiter.wait('api', 'k', { maxWaitMs: 0 })
      expect(waited).toMatchObject({ allowed: true, limit: 3 })
    } finally {
      await limiter.close()
    }
  })

  it('bad input is refused with a typed error and nothing is stored', async () => {
    const { limiter } = setup(make)
    try {
      const bad: [unknown, unknown, unknown, string][] = [
        ['nope', 'k', { limit: 1 }, 'SLUICE_UNKNOWN_POLICY'],
        ['api', '', { limit: 1 }, 'SLUICE_INVALID_KEY'],
        ['api', 'k', {}, 'SLUICE_INVALID_OPTIONS'],
        ['api', 'k', null, 'SLUICE_INVALID_OPTIONS'],
        ['api', 'k', { limt: 1 }, 'SLUICE_INVALID_OPTIONS'],
        ['api', 'k', { limit: 0 }, 'SLUICE_INVALID_POLICY'],
        ['api', 'k', { limit: -1 }, 'SLUICE_INVALID_POLICY'],
        ['api', 'k', { limit: 1.5 }, 'SLUICE_INVALID_POLICY'],
        ['api', 'k', { window: 'soon' }, 'SLUICE_INVALID_DURATION'],
        ['api', 'k', { window: 0 }, 'SLUICE_INVALID_DURATION'],
        ['api', 'k', { limit: 1, ttl: '-1s' }, 'SLUICE_INVALID_DURATION'],
        ['api', 'k', { limit: 1, ttl: 0 }, 'SLUICE_INVALID_DURATION'],
        ['api', 'k', { unlimited: true, blocked: true }, 'SLUICE_INVALID_OPTIONS'],
        ['api', 'k', { unlimited: true, limit: 5 }, 'SLUICE_INVALID_OPTIONS'],
        ['api', 'k', { unlimited: 'yes' }, 'SLUICE_INVALID_OPTIONS'],
        ['api', 'k', { burst: 5 }, 'SLUICE_INVALID_POLICY'],
        ['api', 'k', { limit: 1, reason: 5 }, 'SLUICE_INVALID_OPTIONS'],
        ['api', 'k', { limit: 2 ** 50 }, 'SLUICE_INVALID_POLICY'],
      ]
      for (const [policy, key, options, code] of bad)
        await expect(
          limiter.setOverride(policy as 'api', key as string, options as never),
          JSON.stringify([policy, key, options]),
        ).rejects.toMatchObject({ code })
      expect(await limiter.listOverrides('api')).toEqual([])
      expect(await limiter.consume('api', 'k')).toMatchObject({ allowed: true, limit: 2 })
      await expect(limiter.getOverride('nope' as 'api', 'k')).rejects.toMatchObject({
        code: 'SLUICE_UNKNOWN_POLICY',
      })
      await expect(limiter.listOverrides('nope' as 'api')).rejects.toMatchObject({
        code: 'SLUICE_UNKNOWN_POLICY',
      })
      await expect(limiter.clearOverride('api', '')).rejects.toMatchObject({ code: 'SLUICE_INVALID_KEY' })
    } finally {
      await limiter.close()
    }
  })
})

describe('overrides: what each store and policy kind allows', () => {
  it('memory: consumeSync stays synchronous with and without an override', async () => {
    const limiter = createLimiter({ policies })
    expect(limiter.consumeSync('api', 'k')).toMatchObject({ allowed: true, limit: 2 })
    await limiter.setOverride('api', 'k', { limit: 4 })
    expect(limiter.consumeSync('api', 'k')).toMatchObject({ allowed: true, limit: 4, remaining: 2 })
    await limiter.setOverride('api', 'u', { unlimited: true })
    expect(limiter.consumeSync('api', 'u')).toMatchObject({ allowed: true, override: true })
    await limiter.close()
  })

  it('memcached refuses overrides with SLUICE_UNSUPPORTED and keeps deciding', async () => {
    const client = memcachedClient()
    const limiter = createLimiter({
      store: memcachedStore(client, { prefix: memcachedPrefix('ov') }),
      policies,
    })
    try {
      await expect(limiter.setOverride('api', 'k', { limit: 5 })).rejects.toMatchObject({
        code: 'SLUICE_UNSUPPORTED',
      })
      await expect(limiter.listOverrides('api')).rejects.toMatchObject({ code: 'SLUICE_UNSUPPORTED' })
      expect((await limiter.consume('api', 'k')).allowed).toBe(true)
    } finally {
      await limiter.close()
      client.close()
    }
  })

  it('hybrid, concurrency and global policies refuse what they cannot apply', async () => {
    const limiter = createLimiter({
      policies: {
        slots: { algorithm: 'concurrency', limit: 2, timeout: '10s' },
        world: { algorithm: 'sliding-window-counter', limit: 10, window: '1m', scope: 'global' },
      },
    })
    await expect(limiter.setOverride('slots', 'k', { window: '1s' })).rejects.toMatchObject({
      code: 'SLUICE_INVALID_OPTIONS',
    })
    await expect(limiter.setOverride('world', 'k', { window: '1s' })).rejects.toMatchObject({
      code: 'SLUICE_INVALID_OPTIONS',
    })
    await limiter.setOverride('slots', 'k', { limit: 3 })
    for (let i = 0; i < 3; i++) expect((await limiter.acquire('slots', 'k')).allowed).toBe(true)
    expect((await limiter.acquire('slots', 'k')).allowed).toBe(false)
    await limiter.setOverride('world', 'k', { limit: 1 })
    expect((await limiter.consume('world', 'k')).allowed).toBe(true)
    expect((await limiter.consume('world', 'k')).allowed).toBe(false)
    await limiter.close()
  })

  it('staleness is validated', () => {
    expect(() => createLimiter({ policies, staleness: 'often' })).toThrow(
      expect.objectContaining({ code: 'SLUICE_INVALID_DURATION' }),
    )
    expect(() => createLimiter({ policies, staleness: 0 })).toThrow(
      expect.objectContaining({ code: 'SLUICE_INVALID_DURATION' }),
    )
    expect(() => createLimiter({ policies, stalenes: '1s' } as never)).toThrow(/staleness/)
  })
})
