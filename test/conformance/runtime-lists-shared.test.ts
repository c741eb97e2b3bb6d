// Run-time list entries across limiters sharing one store (Redis, Redis Cluster, PostgreSQL): an
// entry added or removed through one applies in the other once its record cache reads the store's
// records again (every `staleness`, here 50 ms), with no store call for the listed key.
import { afterAll, describe, expect, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { limiterStores, PATIENT } from './limiter-stores.js'

const { stores, close } = limiterStores('rs')
afterAll(close)

const policies = { api: { algorithm: 'fixed-window', limit: 100, window: '1m' } } as const

/** Resolves once `check` holds, asking every 10 ms; fails after `boundMs`. */
async function eventually(check: () => Promise<boolean>, boundMs = 5_000): Promise<void> {
  const started = Date.now()
  while (!(await check())) {
    if (Date.now() - started > boundMs) throw new Error(`not within ${boundMs} ms`)
    await new Promise((done) => setTimeout(done, 10))
  }
}

describe.each(stores.filter(([name]) => name !== 'memory' && name !== 'memcached'))(
  'run-time lists shared on the %s store',
  (_, makeStore) => {
    it('an entry added or removed through one limiter applies in the other after its poll', async () => {
      const now = () => 1_700_000_000_000
      const store = makeStore(now)
      const a = createLimiter({ ...PATIENT, store, policies, staleness: '50ms' })
      const b = createLimiter({ ...PATIENT, store, policies, staleness: '50ms' })
      try {
        expect(await b.consume('api', 'ip:198.51.100.9')).toMatchObject({ allowed: true })
        await a.addListEntry('api', 'deny', '198.51.100.0/24', { reason: 'scraper' })
        await a.addListEntry('api', 'allow', 'ci-runner')
        await eventually(async () => (await b.consume('api', 'ip:198.51.100.9')).reason === 'denied')
        await eventually(async () => (await b.consume('api', 'ci-runner')).listed === 'allow')
        expect((await b.getLists('api')).deny).toMatchObject([
          { entry: '198.51.100.0/24', reason: 'scraper' },
        ])
        await a.removeListEntry('api', 'deny', '198.51.100.0/24')
        await eventually(async () => (await b.consume('api', 'ip:198.51.100.9')).allowed)
      } finally {
        await a.close()
        await b.close()
      }
    })
  },
)
