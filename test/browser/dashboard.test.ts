// End to end: a real HTTP API limited by Sluice, the dashboard in headless Chromium, traffic over
// real sockets. The page's numbers must move while traffic flows and settle on what /metrics says.
import { copyFileSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { hashedApiKey } from '../../packages/sluice/src/http/keys.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { createObservability } from '../../packages/sluice/src/metrics/observability.js'
import { launchChromium } from '../helpers/chromium.js'
import { sample } from '../helpers/exposition.js'

const limiter = createLimiter({
  policies: {
    api: { algorithm: 'sliding-window-counter', limit: 40, window: '1m' },
    login: { algorithm: 'token-bucket', limit: 5, window: '1m', deny: { ips: ['198.51.100.0/24'] } },
    perIp: { algorithm: 'fixed-window', limit: 100_000, window: '1h' },
    perUser: { algorithm: 'fixed-window', limit: 10, window: '1h' },
  },
})
const obs = createObservability({
  limiter,
  pushIntervalMs: 200,
  // A low floor (2 req/s) so the burst is flagged even when a loaded machine spreads it over intervals.
  spikes: { intervalMs: 250, warmupIntervals: 3, factor: 10, minRate: 2 },
  abuse: { identitiesPerAddress: 20, addressesPerIdentity: 30 },
})
// A small API: /api/<policy>?key=... answers 200 or 429, like an app behind the middleware would.
const server = createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://localhost')
  if (url.pathname === '/metrics') return obs.metricsHandler(req, res)
  // /signin?ip=&user= or &apiKey=: a layered check on the client address and who it says it is.
  if (url.pathname === '/signin') {
    const apiKey = url.searchParams.get('apiKey')
    const identity = apiKey === null ? `user:${url.searchParams.get('user')}` : hashedApiKey(apiKey)
    limiter
      .consume([
        { policy: 'perIp', key: `ip:${url.searchParams.get('ip')}` },
        { policy: 'perUser', key: identity },
      ])
      .then((d) => {
        res.writeHead(d.allowed ? 200 : 429)
        res.end()
      })
    return
  }
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
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  browser = await launchChromium()
  page = await browser.newPage({ viewport: { width: 1400, height: 980 } })
})

afterAll(async () => {
  await browser?.close()
  obs.close()
  server.closeAllConnections()
  await new Promise<void>((resolve) => server.close(() => resolve()))
})

describe('dashboard in headless Chromium', () => {
  it('shows the allow and deny lists in force', async () => {
    await page.goto(`${base}/dashboard`)
    await page.waitForSelector('#lists tr[data-policy="login"]')
    expect(await page.locator('#lists-section').isVisible()).toBe(true)
    expect(await text('#lists tr[data-policy="login"] .deny')).toBe('0 keys, 1 ranges: 198.51.100.0/24')
    expect(await text('#lists tr[data-policy="login"] .allow')).toBe('–')
  })

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

  it('shows both abuse panels and their alerts: many accounts behind one address, one API key over many addresses', async () => {
    const secret = 'sk_live_shared_across_a_botnet'
    const signin = async (query: string) => (await fetch(`${base}/signin?${query}`)).arrayBuffer()
    await page.goto(`${base}/dashboard`)
    await expect.poll(() => text('#status'), { timeout: 5000 }).toBe('live')
    // Benign: a few users, each on its own address.
    for (let i = 0; i < 8; i++) await signin(`ip=192.0.2.${i}&user=b${i}`)
    expect(await text('#abuse-alerts')).toContain('no abuse alerts')
    // 25 accounts behind one address; one API key over 40 addresses in 40 networks.
    for (let i = 0; i < 25; i++) await signin(`ip=198.51.100.7&user=acct-${i}`)
    for (let i = 0; i < 40; i++) await signin(`ip=100.${64 + i}.7.${i}&apiKey=${secret}`)

    const fingerprint = `apikey:${hashedApiKey(secret).slice(7, 15)}…`
    const address = '#abuse-addresses tr:first-child'
    await expect.poll(() => text(`${address} td.key`), { timeout: 5000 }).toBe('ip:198.51.100.7')
    // Snapshots are pushed every 200 ms: wait for the one that holds every request.
    await expect.poll(() => num(`${address} td.decisions`), { timeout: 5000 }).toBe(25)
    expect(await num(`${address} td.distinct`)).toBe(25)
    expect(await page.locator(address).getAttribute('class')).toBe('flagged')
    expect(await text('#abuse-addresses-note')).toBe('alert at ≥ 20 in 5 min')

    const identity = '#abuse-identities tr:first-child'
    await expect.poll(() => text(`${identity} td.key`), { timeout: 5000 }).toBe(fingerprint)
    await expect.poll(() => num(`${identity} td.decisions`), { timeout: 5000 }).toBe(40)
    // 40 is past the exact range: a HyperLogLog estimate within 3 standard errors (4.6% each).
    expect(Math.abs((await num(`${identity} td.distinct`)) - 40)).toBeLessThanOrEqual(6)
    expect(Math.abs((await num(`${identity} td.networks`)) - 40)).toBeLessThanOrEqual(6)
    expect(await num(`${identity} td.denied-count`)).toBe(30) // the per-user limit of 10
    expect(await page.locator(identity).getAttribute('class')).toBe('flagged')

    await expect.poll(() => page.locator('#abuse-alerts tr').count(), { timeout: 5000 }).toBe(2)
    const alerts = await text('#abuse-alerts')
    expect(alerts).toContain('ip:198.51.100.7')
    expect(alerts).toContain(fingerprint)
    // The page (text and attributes) never holds the API key; the abuse panels show only its fingerprint.
    expect(await page.content()).not.toContain(secret)
    for (const id of ['abuse-addresses', 'abuse-identities', 'abuse-alerts'])
      expect(await page.locator(`#${id}`).innerHTML()).not.toContain(hashedApiKey(secret))
    const dir = mkdtempSync(join(tmpdir(), 'sluice-dashboard-'))
    const shot = join(dir, 'dashboard.png')
    await page.screenshot({ path: shot, fullPage: true })
    if (process.env.SLUICE_UPDATE_SCREENSHOT === '1') copyFileSync(shot, 'docs/dashboard.png')
    if (process.env.SLUICE_SCREENSHOT_TO !== undefined) copyFileSync(shot, process.env.SLUICE_SCREENSHOT_TO)
    rmSync(dir, { recursive: true, force: true })
  }, 30_000)
})
