// Run-time allow and deny entries (limiter.addListEntry, removeListEntry, getLists) through a
// limiter on every store that keeps records (memory, Redis and Redis Cluster, PostgreSQL), and the
// refusal of memcached: an entry applies at once in the limiter that wrote it, without a store call
// for a listed key, expires by its ttl on the store's clock, and a bad entry stores nothing.
import { afterAll, describe, expect, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { forwardStore, type Step, type Store } from '../../packages/sluice/src/store.js'
import { limiterStores, PATIENT } from './limiter-stores.js'

const { stores, close } = limiterStores('rl')
afterAll(close)

const policies = {
  api: { algorithm: 'fixed-window', limit: 2, window: '1m', deny: { keys: ['configured'] } },
  perIp: { algorithm: 'token-bucket', limit: 3, window: '1m' },
} as const

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

describe.each(stores.filter(([name]) => name !== 'memcached'))(
  'run-time lists on the %s store',
  (_, makeStore) => {
    it('adds, applies at once without a store call, lists with their source, and removes', async () => {
      let now = 1_700_000_000_000
      const { store, seen } = counted(makeStore(() => now))
      const limiter = createLimiter({ ...PATIENT, store, policies })
      try {
        expect(await limiter.addListEntry('api', 'deny', 'mallory', { reason: 'abuse' })).toEqual({
          entry: 'mallory',
          kind: 'key',
          source: 'runtime',
          reason: 'abuse',
          addedAt: now,
        })
        await limiter.addListEntry('api', 'deny', '203.0.113.0/24')
        await limiter.addListEntry('api', 'allow', 'ci-runner', { ttl: '10s' })
        await limiter.addListEntry('perIp', 'deny', '2001:db8:bad::/48')
        for (const [policy, key] of [
          ['api', 'mallory'],
          ['api', 'ip:203.0.113.7'],
          ['perIp', 'ip:2001:db8:bad:1::/64'],
        ] as const)
          expect(await limiter.consume(policy, key)).toMatchObject({
            allowed: false,
            reason: 'denied',
            listed: 'deny',
          })
        for (let i = 0; i < 4; i++)
          expect(await limiter.consume('api', 'ci-runner')).toMatchObject({
            allowed: true,
            listed: 'allow',
            remaining: 2,
          })
        expect(seen).toEqual([])
        // Layered: a run-time deny on one layer refuses the whole check, committing nothing.
        expect(
          await limiter.consume([
            { policy: 'perIp', key: 'ip:203.0.113.7' },
            { policy: 'api', key: 'ip:203.0.113.7' },
          ]),
        ).toMatchObject({ allowed: false, deniedBy: 'api', reason: 'denied' })
        expect(seen).toEqual([])

        const lists = await limiter.getLists('api')
        expect(lists.policy).toBe('api')
        expect(lists.deny).toEqual([
          { entry: 'configured', kind: 'key', source: 'config' },
          { entry: '203.0.113.0/24', kind: 'ip', source: 'runtime', addedAt: now },
          { entry: 'mallory', kind: 'key', source: 'runtime', reason: 'abuse', addedAt: now },
        ])
        expect(lists.allow).toEqual([
          { entry: 'ci-runner', kind: 'key', source: 'runtime', addedAt: now, expiresAt: now + 10_000 },
        ])

        // The allow entry ends by itself on the store's clock.
        now += 10_001
        expect(await limiter.consume('api', 'ci-runner')).toMatchObject({ allowed: true, remaining: 1 })
        expect((await limiter.consume('api', 'ci-runner')).listed).toBeUndefined()
        expect((await limiter.getLists('api')).allow).toEqual([])

        expect(await limiter.removeListEntry('api', 'deny', 'mallory')).toBe(true)
        expect(await limiter.removeListEntry('api', 'deny', 'mallory')).toBe(false)
        expect(await limiter.consume('api', 'mallory')).toMatchObject({ allowed: true })
        expect(await limiter.removeListEntry('api', 'deny', '203.0.113.0/24')).toBe(true)
        expect(await limiter.consume('api', 'ip:203.0.113.7')).toMatchObject({ allowed: true })
        // A configured entry is not the run-time list's to remove.
        expect(await limiter.removeListEntry('api', 'deny', 'configured')).toBe(false)
        expect(await limiter.consume('api', 'configured')).toMatchObject({ reason: 'denied' })
      } finally {
        await limiter.close()
      }
    })

    it('refuses bad entries with a typed error and stores nothing', async () => {
      const limiter = createLimiter({ ...PATIENT, store: makeStore(() => 1_700_000_000_000), policies })
      try {
        const bad: [unknown[], string][] = [
          [['api', 'deny', ''], 'SLUICE_INVALID_LIST'],
          [['api', 'deny', 'k'.repeat(1025)], 'SLUICE_INVALID_LIST'],
          [['api', 'deny', '10.0.0.256'], 'SLUICE_INVALID_LIST'],
          [['api', 'deny', '10.0.0.0/33'], 'SLUICE_INVALID_LIST'],
          [['api', 'deny', '2001:db8::/129'], 'SLUICE_INVALID_LIST'],
          [['api', 'block', 'k'], 'SLUICE_INVALID_LIST'],
          [['api', 'deny', 'k', { reason: 'r'.repeat(257) }], 'SLUICE_INVALID_LIST'],
          [['api', 'deny', 'k', { ttl: 'soon' }], 'SLUICE_INVALID_DURATION'],
          [['api', 'deny', 'k', { tll: '1h' }], 'SLUICE_INVALID_OPTIONS'],
          [['nope', 'deny', 'k'], 'SLUICE_UNKNOWN_POLICY'],
        ]
        for (const [args, code] of bad) {
          const add = limiter.addListEntry as (...a: unknown[]) => Promise<unknown>
          await expect(add(...args), JSON.stringify(args).slice(0, 60)).rejects.toMatchObject({ code })
        }
        expect(await limiter.getLists('api')).toEqual({
          policy: 'api',
          allow: [],
          deny: [{ entry: 'configured', kind: 'key', source: 'config' }],
        })
      } finally {
        await limiter.close()
      }
    })
  },
)

describe('run-time lists on memcached', () => {
  it('are refused with SLUICE_UNSUPPORTED; the configured lists still apply', async () => {
    const [, makeStore] = stores.find(([name]) => name === 'memcached')!
    const limiter = createLimiter({ ...PATIENT, store: makeStore(() => 1_700_000_000_000), policies })
    try {
      await expect(limiter.addListEntry('api', 'deny', 'mallory')).rejects.toMatchObject({
        code: 'SLUICE_UNSUPPORTED',
      })
      await expect(limiter.getLists('api')).rejects.toMatchObject({ code: 'SLUICE_UNSUPPORTED' })
      expect(await limiter.consume('api', 'mallory')).toMatchObject({ allowed: true })
      expect(await limiter.consume('api', 'configured')).toMatchObject({ reason: 'denied' })
    } finally {
      await limiter.close()
    }
  })
})
