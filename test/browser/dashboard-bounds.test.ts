// The dashboard page in headless Chromium when there are more policies than a snapshot lists: the
// listed ones get their rows, the rest one summary row ("N more, M dropped"), and the totals at the
// top count every decision of the policies kept, listed or not.
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Browser } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { createObservability } from '../../packages/sluice/src/metrics/observability.js'
import type { Policy } from '../../packages/sluice/src/policy.js'
import { launchChromium } from '../helpers/chromium.js'

const policies: Record<string, Policy> = {}
for (let i = 0; i < 6; i++)
  policies[`p${i}`] = { algorithm: 'fixed-window', limit: 100, window: 60_000 } as Policy
const limiter = createLimiter({ policies })
// A clock that stands still: every decision is in the current second, which the ranking must count.
const obs = createObservability({
  limiter,
  pushIntervalMs: 200,
  maxPolicies: 4,
  dashboardPolicies: 2,
  now: () => 1_700_000_000_500,
})
const server = createServer((req, res) => obs.dashboardHandler(req, res))
let browser: Browser
let base = ''

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  browser = await launchChromium()
})

afterAll(async () => {
  await browser?.close()
  obs.close()
  server.closeAllConnections()
  await new Promise<void>((resolve) => server.close(() => resolve()))
})

describe('dashboard with more policies than it lists', () => {
  it('shows the listed policies, one row for the rest, and totals over all kept', async () => {
    // p0 and p1 decide first and are dropped (maxPolicies 4); p2..p5 are kept, p5 and p4 busiest.
    for (let i = 0; i < 6; i++) {
      for (let n = 0; n <= i; n++) limiter.consumeSync(`p${i}`, 'k')
      obs.flush()
    }
    const page = await browser.newPage()
    const errors: string[] = []
    page.on('pageerror', (e) => errors.push(String(e)))
    await page.goto(`${base}/dashboard`)
    // biome-ignore lint/performance/useDomNodeTextContent: the rendered text is what a person reads
    const text = (selector: string) => page.locator(selector).first().innerText()
    await expect.poll(() => text('#status'), { timeout: 5000 }).toBe('live')
    await expect.poll(() => page.locator('#policies tr[data-policy]').count(), { timeout: 5000 }).toBe(2)
    expect(await page.locator('#policies tr[data-policy="p5"]').count()).toBe(1)
    expect(await page.locator('#policies tr[data-policy="p4"]').count()).toBe(1)
    expect(await text('#policies tr.others')).toMatch(/^2 more, 2 dropped/)
    // p2..p5 decided 3 + 4 + 5 + 6 times.
    expect(Number(await text('#total-allowed'))).toBe(18)
    expect(errors).toEqual([])
    await page.close()
  })
})
