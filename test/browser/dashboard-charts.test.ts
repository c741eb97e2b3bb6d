// The dashboard's charts and key-share line in headless Chromium, on an observability clock the test
// moves: an idle chart is neutral (nothing red on screen), the charts carry a time axis, and the
// share of the busiest keys is worded for the number of keys there are.
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { createObservability } from '../../packages/sluice/src/metrics/observability.js'
import { launchChromium } from '../helpers/chromium.js'

const limiter = createLimiter({
  policies: {
    api: { algorithm: 'fixed-window', limit: 3, window: '1m' },
    few: { algorithm: 'fixed-window', limit: 100_000, window: '1h' },
    many: { algorithm: 'fixed-window', limit: 100_000, window: '1h' },
  },
})
let clock = 1_700_000_000_500
const obs = createObservability({ limiter, pushIntervalMs: 100, now: () => clock })
const server = createServer((req, res) => obs.dashboardHandler(req, res))
let base = ''
let browser: Browser
let page: Page

// biome-ignore lint/performance/useDomNodeTextContent: the rendered text is what a person reads
const text = (selector: string) => page.locator(selector).first().innerText()

// Runs in the page (the tests are type-checked without the DOM library, hence a string): the number
// of plainly red pixels (the page's "denied" colour is #cf222e) in a PNG given as base64.
const COUNT_RED = `async (base64) => {
  const image = new Image()
  image.src = 'data:image/png;base64,' + base64
  await image.decode()
  const canvas = document.createElement('canvas')
  canvas.width = image.width
  canvas.height = image.height
  const context = canvas.getContext('2d')
  context.drawImage(image, 0, 0)
  const data = context.getImageData(0, 0, canvas.width, canvas.height).data
  let red = 0
  for (let i = 0; i < data.length; i += 4) if (data[i] > 150 && data[i + 1] < 100 && data[i + 2] < 100) red++
  return red
}`

/** Plainly red pixels in a screenshot of the element: what a person sees, not what the DOM says. */
async function redPixels(selector: string): Promise<number> {
  const png = await page.locator(selector).screenshot()
  return (await page.evaluate(`(${COUNT_RED})(${JSON.stringify(png.toString('base64'))})`)) as number
}

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  browser = await launchChromium()
  page = await browser.newPage({ viewport: { width: 1400, height: 900 } })
})

afterAll(async () => {
  await browser?.close()
  obs.close()
  server.closeAllConnections()
  await new Promise<void>((resolve) => server.close(() => resolve()))
})

describe('dashboard charts in headless Chromium', () => {
  it('draws traffic in its colours; idle, nothing red in the charts or the rates, and a "no traffic" legend', async () => {
    await page.goto(`${base}/dashboard`)
    await expect.poll(() => text('#status'), { timeout: 5000 }).toBe('live')
    for (let i = 0; i < 5; i++) limiter.consumeSync('api', 'client-1') // 3 allowed, 2 denied
    obs.flush()
    clock += 1000 // that second is complete: the charts show it
    const chart = '#charts .chart[data-policy="api"]'
    await expect.poll(() => text('#rate'), { timeout: 5000 }).toBe('3 / 2')
    expect(await page.locator(`${chart} polyline`).count()).toBe(2)
    expect(await text(`${chart} .title`)).toContain('denied')
    // The measure sees red where there is some.
    expect(await redPixels('#charts')).toBeGreaterThan(0)
    expect(await redPixels('#policies')).toBeGreaterThan(0) // 2 denied/s

    clock += 120_000 // two minutes without a decision: every point of the chart is zero
    await expect.poll(() => text('#rate'), { timeout: 5000 }).toBe('0 / 0')
    expect(await page.locator(chart).count()).toBe(1)
    expect(await redPixels('#charts')).toBe(0)
    expect(await redPixels('#policies')).toBe(0) // 0 denied/s is not red
    expect(await text(`${chart} .title`)).toContain('no traffic')
  })

  it('labels each chart with a time axis, from the oldest second on the left to now on the right', async () => {
    // One read in the page: it redraws every push, so boxes read one call apart may belong to
    // different, detached charts.
    const axis = (await page.evaluate(`(() => {
      const svg = document.querySelector('#charts .chart[data-policy="api"] svg')
      const box = svg.getBoundingClientRect()
      return {
        left: box.left, right: box.right, top: box.top, height: box.height,
        labels: [...svg.querySelectorAll('text.axis')].map((t) => {
          const b = t.getBoundingClientRect()
          return { text: t.textContent, left: b.left, right: b.right, top: b.top }
        }),
      }
    })()`)) as {
      left: number
      right: number
      top: number
      height: number
      labels: { text: string; left: number; right: number; top: number }[]
    }
    expect(axis.labels.map((l) => l.text)).toEqual(['-60 s', '-45 s', '-30 s', '-15 s', 'now'])
    const width = axis.right - axis.left
    const oldest = axis.labels[0]!
    const now = axis.labels.at(-1)!
    expect(oldest.left).toBeLessThan(axis.left + width / 4)
    expect(now.right).toBeGreaterThan(axis.left + (width * 3) / 4)
    expect(oldest.top).toBeGreaterThan(axis.top + axis.height / 2) // under the lines
    for (let i = 1; i < axis.labels.length; i++)
      expect(axis.labels[i]!.left).toBeGreaterThan(axis.labels[i - 1]!.left)
  })

  it('gives the top 1% share for many keys, and the busiest key’s share for a handful', async () => {
    // few: 9 keys, one of them sends 10 of the 18 requests. many: 300 keys.
    for (let i = 0; i < 10; i++) limiter.consumeSync('few', 'f0')
    for (let i = 1; i < 9; i++) limiter.consumeSync('few', `f${i}`)
    for (let i = 0; i < 300; i++) limiter.consumeSync('many', `m${i}`)
    obs.flush()
    await expect.poll(() => text('#top1'), { timeout: 5000 }).toContain('many:')
    const line = await text('#top1')
    expect(line).toContain('few: the busiest of ~9 keys sends 55.6%')
    expect(line).not.toMatch(/few: top 1%/)
    expect(line).toMatch(/many: top 1% of ~\d{3} keys send \d+\.\d%/)
  })
})
