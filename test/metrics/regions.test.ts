// Per-region staleness of multiRegionStore in the metrics and the dashboard: a real local Redis and
// a "remote region" port where nothing listens, so its totals are never read and it turns stale;
// the scrape shows sluice_region_stale{region}, the last sync age and the region's share of the
// global policy, the dashboard snapshot and page show the regions.
import { Redis } from 'ioredis'
import { afterAll, describe, expect, inject, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import {
  createObservability,
  type DashboardSnapshot,
} from '../../packages/sluice/src/metrics/observability.js'
import { multiRegionStore } from '../../packages/sluice/src/stores/multi-region/index.js'
import { sample } from '../helpers/exposition.js'
import { freePort } from '../helpers/redis-harness.js'
import { mount } from './server.js'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe('region staleness in metrics and dashboard', () => {
  const local = new Redis(inject('redis').port, '127.0.0.1')
  let away: Redis
  afterAll(() => {
    local.disconnect()
    away?.disconnect()
  })

  it('a region that never answers is stale in /metrics and the dashboard; the local one is not', async () => {
    away = new Redis(await freePort(), '127.0.0.1', { maxRetriesPerRequest: null, retryStrategy: () => 100 })
    away.on('error', () => {})
    const store = multiRegionStore({
      region: 'eu',
      regions: { eu: local, us: away },
      syncEvery: '20ms',
      staleAfter: '100ms',
      prefix: `mrm${Date.now()}`,
    })
    const limiter = createLimiter({
      store,
      policies: { api: { algorithm: 'sliding-window-counter', limit: 5, window: '1m', scope: 'global' } },
    })
    const obs = createObservability({ limiter })
    const mounted = await mount(obs)
    try {
      // Idle (no key decided yet), us is still found unreachable: the exchange asks it anyway.
      await sleep(250)
      expect(store.regions().find((r) => r.region === 'us')).toMatchObject({
        stale: true,
        lastSyncAgeMs: null,
      })
      // Decisions continue on the local Redis while us is away.
      expect((await limiter.consume('api', 'k')).allowed).toBe(true)
      await sleep(250)
      const text = await (await fetch(`${mounted.url}/metrics`)).text()
      expect(sample(text, 'sluice_region_stale', { region: 'us' })).toBe(1)
      expect(sample(text, 'sluice_region_stale', { region: 'eu' })).toBe(0)
      // us never answered: no age; eu's last write is recent.
      expect(sample(text, 'sluice_region_sync_age_seconds', { region: 'us' })).toBeUndefined()
      expect(sample(text, 'sluice_region_sync_age_seconds', { region: 'eu' })).toBeLessThan(1)
      // The region's share of the global policy: 3 of 5 (eu is first by name), nothing handed over.
      expect(sample(text, 'sluice_region_share_ratio', { policy: 'api' })).toBe(0.6)
      const snapshot = (await (
        await fetch(`${mounted.url}/dashboard/snapshot.json`)
      ).json()) as DashboardSnapshot
      expect(snapshot.regions).toMatchObject([
        { region: 'eu', local: true, stale: false },
        { region: 'us', local: false, stale: true, lastSyncAgeMs: null },
      ])
      const page = await (await fetch(`${mounted.url}/dashboard`)).text()
      expect(page).toContain('id="regions"')
    } finally {
      await mounted.close()
      await limiter.close()
    }
  })
})
