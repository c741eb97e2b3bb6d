// `penalty` through a limiter on every store (memory, Redis and Redis Cluster, PostgreSQL, memcached),
// on the store's client clock: `after` denials within `within` block the key for `block`, each
// repeat multiplies it by `factor` up to `max`; denials spread wider than `within` and peeks never
// count; the level is forgotten after 2 x max without a penalty; reset forgets the counts too.
import { afterAll, describe, expect, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { type LimiterStoreFactory, limiterStores, PATIENT } from './limiter-stores.js'

const { stores, close } = limiterStores('pen')
afterAll(close)

// Blocks by level: 5 s, 10 s, then 12 s (max). The level is remembered for 24 s (2 x max).
const policies = {
  login: {
    algorithm: 'fixed-window',
    limit: 1,
    window: '1s',
    penalty: { after: 2, within: '10s', block: '5s', factor: 2, max: '12s' },
  },
  plain: { algorithm: 'fixed-window', limit: 1, window: '1s' },
} as const

function setup(makeStore: LimiterStoreFactory, localDenyCache: boolean) {
  let clock = 1_700_000_000_000
  const limiter = createLimiter({ ...PATIENT, store: makeStore(() => clock), policies, localDenyCache })
  return {
    limiter,
    advance(ms: number) {
      clock += ms
    },
    /** One admitted request, then `after` (2) denials: the second earns the penalty. */
    async offend(key: string) {
      expect((await limiter.consume('login', key)).allowed).toBe(true)
      expect(await limiter.consume('login', key)).toMatchObject({ allowed: false, reason: 'limit' })
      return limiter.consume('login', key)
    },
  }
}

describe.each(stores)('penalty on the %s store', (_, makeStore) => {
  it.each([true, false])(
    'blocks for block, then block x factor, capped at max (deny cache %s)',
    async (denyCache) => {
      const { limiter, advance, offend } = setup(makeStore, denyCache)
      try {
        expect(await offend('u')).toMatchObject({
          allowed: false,
          reason: 'blocked',
          remaining: 0,
          retryAfterMs: 5000,
          penalty: { level: 0, blockMs: 5000 },
        })
        advance(1000)
        expect(await limiter.consume('login', 'u')).toMatchObject({ reason: 'blocked', retryAfterMs: 4000 })
        expect(await limiter.peek('login', 'u')).toMatchObject({ reason: 'blocked', retryAfterMs: 4000 })
        advance(4000)
        expect(await offend('u')).toMatchObject({ reason: 'blocked', penalty: { level: 1, blockMs: 10_000 } })
        advance(9999)
        expect(await limiter.consume('login', 'u')).toMatchObject({ reason: 'blocked', retryAfterMs: 1 })
        advance(1)
        expect(await offend('u')).toMatchObject({
          retryAfterMs: 12_000,
          penalty: { level: 2, blockMs: 12_000 },
        })
        advance(12_000)
        // 27 s after the first penalty, which is forgotten (24 s): two earlier ones remembered.
        expect(await offend('u')).toMatchObject({
          retryAfterMs: 12_000,
          penalty: { level: 2, blockMs: 12_000 },
        })
        advance(12_000)
        expect(await limiter.consume('login', 'u')).toMatchObject({ allowed: true })
        // Another key and another policy are untouched.
        expect(await limiter.consume('login', 'v')).toMatchObject({ allowed: true })
        await limiter.consume('plain', 'u')
        for (let i = 0; i < 3; i++)
          expect(await limiter.consume('plain', 'u')).toMatchObject({ reason: 'limit', retryAfterMs: 1000 })
      } finally {
        await limiter.close()
      }
    },
  )

  it('denials spread wider than within do not penalise; peeks never count', async () => {
    const { limiter, advance } = setup(makeStore, true)
    try {
      await limiter.consume('login', 'w')
      expect(await limiter.consume('login', 'w')).toMatchObject({ reason: 'limit' })
      advance(10_000)
      await limiter.consume('login', 'w')
      expect(await limiter.consume('login', 'w')).toMatchObject({ reason: 'limit', retryAfterMs: 1000 })
      for (let i = 0; i < 5; i++)
        expect(await limiter.peek('login', 'w')).toMatchObject({ reason: 'limit', retryAfterMs: 1000 })
      const second = await limiter.consume('login', 'w')
      expect(second).toMatchObject({ reason: 'blocked', retryAfterMs: 5000 })
    } finally {
      await limiter.close()
    }
  })

  it('forgets the level 2 x max after the last penalty, not before', async () => {
    const { limiter, advance, offend } = setup(makeStore, true)
    try {
      expect(await offend('m')).toMatchObject({ penalty: { level: 0, blockMs: 5000 } })
      advance(23_999)
      expect(await offend('m')).toMatchObject({ penalty: { level: 1, blockMs: 10_000 } })
      advance(24_000)
      expect(await offend('m')).toMatchObject({ penalty: { level: 0, blockMs: 5000 } })
    } finally {
      await limiter.close()
    }
  })

  it('reset forgets the block, the denials counted and the level', async () => {
    const { limiter, advance, offend } = setup(makeStore, true)
    try {
      expect(await offend('r')).toMatchObject({ penalty: { level: 0 } })
      await limiter.reset('login', 'r')
      expect(await offend('r')).toMatchObject({ penalty: { level: 0, blockMs: 5000 } })
      await limiter.reset('login', 'r')
      await limiter.consume('login', 'r')
      expect(await limiter.consume('login', 'r')).toMatchObject({ reason: 'limit' })
      await limiter.reset('login', 'r')
      await limiter.consume('login', 'r')
      expect(await limiter.consume('login', 'r')).toMatchObject({ reason: 'limit' })
      advance(1000)
      await limiter.consume('login', 'r')
      expect(await limiter.consume('login', 'r')).toMatchObject({ reason: 'blocked', retryAfterMs: 5000 })
    } finally {
      await limiter.close()
    }
  })

  it('a layered check counts the denial of its penalised layer', async () => {
    const { limiter } = setup(makeStore, true)
    try {
      await limiter.consume('login', 'l')
      const checks = [
        { policy: 'plain', key: 'ip' },
        { policy: 'login', key: 'l' },
      ] as const
      expect(await limiter.consume([...checks])).toMatchObject({ deniedBy: 'login', reason: 'limit' })
      const second = await limiter.consume([...checks])
      expect(second).toMatchObject({ deniedBy: 'login', reason: 'blocked', retryAfterMs: 5000 })
      expect(second.results[1]).toMatchObject({ penalty: { level: 0, blockMs: 5000 } })
      expect(await limiter.consume('plain', 'ip')).toMatchObject({ allowed: true })
    } finally {
      await limiter.close()
    }
  })
})
