// The dashboard's "Penalised keys" section in headless Chromium: a key that earns an escalating
// penalty shows up with its policy, level and block, and a hashed key only by its fingerprint.
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Browser } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { hashedApiKey } from '../../packages/sluice/src/http/keys.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { createObservability } from '../../packages/sluice/src/metrics/observability.js'
import { launchChromium } from '../helpers/chromium.js'

const limiter = createLimiter({
  policies: {
    login: {
      algorithm: 'fixed-window',
      limit: 1,
      window: '1h',
      penalty: { after: 2, within: '1h', block: '10m' },
    },
  },
})
const obs = createObservability({ limiter, pushIntervalMs: 100 })
const server = createServer((req, res) => obs.dashboardHandler(req, res))
let base = ''
let browser: Browser

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

describe('penalised keys on the dashboard page', () => {
  it('shows each penalised key with its policy, level and block', async () => {
    const page = await browser.newPage()
    const errors: string[] = []
    page.on('pageerror', (e) => errors.push(String(e)))
    await page.goto(`${base}/dashboard`)
    // biome-ignore lint/performance/useDomNodeTextContent: the rendered text is what a person reads
    const section = () => page.locator('#penalised').innerText()
    await expect.poll(section, { timeout: 5000 }).toContain('no key under a penalty')
    const apiKey = hashedApiKey('sk_live_secret_value_42')
    for (const key of ['mallory', apiKey]) for (let i = 0; i < 3; i++) await limiter.consume('login', key)
    await expect.poll(section, { timeout: 5000 }).toContain('mallory')
    // Read in one step in the page: the dashboard redraws the table at each push, and a row read
    // after its redraw has no layout, so its innerText would lose the cells' separators.
    const rows = (await page.evaluate(
      "[...document.querySelectorAll('#penalised tr')].map((tr) => [...tr.cells].map((c) => c.textContent).join('\\t'))",
    )) as string[]
    expect(rows).toHaveLength(2)
    expect(rows[0]).toMatch(/^login\s+apikey:\S{8}…\s+0\s+10 min\s+\S/)
    expect(rows[1]).toMatch(/^login\s+mallory\s+0\s+10 min\s+\S/)
    expect(rows.join('\n')).not.toContain(apiKey)
    expect(errors).toEqual([])
    await page.close()
  })
})
