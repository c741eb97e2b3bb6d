// Allow and deny lists of a policy through a limiter on every store (memory, Redis and Redis
// Cluster, PostgreSQL, memcached): a denied key or address is refused without a store call and
// spends nothing, an allowed one is not limited, and in a layered check a deny on any layer refuses
// the whole check while an allow skips its own layer only.
import { afterAll, describe, expect, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { forwardStore, type Step, type Store } from '../../packages/sluice/src/store.js'
import { limiterStores, PATIENT } from './limiter-stores.js'

const { stores, close } = limiterStores('ls')
afterAll(close)

const policies = {
  api: {
    algorithm: 'fixed-window',
    limit: 2,
    window: '1m',
    deny: { keys: ['mallory'], ips: ['203.0.113.0/24', '2001:db8:bad::/48'] },
    allow: { keys: ['ci-runner'], ips: ['10.0.0.0/8'] },
  },
  perIp: { algorithm: 'token-bucket', limit: 3, window: '1m' },
} as const

/** `store` with every step that reaches it recorded: what the lists let through to the store. */
function counted(store: Store): { store: Store; seen: Step[] } {
  const seen: Step[] = []
  return {
    seen,
    store: forwardStore(store, {
      apply(steps, mode) {
        seen.push(...steps)
        return store.apply(steps, mode)
      },
    }),
  }
}

describe.each(stores)('allow and deny lists on the %s store', (_, makeStore) => {
  const now = () => 1_700_000_000_000

  it('denies a listed key, v4 and v6 address without a store call, spending nothing', async () => {
    const { store, seen } = counted(makeStore(now))
    const limiter = createLimiter({ ...PATIENT, store, policies })
    try {
      for (const key of [
        'mallory',
        '203.0.113.9',
        'ip:203.0.113.200',
        'ip:2001:db8:bad:1::/64',
        '2001:db8:bad::7',
      ]) {
        expect(await limiter.consume('api', key)).toMatchObject({
          allowed: false,
          reason: 'denied',
          listed: 'deny',
          remaining: 0,
          policy: 'api',
          key,
        })
      }
      expect(seen).toEqual([])
      // Not listed: limited as usual, and it reaches the store.
      expect(await limiter.consume('api', '203.0.114.1')).toMatchObject({ allowed: true, remaining: 1 })
      expect(await limiter.consume('api', '203.0.114.1')).toMatchObject({ allowed: true, remaining: 0 })
      expect(await limiter.consume('api', '203.0.114.1')).toMatchObject({ allowed: false, reason: 'limit' })
      expect(seen.map((s) => s.key)).toEqual(['203.0.114.1', '203.0.114.1', '203.0.114.1'])
    } finally {
      await limiter.close()
    }
  })

  it('never limits an allowed key or address, and asks the store nothing for it', async () => {
    const { store, seen } = counted(makeStore(now))
    const limiter = createLimiter({ ...PATIENT, store, policies })
    try {
      for (let i = 0; i < 5; i++) {
        expect(await limiter.consume('api', 'ci-runner')).toMatchObject({
          allowed: true,
          listed: 'allow',
          remaining: 2,
        })
        expect(await limiter.consume('api', 'ip:10.1.2.3')).toMatchObject({ allowed: true, listed: 'allow' })
      }
      expect(seen).toEqual([])
      // A deny wins over an allow that holds the same key.
      const both = createLimiter({
        ...PATIENT,
        store: makeStore(now),
        policies: {
          p: { algorithm: 'gcra', limit: 1, window: '1s', allow: { keys: ['k'] }, deny: { keys: ['k'] } },
        },
      })
      expect(await both.consume('p', 'k')).toMatchObject({ allowed: false, reason: 'denied' })
      await both.close()
    } finally {
      await limiter.close()
    }
  })

  it('layered: a deny on one layer refuses the whole check, committing nothing', async () => {
    const { store, seen } = counted(makeStore(now))
    const limiter = createLimiter({ ...PATIENT, store, policies })
    try {
      const d = await limiter.consume([
        { policy: 'perIp', key: 'ip:203.0.113.5' },
        { policy: 'api', key: 'ip:203.0.113.5' },
      ])
      expect(d).toMatchObject({ allowed: false, deniedBy: 'api', reason: 'denied', listed: 'deny' })
      expect(d.results[0]).toMatchObject({ allowed: true, notEvaluated: true })
      expect(seen).toEqual([])
      expect(await limiter.peek('perIp', 'ip:203.0.113.5')).toMatchObject({ remaining: 3 })
    } finally {
      await limiter.close()
    }
  })

  it('layered: an allow skips its own layer only; the others are limited and committed', async () => {
    const { store, seen } = counted(makeStore(now))
    const limiter = createLimiter({ ...PATIENT, store, policies })
    try {
      const checks = [
        { policy: 'perIp', key: 'ci-runner' },
        { policy: 'api', key: 'ci-runner' },
      ] as const
      for (let i = 0; i < 3; i++) {
        const d = await limiter.consume([...checks])
        expect(d).toMatchObject({ allowed: true })
        expect(d.results[1]).toMatchObject({ allowed: true, listed: 'allow', remaining: 2 })
        expect(d.results[0]).toMatchObject({ allowed: true, remaining: 2 - i })
      }
      expect(await limiter.consume([...checks])).toMatchObject({
        allowed: false,
        deniedBy: 'perIp',
        reason: 'limit',
      })
      expect(seen.every((s) => s.policy.name === 'perIp')).toBe(true)
    } finally {
      await limiter.close()
    }
  })
})
