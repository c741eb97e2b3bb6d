import { afterEach, describe, expect, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import type { DashboardSnapshot, Observability } from '../../packages/sluice/src/metrics/observability.js'
import { createObservability } from '../../packages/sluice/src/metrics/observability.js'
import type { Spike } from '../../packages/sluice/src/metrics/spikes.js'
import { sample } from '../helpers/exposition.js'
import type { Mounted } from './server.js'
import { mount } from './server.js'

const policies = {
  api: { algorithm: 'fixed-window', limit: 5, window: '1m' },
  login: { algorithm: 'token-bucket', limit: 2, window: '1m' },
} as const

let mounted: Mounted | undefined
afterEach(async () => {
  await mounted?.close()
  mounted = undefined
})

/** Read SSE frames from `url` until `until` accepts one; returns every snapshot seen. */
async function readEvents(
  url: string,
  until: (s: DashboardSnapshot, all: DashboardSnapshot[]) => boolean,
  timeoutMs = 5000,
): Promise<DashboardSnapshot[]> {
  const controller = new AbortController()
  const timer = setTimeout(() => controller.abort(), timeoutMs)
  const res = await fetch(url, { signal: controller.signal })
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/)
  const seen: DashboardSnapshot[] = []
  const decoder = new TextDecoder()
  let buffer = ''
  try {
    for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true })
      let end = buffer.indexOf('\n\n')
      while (end >= 0) {
        const frame = buffer.slice(0, end)
        buffer = buffer.slice(end + 2)
        const data = frame
          .split('\n')
          .filter((l) => l.startsWith('data: '))
          .map((l) => l.slice(6))
          .join('\n')
        if (data.length > 0) {
          const snapshot = JSON.parse(data) as DashboardSnapshot
          seen.push(snapshot)
          if (until(snapshot, seen)) return seen
        }
        end = buffer.indexOf('\n\n')
      }
    }
  } finally {
    clearTimeout(timer)
    controller.abort()
  }
  return seen
}

describe('createObservability over node:http', () => {
  it('serves /metrics that matches what the limiter decided', async () => {
    const limiter = createLimiter({ policies })
    const obs = createObservability({ limiter })
    mounted = await mount(obs)
    for (let i = 0; i < 8; i++) await limiter.consume('api', `ip-${i % 2}`)
    const res = await fetch(`${mounted.url}/metrics`)
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/)
    const text = await res.text()
    expect(sample(text, 'sluice_decisions_total', { policy: 'api', outcome: 'allowed' })).toBe(8)
    const snap = obs.snapshot()
    expect(snap.policies.find((p) => p.policy === 'api')?.totals).toEqual({
      allowed: 8,
      denied: 0,
      degraded: 0,
    })
  })

  it('serves one self-contained page: nothing loaded from elsewhere', async () => {
    const obs = createObservability({ limiter: createLimiter({ policies }), dashboardPath: '/ops/limits' })
    mounted = await mount(obs)
    const res = await fetch(`${mounted.url}/ops/limits`)
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8')
    expect(res.headers.get('content-security-policy')).toContain("default-src 'none'")
    const html = await res.text()
    expect(html).toContain('data-base="/ops/limits"')
    expect(html).not.toMatch(/<script[^>]+src=|<link[^>]+href=|@import|url\(/i)
    // The only absolute URL is the SVG namespace, which is a name, not a fetch.
    expect(html.match(/https?:\/\/[^'"\s]+/g)).toEqual(['http://www.w3.org/2000/svg'])
    expect((await fetch(`${mounted.url}/ops/limits/nope`)).status).toBe(404)
    expect((await fetch(`${mounted.url}/ops/limits`, { method: 'POST' })).status).toBe(405)
  })

  it('mounts in Express 5 with app.get and app.use', async () => {
    const { default: express } = await import('express')
    const limiter = createLimiter({ policies })
    const obs = createObservability({ limiter })
    const app = express()
    app.get('/metrics', obs.metricsHandler)
    app.use('/dashboard', obs.dashboardHandler)
    const server = app.listen(0, '127.0.0.1')
    await new Promise<void>((resolve) => server.once('listening', () => resolve()))
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`
    try {
      await limiter.consume('api', 'a')
      expect(await (await fetch(`${url}/metrics`)).text()).toContain(
        'sluice_decisions_total{policy="api",outcome="allowed"} 1',
      )
      const page = await fetch(`${url}/dashboard`)
      expect(page.status).toBe(200)
      expect(await page.text()).toContain('<title>Sluice dashboard</title>')
      const snap = (await (await fetch(`${url}/dashboard/snapshot.json`)).json()) as DashboardSnapshot
      expect(snap.policies[0]!.totals.allowed).toBe(1)
    } finally {
      obs.close()
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  })

  it('streams snapshots over SSE that move with traffic', async () => {
    const limiter = createLimiter({ policies })
    const obs = createObservability({ limiter, pushIntervalMs: 100 })
    mounted = await mount(obs)
    const url = `${mounted.url}/dashboard/events`
    const first = await readEvents(url, () => true)
    expect(first[0]!.policies).toEqual([])
    const reading = readEvents(url, (s) => (s.policies[0]?.totals.denied ?? 0) >= 3)
    for (let i = 0; i < 10; i++) await limiter.consume('login', 'mallory')
    const seen = await reading
    const last = seen.at(-1)!
    expect(last.policies[0]).toMatchObject({
      policy: 'login',
      totals: { allowed: 2, denied: 8, degraded: 0 },
    })
    const limited = last.topDenied.find((t) => t.policy === 'login')!
    expect(limited.keys[0]).toEqual({ key: 'mallory', count: 8, maxError: 0 })
    expect(last.stores[0]).toMatchObject({ store: 'memory', up: null, circuit: null, samples: 10 })
    expect(last.stores[0]!.p50Ms).toBeGreaterThan(0)
    expect(last.stores[0]!.p99Ms).toBeGreaterThanOrEqual(last.stores[0]!.p50Ms!)
    // snapshot.json is the same data, for scripts.
    const json = (await (await fetch(`${mounted.url}/dashboard/snapshot.json`)).json()) as DashboardSnapshot
    expect(json.policies[0]!.totals).toEqual({ allowed: 2, denied: 8, degraded: 0 })
  })

  it('reports top denied and admitted keys per policy and the top 1% share', async () => {
    const limiter = createLimiter({ policies })
    const obs: Observability = createObservability({ limiter })
    for (let i = 0; i < 20; i++) await limiter.consume('api', 'heavy')
    for (let i = 0; i < 50; i++) await limiter.consume('api', `light-${i}`)
    const [denied] = obs.topKeys({ policy: 'api', side: 'denied' })
    expect(denied).toMatchObject({ policy: 'api', side: 'denied', total: 15 })
    expect(denied!.keys).toEqual([{ key: 'heavy', count: 15, maxError: 0 }])
    const [admitted] = obs.topKeys({ policy: 'api', side: 'admitted', k: 3 })
    expect(admitted!.total).toBe(55)
    expect(admitted!.keys[0]).toEqual({ key: 'heavy', count: 5, maxError: 0 })
    expect(admitted!.keys).toHaveLength(3)
    // 51 distinct keys: the top 1% is one key, 5 of 55 requests.
    expect(admitted!.topOnePercentShare).toBeCloseTo(5 / 55, 5)
    obs.close()
  })

  it('bounds a batch: 4096 distinct keys are applied at once, stamped with the time they came in', async () => {
    let now = 0
    const limiter = createLimiter({
      policies: { api: { algorithm: 'fixed-window', limit: 10, window: '1m' } },
    })
    const obs = createObservability({ limiter, now: () => now, topKeys: { horizonMs: 60_000 } })
    for (let i = 0; i < 4096; i++) limiter.consumeSync('api', `ip-${i}`) // the batch fills and is applied at t=0
    for (let i = 0; i < 10; i++) limiter.consumeSync('api', 'late')
    now = 90_000 // the t=0 bucket has left the horizon; the 10 late decisions are applied now
    const [admitted] = obs.topKeys({ policy: 'api', side: 'admitted' })
    expect(admitted!.total).toBe(10)
    expect(admitted!.keys).toEqual([{ key: 'late', count: 10, maxError: 0 }])
    expect(obs.snapshot().policies[0]!.totals.allowed).toBe(4106)
    obs.close()
  })

  it('emits a spike when one key jumps far above its baseline, and stops listening on close', async () => {
    let now = 0
    const limiter = createLimiter({
      policies: { api: { algorithm: 'fixed-window', limit: 10_000, window: '1h' } },
    })
    const obs = createObservability({ limiter, now: () => now, spikes: { factor: 10, minRate: 5 } })
    const spikes: Spike[] = []
    obs.onSpike((s) => spikes.push(s))
    for (let second = 0; second < 10; second++) {
      now = second * 1000
      for (let i = 0; i < 4; i++) await limiter.consume('api', `user-${i}`)
      obs.flush() // what the flush timer does every 100 ms on a real clock
    }
    now = 10_000
    for (let i = 0; i < 200; i++) await limiter.consume('api', 'scraper')
    obs.flush()
    expect(spikes).toEqual([]) // the interval is still open
    now = 11_000
    await limiter.consume('api', 'user-0')
    obs.flush() // closes the interval
    expect(spikes.map((s) => [s.scope, s.key, s.rate])).toEqual([
      ['policy', undefined, 200],
      ['key', 'scraper', 200],
    ])
    expect(obs.spikes()).toHaveLength(2)
    obs.close()
    now = 12_000
    for (let i = 0; i < 500; i++) await limiter.consume('api', 'after-close')
    now = 13_000
    await limiter.consume('api', 'user-0')
    obs.flush()
    expect(spikes).toHaveLength(2)
    expect(obs.topKeys({ side: 'admitted' })[0]!.keys.some((k) => k.key === 'after-close')).toBe(false)
  })
})
