// The service's override endpoints on two instances sharing one real Redis: PUT through one, the
// other applies it within the limiter's staleness (1 s); GET, DELETE and the listing; the admin
// token (403 when admin is off, 401 without it); bad input 400 with its code, unknown policy 404;
// tiers; and the one structured log line per change (who, when, before, after).
import { Writable } from 'node:stream'
import { pino } from 'pino'
import { afterAll, describe, expect, inject, it } from 'vitest'
import { openStore } from '../../packages/sluice-server/src/server/store-url.js'
import type { Running } from '../helpers/service.js'
import { get, post, startService } from '../helpers/service.js'

const CONFIG = `policies:
  api: { algorithm: fixed-window, limit: 2, window: 1m }
  bucket: { algorithm: token-bucket, limit: 1, window: 1s }
tiers:
  pro:
    api: { limit: 4 }
admin:
  token: secret-token-0123456789
`
const AUTH = { authorization: 'Bearer secret-token-0123456789' }

async function call(
  method: string,
  url: string,
  body?: unknown,
  headers: Record<string, string> = AUTH,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(url, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  })
  const text = await res.text()
  return { status: res.status, body: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) }
}

/** A pino logger whose lines land in `lines`, parsed. */
function capturingLogger() {
  const lines: Record<string, unknown>[] = []
  const stream = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n')) if (line !== '') lines.push(JSON.parse(line))
      done()
    },
  })
  return { logger: pino({ level: 'info' }, stream), lines }
}

async function eventually(check: () => Promise<boolean>, boundMs = 5_000): Promise<number> {
  const started = Date.now()
  for (;;) {
    if (await check()) return Date.now() - started
    if (Date.now() - started > boundMs) throw new Error(`not within ${boundMs} ms`)
    await new Promise((done) => setTimeout(done, 20))
  }
}

describe('override endpoints, two service instances on one Redis', () => {
  const running: Running[] = []
  afterAll(async () => {
    for (const r of running) await r.service.close(500)
  })

  it('PUT through one instance applies in the other within the staleness; GET, list, DELETE; one log line per change', async () => {
    const { url: redisUrl } = inject('redis')
    const prefix = `svc-ov-${process.pid}-${Date.now()}`
    const log = capturingLogger()
    const a = await startService(CONFIG, {
      store: await openStore(`${redisUrl}/0`, { prefix }),
      logger: log.logger,
    })
    running.push(a)
    const b = await startService(CONFIG, { store: await openStore(`${redisUrl}/0`, { prefix }) })
    running.push(b)
    const key = 'customer/7 é'
    const path = `/v1/overrides/api/${encodeURIComponent(key)}`
    const put = await call(
      'PUT',
      `${a.url}${path}`,
      { limit: 10, ttl: '10m', reason: 'launch' },
      {
        ...AUTH,
        'x-sluice-actor': 'alice@example.com',
      },
    )
    expect(put).toMatchObject({
      status: 200,
      body: { ok: true, action: 'set', override: { policy: 'api', key, limit: 10, reason: 'launch' } },
    })
    // At once through a; through b within its staleness (default 1 s; bounded wait).
    expect((await post(`${a.url}/v1/check`, { policy: 'api', key })).body).toMatchObject({ limit: 10 })
    await eventually(async () => (await post(`${b.url}/v1/peek`, { policy: 'api', key })).body.limit === 10)
    expect(await call('GET', `${b.url}${path}`)).toMatchObject({
      status: 200,
      body: { policy: 'api', key, limit: 10, reason: 'launch', expiresAt: expect.any(Number) },
    })
    expect(await call('GET', `${b.url}/v1/overrides/api`)).toMatchObject({
      status: 200,
      body: { policy: 'api', overrides: [expect.objectContaining({ key, limit: 10 })] },
    })
    // The tier has its own counters: a change without ?tier= reaches it too; with ?tier= only it.
    expect(await call('GET', `${a.url}${path}?tier=pro`)).toMatchObject({
      status: 200,
      body: { tier: 'pro', limit: 10 },
    })
    await call('PUT', `${a.url}/v1/overrides/api/only-pro?tier=pro`, { blocked: true })
    expect((await call('GET', `${a.url}/v1/overrides/api/only-pro`)).status).toBe(404)
    expect(
      (await post(`${a.url}/v1/check`, { policy: 'api', key: 'only-pro', tier: 'pro' })).body,
    ).toMatchObject({
      allowed: false,
      reason: 'blocked',
    })

    const changed = log.lines.filter((l) => l.event === 'override_changed')
    expect(changed[0]).toMatchObject({
      action: 'set',
      actor: 'alice@example.com',
      peer: expect.stringMatching(/127\.0\.0\.1/),
      at: expect.any(String),
      policy: 'api',
      key,
      before: null,
      after: { policy: 'api', key, limit: 10, reason: 'launch' },
    })
    const del = await call('DELETE', `${a.url}${path}`)
    expect(del).toMatchObject({ status: 200, body: { ok: true, action: 'clear', removed: true } })
    expect((await call('DELETE', `${a.url}${path}`)).body).toMatchObject({ removed: false })
    const cleared = log.lines.filter((l) => l.event === 'override_changed')[2]
    expect(cleared).toMatchObject({ action: 'clear', before: { limit: 10 }, after: null })
    expect((await call('GET', `${a.url}${path}`)).status).toBe(404)
    await eventually(async () => (await post(`${b.url}/v1/peek`, { policy: 'api', key })).body.limit === 2)
  })

  it('bad input: 400 with its code and nothing stored; unknown policy 404; the admin token', async () => {
    const { url: redisUrl } = inject('redis')
    const store = await openStore(`${redisUrl}/0`, { prefix: `svc-ovb-${process.pid}-${Date.now()}` })
    const r = await startService(CONFIG, { store })
    running.push(r)
    const at = (p: string) => `${r.url}/v1/overrides/${p}`
    const cases: [unknown, string][] = [
      [{}, 'invalid_override'],
      [{ limit: 0 }, 'invalid_override'],
      [{ limit: -3 }, 'invalid_override'],
      [{ limt: 3 }, 'invalid_override'],
      [{ unlimited: true, blocked: true }, 'invalid_override'],
      [{ burst: 3 }, 'invalid_override'],
      [{ window: 'soon' }, 'invalid_duration'],
      [{ limit: 3, ttl: '-1m' }, 'invalid_duration'],
      [[1], 'invalid_body'],
      ['not json', 'invalid_json'],
    ]
    for (const [body, code] of cases)
      expect(await call('PUT', at('api/k'), body), JSON.stringify(body)).toMatchObject({
        status: 400,
        body: { error: code },
      })
    expect(await call('GET', at('api'))).toMatchObject({ status: 200, body: { overrides: [] } })
    expect(await call('PUT', at('nope/k'), { limit: 3 })).toMatchObject({
      status: 404,
      body: { error: 'unknown_policy' },
    })
    expect(await call('GET', at('nope'))).toMatchObject({ status: 404, body: { error: 'unknown_policy' } })
    expect(await call('PUT', at('api/k?tier=gold'), { limit: 3 })).toMatchObject({
      status: 400,
      body: { error: 'unknown_tier' },
    })
    expect(await call('PUT', at('api/%E0%A4%A'), { limit: 3 })).toMatchObject({
      status: 400,
      body: { error: 'invalid_key' },
    })
    expect(await call('POST', at('api/k'), { limit: 3 })).toMatchObject({ status: 405 })
    expect(await call('PUT', at('api/k'), { limit: 3 }, {})).toMatchObject({
      status: 401,
      body: { error: 'unauthorized' },
    })
    expect(await call('GET', at('api'), undefined, { authorization: 'Bearer wrong' })).toMatchObject({
      status: 401,
    })
    expect(await call('GET', at('api'))).toMatchObject({ status: 200, body: { overrides: [] } })
    expect(await get(`${r.url}/healthz`)).toMatchObject({ status: 200 })
  })

  it('admin off: 403', async () => {
    const r = await startService(CONFIG.replace(/admin:\n {2}token: secret-token-0123456789\n/, ''))
    running.push(r)
    expect(await call('GET', `${r.url}/v1/overrides/api`)).toMatchObject({
      status: 403,
      body: { error: 'admin_disabled' },
    })
  })
})
