// No web page may spend anyone's budget. A page a user visits can POST
// text/plain, form and multipart bodies to the service without a CORS preflight; the service must
// refuse every body that is not application/json (415) and every request with a browser Origin it
// was not told to allow (403), and store nothing. The dashboard gets an optional token and a bind of
// its own. Attacked through real sockets and, once, from a real page in headless Chromium.
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Browser } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parseConfig } from '../../packages/sluice-server/src/server/config.js'
import { launchChromium } from '../helpers/chromium.js'
import { get, post, servicesClosedAfterEach } from '../helpers/service.js'

const startService = servicesClosedAfterEach()

const YAML = `
policies:
  api: { algorithm: fixed-window, limit: 10, window: 1m }
admin:
  token: admin-token-1234
`

async function remaining(url: string, key = 'alice'): Promise<number> {
  const res = await post(`${url}/v1/peek`, { policy: 'api', key })
  expect(res.status).toBe(200)
  return res.body.remaining as number
}

async function send(
  url: string,
  init: RequestInit,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(url, { method: 'POST', ...init })
  const text = await res.text()
  return { status: res.status, body: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) }
}

const ALICE = JSON.stringify({ policy: 'api', key: 'alice', cost: 10 })

describe('JSON endpoints take only application/json (415 otherwise)', () => {
  it('refuses text/plain, form, multipart and untyped bodies on /v1/check and /v1/peek; alice keeps her budget', async () => {
    const { url } = await startService(YAML)
    const form = new FormData()
    form.set(ALICE, '')
    const bodies: [string, RequestInit][] = [
      // What fetch(..., { mode: 'no-cors', body: string }) sends: no preflight in any browser.
      ['text/plain', { body: ALICE, headers: { 'content-type': 'text/plain;charset=UTF-8' } }],
      ['form', { body: new URLSearchParams({ [ALICE]: '' }) }],
      ['multipart', { body: form }],
      ['no content type', { body: new Blob([ALICE]) }],
      ['json lookalike', { body: ALICE, headers: { 'content-type': 'application/jsonp' } }],
    ]
    for (const path of ['/v1/check', '/v1/peek']) {
      for (const [label, init] of bodies) {
        const res = await send(`${url}${path}`, init)
        expect(res.status, `${path} ${label}`).toBe(415)
        expect(res.body.error).toBe('unsupported_media_type')
      }
    }
    expect(await remaining(url)).toBe(10)
    // application/json with parameters, in any case, is JSON.
    for (const type of ['application/json; charset=utf-8', 'Application/JSON']) {
      const res = await send(`${url}/v1/check`, {
        body: JSON.stringify({ policy: 'api', key: 'alice' }),
        headers: { 'content-type': type },
      })
      expect(res.status, type).toBe(200)
    }
    expect(await remaining(url)).toBe(8)
  })

  it('refuses a text/plain admin reset even with the right token', async () => {
    const { url } = await startService(YAML)
    await post(`${url}/v1/check`, { policy: 'api', key: 'alice', cost: 4 })
    const res = await send(`${url}/v1/reset`, {
      body: JSON.stringify({ policy: 'api', key: 'alice' }),
      headers: { 'content-type': 'text/plain', authorization: 'Bearer admin-token-1234' },
    })
    expect(res.status).toBe(415)
    expect(await remaining(url)).toBe(6)
  })
})

describe('a browser Origin is refused unless configured (403)', () => {
  it('refuses a JSON check carrying an Origin the config does not list, and stores nothing', async () => {
    const { url } = await startService(YAML)
    for (const origin of ['https://evil.example', 'null', 'http://127.0.0.1:1']) {
      const res = await post(`${url}/v1/check`, ALICE, { origin })
      expect(res.status, origin).toBe(403)
      expect(res.body.error).toBe('origin_not_allowed')
    }
    const snapshot = await get(`${url}/dashboard/snapshot.json`, { origin: 'https://evil.example' })
    expect(snapshot.status).toBe(403)
    expect(await remaining(url)).toBe(10)
  })

  it('admits a listed origin, with CORS headers and an answered preflight', async () => {
    const { url } = await startService(`${YAML}http:\n  allowedOrigins: [https://app.example]\n`)
    const preflight = await fetch(`${url}/v1/check`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://app.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type',
      },
    })
    expect(preflight.status).toBe(204)
    expect(preflight.headers.get('access-control-allow-origin')).toBe('https://app.example')
    expect(preflight.headers.get('access-control-allow-methods')).toContain('POST')
    expect(preflight.headers.get('access-control-allow-headers')).toContain('content-type')
    const res = await post(
      `${url}/v1/check`,
      { policy: 'api', key: 'alice' },
      { origin: 'https://app.example' },
    )
    expect(res.status).toBe(200)
    expect(res.headers.get('access-control-allow-origin')).toBe('https://app.example')
    expect(res.headers.get('vary')).toContain('origin')
    expect((await post(`${url}/v1/check`, ALICE, { origin: 'https://other.example' })).status).toBe(403)
    expect(await remaining(url)).toBe(9)
  })

  it('still answers /v1/authz with an Origin: nginx forwards the browser headers to auth_request', async () => {
    const { url } = await startService(YAML)
    const res = await get(`${url}/v1/authz?policy=api`, { origin: 'https://site.example' })
    expect(res.status).toBe(200)
  })

  it('follows a reload: an origin added to http.allowedOrigins is admitted at once', async () => {
    const { service, url } = await startService(YAML)
    expect(
      (await post(`${url}/v1/check`, { policy: 'api', key: 'alice' }, { origin: 'https://app.example' }))
        .status,
    ).toBe(403)
    service.reload(parseConfig(`${YAML}http:\n  allowedOrigins: [HTTPS://App.Example]\n`, 'test.yaml'))
    expect(
      (await post(`${url}/v1/check`, { policy: 'api', key: 'alice' }, { origin: 'https://app.example' }))
        .status,
    ).toBe(200)
  })

  it('refuses an allowedOrigins entry that is not an origin, naming file and line', async () => {
    await expect(
      startService(`${YAML}http:\n  allowedOrigins: [https://app.example/path]\n`),
    ).rejects.toThrow(/test\.yaml:7: http\.allowedOrigins\.0: /)
  })
})

describe('the dashboard: optional token, and a bind of its own', () => {
  it('with dashboard.token, the page, events and snapshot need the token (401 otherwise)', async () => {
    const { url } = await startService(`${YAML}dashboard:\n  token: dash-token-5678\n`)
    for (const path of ['/dashboard', '/dashboard/snapshot.json', '/dashboard/events']) {
      const res = await get(`${url}${path}`)
      expect(res.status, path).toBe(401)
      expect(res.body.error).toBe('unauthorized')
      expect((await get(`${url}${path}?token=wrong-token-0000`)).status).toBe(401)
      expect((await get(`${url}${path}`, { authorization: 'Bearer dash-token-567' })).status).toBe(401)
    }
    const byHeader = await get(`${url}/dashboard/snapshot.json`, { authorization: 'Bearer dash-token-5678' })
    expect(byHeader.status).toBe(200)
    expect(byHeader.body.policies).toBeDefined()
    const byQuery = await fetch(`${url}/dashboard?token=dash-token-5678`)
    expect(byQuery.status).toBe(200)
    // The page passes its own query (the token) on to the event stream.
    expect(await byQuery.text()).toContain('/events')
    // /metrics and decisions do not need the dashboard token.
    expect((await post(`${url}/v1/check`, { policy: 'api', key: 'bob' })).status).toBe(200)
  })

  it('follows a reload: a token set later is required at once', async () => {
    const { service, url } = await startService(YAML)
    expect((await get(`${url}/dashboard/snapshot.json`)).status).toBe(200)
    service.reload(parseConfig(`${YAML}dashboard:\n  token: dash-token-5678\n`, 'test.yaml'))
    expect((await get(`${url}/dashboard/snapshot.json`)).status).toBe(401)
    expect((await get(`${url}/dashboard/snapshot.json?token=dash-token-5678`)).status).toBe(200)
  })

  it('with dashboard.port, the dashboard answers only on its own listener', async () => {
    const { service, url } = await startService(`${YAML}dashboard:\n  host: 127.0.0.1\n  port: 0\n`)
    const dashboard = service.dashboardAddress
    expect(dashboard).toBeDefined()
    expect(dashboard!.url).not.toBe(url)
    expect((await get(`${url}/dashboard/snapshot.json`)).status).toBe(404)
    const snapshot = await get(`${dashboard!.url}/dashboard/snapshot.json`)
    expect(snapshot.status).toBe(200)
    expect(snapshot.body.policies).toBeDefined()
    expect((await fetch(`${dashboard!.url}/dashboard`)).status).toBe(200)
    // The dashboard listener serves nothing else.
    expect((await post(`${dashboard!.url}/v1/check`, { policy: 'api', key: 'alice' })).status).toBe(404)
    expect(await remaining(url)).toBe(10)
    await service.close(500)
    await expect(fetch(`${dashboard!.url}/dashboard/snapshot.json`)).rejects.toThrow()
  })
})

describe('from a real page in Chromium', () => {
  let browser: Browser
  beforeAll(async () => {
    browser = await launchChromium()
  })
  afterAll(async () => {
    await browser?.close()
  })

  it('the dashboard page opened with ?token= goes live (its stream carries the token)', async () => {
    const { url } = await startService(`${YAML}dashboard:\n  token: dash-token-5678\n`, {
      observability: { pushIntervalMs: 100 },
    })
    const tab = await browser.newPage()
    try {
      await tab.goto(`${url}/dashboard?token=dash-token-5678`)
      await tab.waitForFunction("document.getElementById('status')?.textContent === 'live'", undefined, {
        timeout: 5000,
      })
    } finally {
      await tab.close()
    }
  })

  it('a cross-site page cannot spend a budget by no-cors fetch or by a text/plain form', async () => {
    const { url } = await startService(YAML)
    // The attacker's page, on another origin (another port).
    const page = `<!doctype html><body>
<form id="f" method="POST" enctype="text/plain" action="${url}/v1/check" target="sink">
<input name='{"policy":"api","key":"alice' value='","cost":5}'></form>
<iframe name="sink"></iframe>
<script>
fetch(${JSON.stringify(`${url}/v1/check`)}, { method: 'POST', mode: 'no-cors', body: ${JSON.stringify(ALICE)} })
  .finally(() => { document.getElementById('f').submit() })
</script></body>`
    const evil = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(page))
    await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve))
    try {
      const tab = await browser.newPage()
      const posted = new Promise<number>((resolve) => {
        let seen = 0
        tab.on('requestfinished', (request) => {
          if (request.url().endsWith('/v1/check') && ++seen === 2) resolve(seen)
        })
        tab.on('requestfailed', (request) => {
          if (request.url().endsWith('/v1/check') && ++seen === 2) resolve(seen)
        })
      })
      await tab.goto(`http://127.0.0.1:${(evil.address() as AddressInfo).port}/`)
      expect(await posted).toBe(2)
      await tab.close()
      expect(await remaining(url)).toBe(10)
      // The form's text/plain body is {"policy":"api","key":"alice=","cost":5}: valid JSON.
      expect(await remaining(url, 'alice=')).toBe(10)
    } finally {
      await new Promise((resolve) => evil.close(resolve))
    }
  })
})
