// End to end: a real HTTP API limited by Sluice, the dashboard in headless Chromium, traffic over
// real sockets. The page's numbers must move while traffic flows and settle on what /metrics says.
import { copyFileSync, existsSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Browser, Page } from 'playwright-core'
import { chromium } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createLimiter } from '../../src/limiter.js'
import { createObservability } from '../../src/metrics/observability.js'
import { sample } from '../metrics/exposition.js'

const CHROMIUM = '/usr/bin/chromium'
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]

const limiter = createLimiter({
  policies: {
    api: { algorithm: 'sliding-window-counter', limit: 40, window: '1m' },
    login: { algorithm: 'token-bucket', limit: 5, window: '1m' },
  },
})
const obs = createObservability({
  limiter,
  pushIntervalMs: 200,
  // A low floor (2 req/s) so the burst is flagged even when a loaded machine spreads it over intervals.
  spikes: { intervalMs: 250, warmupIntervals: 3, factor: 10, minRate: 2 },
})
// A small API: /api/<policy>?key=... answers 200 or 429, like an app behind the middleware would.
const server = createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://localhost')
  if (url.pathname === '/metrics') return obs.metricsHandler(req, res)
  const policy = /^\/api\/(api|login)$/.exec(url.pathname)?.[1] as 'api' | 'login' | undefined
  if (policy === undefined) return obs.dashboardHandler(req, res)
  limiter.consume(policy, url.searchParams.get('key') ?? 'anonymous').then((d) => {
    res.writeHead(d.allowed ? 200 : 429, { 'content-type': 'application/json' })
    res.end(JSON.stringify({ allowed: d.allowed }))
  })
})

let base = ''
let browser: Browser
let page: Page
const statuses = { 200: 0, 429: 0 }

async function hit(policy: 'api' | 'login', key: string): Promise<void> {
  const res = await fetch(`${base}/api/${policy}?key=${encodeURIComponent(key)}`)
  await res.arrayBuffer()
  statuses[res.status as 200 | 429]++
}

// biome-ignore lint/performance/useDomNodeTextContent: the rendered text is what a person reads
const text = (selector: string) => page.locator(selector).first().innerText()
const num = async (selector: string) => Number(await text(selector))

beforeAll(async () => {
  if (!existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (.ci/run does this on CI)`)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS })
  page = await browser.newPage({ viewport: { width: 1400, height: 980 } })
})

afterAll(async () => {
  await browser?.close()
  obs.close()
  server.closeAllConnections()
  await new Promise<void>((resolve) => server.close(() => resolve()))
})

describe('dashboard in headless Chromium', () => {
  it('goes live, moves with traffic and settles on the /metrics numbers', async () => {
    const errors: string[] = []
    page.on('pageerror', (e) => errors.push(String(e)))
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text())
    })
    await page.goto(`${base}/dashboard`)
    await expect.poll(() => text('#status'), { timeout: 5000 }).toBe('live')
    expect(await text('#policies')).toContain('no decisions yet')

    // Steady, light traffic from a few users: a baseline for the spike detector.
    const started = Date.now()
    let round = 0
    let seenMoving: number[] = []
    while (Date.now() - started < 2000) {
      await Promise.all([hit('api', `user-${round % 4}`), hit('login', `user-${round % 4}`)])
      round++
      await new Promise((r) => setTimeout(r, 60))
      if (round % 4 === 0) seenMoving.push(Number(await text('#total-allowed')))
    }
    // The page followed along while traffic flowed, not only at the end.
    seenMoving = seenMoving.filter((n) => Number.isFinite(n))
    expect(seenMoving.length).toBeGreaterThan(2)
    expect(seenMoving.at(-1)!).toBeGreaterThan(seenMoving[0]!)

    // Then a scraper hammers both policies at once: it gets limited and it is a spike.
    await Promise.all(Array.from({ length: 60 }, () => hit('api', 'scraper-203.0.113.9')))
    await Promise.all(Array.from({ length: 20 }, () => hit('login', 'scraper-203.0.113.9')))

    // Settled: every number on the page equals the scrape of /metrics.
    const metricsText = await (await fetch(`${base}/metrics`)).text()
    const want = (policy: string, outcome: string) =>
      sample(metricsText, 'sluice_decisions_total', { policy, outcome }) ?? 0
    expect(want('api', 'denied') + want('login', 'denied')).toBe(statuses[429])
    expect(want('api', 'allowed') + want('login', 'allowed')).toBe(statuses[200])
    expect(statuses[429]).toBeGreaterThan(0)
    for (const policy of ['api', 'login']) {
      const row = `#policies tr[data-policy="${policy}"]`
      await expect.poll(() => num(`${row} .allowed-total`), { timeout: 5000 }).toBe(want(policy, 'allowed'))
      await expect.poll(() => num(`${row} .denied-total`), { timeout: 5000 }).toBe(want(policy, 'denied'))
    }
    expect(await num('#total-denied')).toBe(statuses[429])
    expect(await num('#total-allowed')).toBe(statuses[200])
    // The 429 share is denied / all over the last 10 whole seconds (all traffic so far, once the
    // current second has closed).
    const expectedShare = (100 * statuses[429]) / (statuses[200] + statuses[429])
    await expect
      .poll(async () => Number((await text('#share')).replace('%', '')), { timeout: 3000 })
      .toBeCloseTo(expectedShare, 0)

    // Who is limited, store latency, spikes.
    await expect.poll(() => text('#top tr:first-child td.key')).toBe('scraper-203.0.113.9')
    expect(await text('#stores tr[data-store="memory"] .p50')).toMatch(/^\d+\.\d+ ms$/)
    expect(await text('#stores tr[data-store="memory"] .p99')).toMatch(/^\d+\.\d+ ms$/)
    await expect.poll(() => text('#spikes'), { timeout: 5000 }).toContain('scraper-203.0.113.9')
    expect(await page.locator('#charts .chart svg polyline').count()).toBe(4)

    obs.metrics.setStoreUp('memory', true) // true for the in-process store
    await expect.poll(() => text('#stores tr[data-store="memory"]')).toContain('up')
    // The screenshot is always taken; it replaces docs/dashboard.png only when asked to
    // (SLUICE_UPDATE_SCREENSHOT=1), so a test run does not dirty the tree.
    const dir = mkdtempSync(join(tmpdir(), 'sluice-dashboard-'))
    const shot = join(dir, 'dashboard.png')
    await page.screenshot({ path: shot, fullPage: true })
    expect(statSync(shot).size).toBeGreaterThan(10_000)
    if (process.env.SLUICE_UPDATE_SCREENSHOT === '1') copyFileSync(shot, 'docs/dashboard.png')
    rmSync(dir, { recursive: true, force: true })

    // Health inputs from the failure-handling work reach the page as well.
    obs.metrics.setStoreUp('memory', false)
    obs.metrics.setCircuitState('memory', 'open')
    obs.metrics.recordStoreError('memory')
    await expect.poll(() => text('#stores tr[data-store="memory"]')).toMatch(/down\s+open/)
    expect(await num('#stores tr[data-store="memory"] .errors')).toBe(1)
    expect(errors).toEqual([])
  }, 60_000)
})
