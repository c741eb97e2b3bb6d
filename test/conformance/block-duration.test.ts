// `blockDuration` through a limiter on every store (memory, Redis and Redis Cluster, PostgreSQL,
// memcached), on the store's client clock: the denial for lack of units blocks the key for exactly
// the block, reports it, and the key admits at its end; peek never blocks; a layered check blocks
// the layers that ran out. The block is the store's own `block`, so each store's block rule decides.
import { afterAll, describe, expect, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { type LimiterStoreFactory, limiterStores, PATIENT } from './limiter-stores.js'

const { stores, close } = limiterStores('bd')
afterAll(close)

const policies = {
  login: { algorithm: 'fixed-window', limit: 2, window: '1s', blockDuration: '5s' },
  perIp: { algorithm: 'sliding-window-log', limit: 3, window: '1s', blockDuration: '20s' },
} as const

function setup(makeStore: LimiterStoreFactory, localDenyCache: boolean) {
  let clock = 1_700_000_000_000
  const limiter = createLimiter({ ...PATIENT, store: makeStore(() => clock), policies, localDenyCache })
  return {
    limiter,
    advance(ms: number) {
      clock += ms
    },
  }
}

describe.each(stores)('blockDuration on the %s store', (_, makeStore) => {
  it.each([true, false])(
    'a denial for lack of units blocks for exactly the block and reports it (deny cache %s)',
    async (denyCache) => {
      const { limiter, advance } = setup(makeStore, denyCache)
      try {
        await limiter.consume('login', 'u')
        await limiter.consume('login', 'u')
        expect(await limiter.consume('login', 'u')).toMatchObject({
          allowed: false,
          reason: 'limit',
          remaining: 0,
          retryAfterMs: 5000,
        })
        advance(1000)
        expect(await limiter.consume('login', 'u')).toMatchObject({ reason: 'blocked', retryAfterMs: 4000 })
        expect(await limiter.peek('login', 'u')).toMatchObject({ reason: 'blocked', retryAfterMs: 4000 })
        advance(3999)
        expect(await limiter.consume('login', 'u')).toMatchObject({ reason: 'blocked', retryAfterMs: 1 })
        advance(1)
        expect(await limiter.consume('login', 'u')).toMatchObject({ allowed: true, remaining: 1 })
      } finally {
        await limiter.close()
      }
    },
  )

  it('peek never blocks', async () => {
    const { limiter, advance } = setup(makeStore, true)
    try {
      await limiter.consume('login', 'p')
      await limiter.consume('login', 'p')
      expect(await limiter.peek('login', 'p')).toMatchObject({ reason: 'limit', retryAfterMs: 1000 })
      advance(1000)
      expect(await limiter.consume('login', 'p')).toMatchObject({ allowed: true, remaining: 1 })
    } finally {
      await limiter.close()
    }
  })

  it('a layered check blocks the layers that ran out of units, each for its own block', async () => {
    const { limiter, advance } = setup(makeStore, true)
    try {
      await limiter.consume('login', 'v')
      await limiter.consume('login', 'v')
      const one = await limiter.consume([
        { policy: 'perIp', key: 'ip' },
        { policy: 'login', key: 'v' },
      ])
      expect(one).toMatchObject({ allowed: false, deniedBy: 'login', retryAfterMs: 5000 })
      expect(one.results[0]).toMatchObject({ allowed: true, remaining: 3, retryAfterMs: 0 })
      expect(await limiter.consume('perIp', 'ip')).toMatchObject({ allowed: true, remaining: 2 })

      await limiter.consume('perIp', 'ip2', { cost: 3 })
      await limiter.consume('login', 'w')
      await limiter.consume('login', 'w')
      const both = await limiter.consume([
        { policy: 'perIp', key: 'ip2' },
        { policy: 'login', key: 'w' },
      ])
      expect(both.results.map((r) => [r.reason, r.retryAfterMs])).toEqual([
        ['limit', 20_000],
        ['limit', 5000],
      ])
      advance(5000)
      expect(await limiter.consume('login', 'w')).toMatchObject({ allowed: true })
      expect(await limiter.consume('perIp', 'ip2')).toMatchObject({ reason: 'blocked', retryAfterMs: 15_000 })
      advance(15_000)
      expect(await limiter.consume('perIp', 'ip2')).toMatchObject({ allowed: true, remaining: 2 })
    } finally {
      await limiter.close()
    }
  })
})
