// The store contract through the service's own store handles: every store URL the service opens
// (memory, Redis, Redis Cluster, PostgreSQL, memcached, each on a real server of the harnesses)
// answers every capability, or refuses it with SLUICE_UNSUPPORTED from the store itself and
// changes nothing. And `sluice serve` on Redis and on Cluster charges a reservation settled above
// its estimate.
import { fileURLToPath } from 'node:url'
import { describe, expect, inject, it } from 'vitest'
import { resolvePolicy } from '../../packages/sluice/src/policy.js'
import type { Step, Store } from '../../packages/sluice/src/store.js'
import { openStore } from '../../packages/sluice-server/src/server/store-url.js'
import { servingUrl, startCli } from '../helpers/cli-process.js'
import { post } from '../helpers/service.js'

const policy = resolvePolicy('api', { algorithm: 'fixed-window', limit: 10, window: '1m' })
const unique = () => `cap-${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}`

function clusterUrl(): string {
  const { nodes } = inject('redisCluster')
  return `redis+cluster://${nodes.map((n) => `${n.host}:${n.port}`).join(',')}`
}

/** Each store URL, and whether its store can charge past the limit. */
const URLS: [string, () => string, 'charges' | 'unsupported'][] = [
  ['memory', () => 'memory', 'charges'],
  ['redis://', () => `${inject('redis').url}/0`, 'charges'],
  ['redis+cluster://', clusterUrl, 'charges'],
  ['postgres://', () => inject('postgres').url, 'unsupported'],
  ['memcached://', () => `memcached://${inject('memcached').address}`, 'unsupported'],
]

async function remaining(store: Store, s: Step): Promise<number> {
  const [r] = await store.apply([s], 'peek')
  return r!.remaining
}

describe('every store URL of the service: each capability works or is SLUICE_UNSUPPORTED', () => {
  for (const [label, url, charge] of URLS) {
    it(`${label}: apply, peek, charge, refund, block, reset, now, close`, async () => {
      const { store } = await openStore(url(), { prefix: unique() })
      try {
        const s: Step = { policy, key: unique(), cost: 1 }
        const now = store.now()
        expect(Number.isSafeInteger(now)).toBe(true)
        expect(Math.abs(now - Date.now())).toBeLessThan(60_000)

        expect(await store.apply([s], 'consume')).toMatchObject([{ allowed: true, remaining: 9 }])
        expect(await store.apply([s], 'peek')).toMatchObject([{ allowed: true, remaining: 9 }])

        const charged = store.charge([{ ...s, cost: 3 }])
        if (charge === 'charges') {
          await charged
          expect(await remaining(store, s)).toBe(6)
        } else {
          await expect(charged).rejects.toMatchObject({ code: 'SLUICE_UNSUPPORTED' })
          expect(await remaining(store, s)).toBe(9)
        }
        const before = await remaining(store, s)
        await store.refund([s])
        expect(await remaining(store, s)).toBe(before + 1)

        await store.block([s], 60_000)
        expect(await store.apply([s], 'consume')).toMatchObject([{ allowed: false, blocked: true }])
        await store.reset([s])
        expect(await store.apply([s], 'consume')).toMatchObject([{ allowed: true, remaining: 9 }])
      } finally {
        await store.close()
      }
    })
  }
})

describe('sluice serve: a reservation settled above its estimate is charged', () => {
  const config = fileURLToPath(new URL('../fixtures/service/reserve.yaml', import.meta.url))

  for (const [label, url] of [
    ['redis://', () => `${inject('redis').url}/0`],
    ['redis+cluster://', clusterUrl],
  ] as const) {
    it(`--store ${label}: reserve 9,000, settle 12,000, then the key is out of units`, async () => {
      const cli = startCli(['serve', '--config', config, '--store', url(), '--port', '0'], {
        SLUICE_LOG_LEVEL: 'warn',
      })
      try {
        const base = await servingUrl(cli)
        const key = unique()
        const r = await post(`${base}/v1/reserve`, { policy: 'tokens', key, cost: 9_000 })
        expect(r).toMatchObject({ status: 200, body: { allowed: true, remaining: 1_000 } })
        const settled = await post(`${base}/v1/settle/${r.body.reservation}`, { actual: 12_000 })
        expect(settled).toMatchObject({ status: 200, body: { settled: true, actual: 12_000 } })
        const peek = await post(`${base}/v1/peek`, { policy: 'tokens', key })
        expect(peek.body).toMatchObject({ allowed: false, remaining: 0 })
      } finally {
        cli.child.kill('SIGTERM')
        await cli.exited
      }
    })
  }
})
