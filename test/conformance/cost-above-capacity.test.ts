// `costAboveCapacity: 'deny'` through a limiter on every store (memory, Redis and Redis Cluster,
// PostgreSQL, memcached), deny cache on and off: a cost above capacity is a denial with the key's
// numbers as they are, alone or in a layered check, and nothing is committed.
import { afterAll, describe, expect, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { limiterStores, PATIENT } from './limiter-stores.js'

const { stores, close } = limiterStores('oc')
afterAll(close)

const policies = {
  upload: { algorithm: 'gcra', limit: 10, window: '1s', costAboveCapacity: 'deny' },
  perIp: { algorithm: 'fixed-window', limit: 5, window: '1s' },
} as const

describe.each(stores)('costAboveCapacity on the %s store', (_, makeStore) => {
  it.each([true, false])(
    'denies a cost above capacity, committing nothing (deny cache %s)',
    async (denyCache) => {
      const limiter = createLimiter({
        ...PATIENT,
        store: makeStore(() => 1_700_000_000_000),
        policies,
        localDenyCache: denyCache,
      })
      try {
        await limiter.consume('upload', 'u', { cost: 4 })
        expect(await limiter.consume('upload', 'u', { cost: 11 })).toMatchObject({
          allowed: false,
          reason: 'cost_above_capacity',
          remaining: 6,
          resetMs: 400,
          retryAfterMs: 1000,
        })
        const layered = await limiter.consume([
          { policy: 'perIp', key: 'ip', cost: 2 },
          { policy: 'upload', key: 'u', cost: 11 },
        ])
        expect(layered).toMatchObject({ allowed: false, deniedBy: 'upload', reason: 'cost_above_capacity' })
        expect(await limiter.peek('perIp', 'ip')).toMatchObject({ remaining: 5 })
        expect(await limiter.consume('upload', 'u', { cost: 6 })).toMatchObject({
          allowed: true,
          remaining: 0,
        })
      } finally {
        await limiter.close()
      }
    },
  )
})
