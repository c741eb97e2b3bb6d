// The decision service's HTTP API through real sockets: every endpoint and every bad input.
import { request } from 'node:http'
import { Counter } from 'prom-client'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { parseConfig } from '../../packages/sluice-server/src/server/config.js'
import type { Running } from '../helpers/service.js'
import { get, post, startService } from '../helpers/service.js'

const CONFIG = `
policies:
  api:   { algorithm: fixed-window, limit: 3, window: 1m }
  perIp: { algorithm: sliding-window-counter, limit: 100, window: 1h }
  login: { algorithm: sliding-window-log, limit: 2, window: 15m, onStoreError: closed }
tiers:
  pro: { api: { limit: 10 } }
admin: { token: test-admin-token }
authz: { tierHeader: x-sluice-tier }
`
const ADMIN = { authorization: 'Bearer test-admin-token' }

let running: Running
beforeEach(async () => {
  running = await startService(CONFIG)
})
afterEach(async () => {
  await running.service.close()
})
const at = (path: string) => `${running.url}${path}`

describe('POST /v1/check', () => {
  it('allows up to the limit, then denies with 200 and the decision in the body', async () => {
    const bodies = []
    for (let i = 0; i < 4; i++) {
      const res = await post(at('/v1/check'), { policy: 'api', key: 'user-42' })
      expect(res.status).toBe(200)
      bodies.push(res.body)
    }
    expect(bodies.map((b) => b.allowed)).toEqual([true, true, true, false])
    expect(bodies[0]).toEqual({
      allowed: true,
      limit: 3,
      remaining: 2,
      resetMs: expect.any(Number),
      retryAfterMs: 0,
      policy: 'api',
    })
    expect(bodies[3]).toMatchObject({ allowed: false, remaining: 0, policy: 'api', reason: 'limit' })
    expect(bodies[3]!.retryAfterMs).toBeGreaterThan(0)
    expect(bodies[3]!.retryAfterMs).toBeLessThanOrEqual(60_000)
    // Another key has its own counter.
    expect((await post(at('/v1/check'), { policy: 'api', key: 'user-43' })).body.allowed).toBe(true)
  })

  it('spends cost units', async () => {
    const res = await post(at('/v1/check'), { policy: 'api', key: 'k', cost: 2 })
    expect(res.body).toMatchObject({ allowed: true, remaining: 1 })
    expect((await post(at('/v1/check'), { policy: 'api', key: 'k', cost: 2 })).body).toMatchObject({
      allowed: false,
    })
  })

  it('applies tier overrides on counters of their own', async () => {
    for (let i = 0; i < 3; i++) await post(at('/v1/check'), { policy: 'api', key: 'u' })
    const pro = await post(at('/v1/check'), { policy: 'api', key: 'u', tier: 'pro' })
    expect(pro.body).toMatchObject({ allowed: true, limit: 10, remaining: 9, policy: 'api', tier: 'pro' })
    // A tier that does not override a policy uses it as written.
    const login = await post(at('/v1/check'), { policy: 'login', key: 'u', tier: 'pro' })
    expect(login.body).toMatchObject({ allowed: true, limit: 2, remaining: 1, policy: 'login' })
    expect(login.body.tier).toBeUndefined()
  })

  it('layered checks are all-or-nothing and name the denying layer', async () => {
    for (let i = 0; i < 3; i++) await post(at('/v1/check'), { policy: 'api', key: 'user-42' })
    const checks = [
      { policy: 'perIp', key: '1.2.3.4' },
      { policy: 'api', key: 'user-42' },
    ]
    const denied = await post(at('/v1/check'), { checks })
    expect(denied.status).toBe(200)
    expect(denied.body).toMatchObject({ allowed: false, deniedBy: 'api' })
    const results = denied.body.results as Record<string, unknown>[]
    expect(results).toHaveLength(2)
    expect(results[0]).toMatchObject({ allowed: true, policy: 'perIp', remaining: 100 })
    expect(results[1]).toMatchObject({ allowed: false, policy: 'api', remaining: 0 })
    // perIp was not charged.
    const peek = await post(at('/v1/peek'), { policy: 'perIp', key: '1.2.3.4' })
    expect(peek.body).toMatchObject({ remaining: 100 })
    // Both charged when both admit; a per-check tier applies.
    const ok = await post(at('/v1/check'), {
      checks: [
        { policy: 'perIp', key: '1.2.3.4' },
        { policy: 'api', key: 'user-42', tier: 'pro' },
      ],
    })
    expect(ok.body).toMatchObject({ allowed: true })
    expect(ok.body.deniedBy).toBeUndefined()
    expect((ok.body.results as Record<string, unknown>[]).map((r) => r.remaining)).toEqual([99, 9])
  })
})

describe('POST /v1/peek', () => {
  it('answers without consuming', async () => {
    for (let i = 0; i < 3; i++) {
      const res = await post(at('/v1/peek'), { policy: 'api', key: 'p' })
      expect(res.body).toMatchObject({ allowed: true, remaining: 3 })
    }
    await post(at('/v1/check'), { policy: 'api', key: 'p' })
    expect((await post(at('/v1/peek'), { policy: 'api', key: 'p' })).body).toMatchObject({ remaining: 2 })
    const layered = await post(at('/v1/peek'), {
      checks: [
        { policy: 'api', key: 'p' },
        { policy: 'login', key: 'p' },
      ],
    })
    expect((layered.body.results as Record<string, unknown>[]).map((r) => r.remaining)).toEqual([2, 2])
  })
})

describe('GET /v1/authz', () => {
  it('answers 200 then 429 with rate-limit headers, keyed by the client address', async () => {
    const statuses: number[] = []
    let last: Awaited<ReturnType<typeof get>> | undefined
    for (let i = 0; i < 4; i++) {
      last = await get(at('/v1/authz?policy=api'), { 'x-real-ip': '203.0.113.7' })
      statuses.push(last.status)
      if (i === 0) {
        expect(last.headers.get('x-ratelimit-limit')).toBe('3')
        expect(last.headers.get('x-ratelimit-remaining')).toBe('2')
        expect(last.headers.get('ratelimit-policy')).toBe('"api";q=3;w=60')
        expect(last.headers.get('retry-after')).toBeNull()
      }
    }
    expect(statuses).toEqual([200, 200, 200, 429])
    const retryAfter = Number(last!.headers.get('retry-after'))
    expect(retryAfter).toBeGreaterThanOrEqual(1)
    expect(retryAfter).toBeLessThanOrEqual(60)
    expect(last!.body).toEqual({
      error: 'rate_limit_exceeded',
      message: expect.stringContaining(`try again in ${retryAfter} second`),
      retry_after: retryAfter,
      policy: 'api',
    })
    // By default only X-Real-IP (what examples/nginx sends) counts: X-Forwarded-For is ignored, so the
    // socket address (127.0.0.1) is the key. test/service/authz.test.ts covers the other settings.
    expect((await get(at('/v1/authz?policy=api'), { 'x-forwarded-for': '203.0.113.7' })).status).toBe(200)
    // Without proxy headers the socket address is the key.
    expect((await get(at('/v1/authz?policy=api'))).status).toBe(200)
  })

  it('takes the tier from the configured header or the query', async () => {
    for (let i = 0; i < 3; i++) await get(at('/v1/authz?policy=api'), { 'x-real-ip': '1.1.1.1' })
    const pro = await get(at('/v1/authz?policy=api'), { 'x-real-ip': '1.1.1.1', 'x-sluice-tier': 'pro' })
    expect(pro.status).toBe(200)
    expect(pro.headers.get('x-ratelimit-limit')).toBe('10')
    expect((await get(at('/v1/authz?policy=api&tier=pro'), { 'x-real-ip': '1.1.1.1' })).body).toMatchObject({
      remaining: 8,
    })
    // A tier the config does not define, from the header: the default tier, not an error.
    const unknown = await get(at('/v1/authz?policy=api'), { 'x-real-ip': '1.1.1.2', 'x-sluice-tier': 'gold' })
    expect(unknown.status).toBe(200)
    expect(unknown.headers.get('x-ratelimit-limit')).not.toBe('10')
    // In the query (the operator's URL) it is still a mistake to report.
    const bad = await get(at('/v1/authz?policy=api&tier=gold'), { 'x-real-ip': '1.1.1.1' })
    expect(bad).toMatchObject({ status: 400, body: { error: 'unknown_tier' } })
  })

  it('reads the key from authz.keyHeader when configured, and refuses requests without it', async () => {
    await running.service.close()
    running = await startService(
      'policies:\n  api: { algorithm: fixed-window, limit: 1, window: 1m }\nauthz: { keyHeader: X-Api-Key }\n',
    )
    expect((await get(at('/v1/authz?policy=api'), { 'x-api-key': 'k1' })).status).toBe(200)
    expect((await get(at('/v1/authz?policy=api'), { 'x-api-key': 'k1' })).status).toBe(429)
    expect((await get(at('/v1/authz?policy=api'), { 'x-api-key': 'k2' })).status).toBe(200)
    expect(await get(at('/v1/authz?policy=api'), { 'x-real-ip': '1.2.3.4' })).toMatchObject({
      status: 400,
      body: { error: 'missing_key' },
    })
  })

  it('refuses bad queries with 400', async () => {
    const cases: [string, string][] = [
      ['/v1/authz', 'invalid_body'],
      ['/v1/authz?policy=nope', 'unknown_policy'],
      ['/v1/authz?policy=api&cost=0', 'invalid_cost'],
      ['/v1/authz?policy=api&cost=abc', 'invalid_cost'],
      ['/v1/authz?policy=api&key=x', 'unknown_field'],
    ]
    for (const [path, code] of cases) {
      expect(await get(at(path), { 'x-real-ip': '5.5.5.5' }), path).toMatchObject({
        status: 400,
        body: { error: code },
      })
    }
    expect(
      (await get(at('/v1/authz?policy=api'), { 'x-real-ip': '5.5.5.5' })).headers.get(
        'x-ratelimit-remaining',
      ),
    ).toBe('2')
  })
})

describe('admin endpoints', () => {
  it('reset and block need the bearer token', async () => {
    for (const path of ['/v1/reset', '/v1/block']) {
      expect(await post(at(path), { policy: 'api', key: 'a' })).toMatchObject({
        status: 401,
        body: { error: 'unauthorized' },
      })
      expect(
        await post(at(path), { policy: 'api', key: 'a' }, { authorization: 'Bearer wrong-token!' }),
      ).toMatchObject({
        status: 401,
      })
    }
  })

  it('reset forgets usage on every tier; block denies with reason blocked', async () => {
    for (let i = 0; i < 3; i++) await post(at('/v1/check'), { policy: 'api', key: 'a' })
    await post(at('/v1/check'), { policy: 'api', key: 'a', tier: 'pro' })
    expect(await post(at('/v1/reset'), { policy: 'api', key: 'a' }, ADMIN)).toMatchObject({
      status: 200,
      body: { ok: true },
    })
    expect((await post(at('/v1/check'), { policy: 'api', key: 'a' })).body).toMatchObject({
      allowed: true,
      remaining: 2,
    })
    expect((await post(at('/v1/peek'), { policy: 'api', key: 'a', tier: 'pro' })).body).toMatchObject({
      remaining: 10,
    })

    expect(await post(at('/v1/block'), { policy: 'api', key: 'b', duration: '10m' }, ADMIN)).toMatchObject({
      status: 200,
    })
    const blocked = await post(at('/v1/check'), { policy: 'api', key: 'b', tier: 'pro' })
    expect(blocked.body).toMatchObject({ allowed: false, reason: 'blocked' })
    expect(blocked.body.retryAfterMs).toBeGreaterThan(590_000)
    expect(
      await post(at('/v1/block'), { policy: 'api', key: 'b', duration: '10 minutes' }, ADMIN),
    ).toMatchObject({
      status: 400,
      body: { error: 'invalid_duration' },
    })
    expect(await post(at('/v1/block'), { policy: 'api', key: 'b' }, ADMIN)).toMatchObject({
      status: 400,
      body: { error: 'invalid_duration' },
    })
    expect(await post(at('/v1/reset'), { policy: 'api', key: 'b', extra: 1 }, ADMIN)).toMatchObject({
      status: 400,
      body: { error: 'unknown_field' },
    })
  })

  it('are off without a token', async () => {
    await running.service.close()
    running = await startService('policies:\n  api: { algorithm: fixed-window, limit: 1, window: 1m }\n')
    expect(await post(at('/v1/reset'), { policy: 'api', key: 'a' }, ADMIN)).toMatchObject({
      status: 403,
      body: { error: 'admin_disabled' },
    })
  })
})

describe('bad input', () => {
  const longKey = 'é'.repeat(513) // 1026 bytes in UTF-8, 513 characters
  const cases: [string, unknown, string][] = [
    ['malformed JSON', '{"policy":"api",', 'invalid_json'],
    ['not an object', '[1,2]', 'invalid_body'],
    ['a JSON string', '"api"', 'invalid_body'],
    ['unknown policy', { policy: 'nope', key: 'k' }, 'unknown_policy'],
    ['unknown tier', { policy: 'api', key: 'k', tier: 'gold' }, 'unknown_tier'],
    ['cost 0', { policy: 'api', key: 'k', cost: 0 }, 'invalid_cost'],
    ['negative cost', { policy: 'api', key: 'k', cost: -1 }, 'invalid_cost'],
    ['fractional cost', { policy: 'api', key: 'k', cost: 1.5 }, 'invalid_cost'],
    ['cost as a string', { policy: 'api', key: 'k', cost: '1' }, 'invalid_cost'],
    ['cost above capacity', { policy: 'api', key: 'k', cost: 4 }, 'invalid_cost'],
    ['key over 1 KB', { policy: 'api', key: longKey }, 'key_too_long'],
    ['empty key', { policy: 'api', key: '' }, 'invalid_key'],
    ['missing key', { policy: 'api' }, 'invalid_key'],
    ['numeric key', { policy: 'api', key: 42 }, 'invalid_key'],
    ['missing policy', { key: 'k' }, 'invalid_body'],
    ['unknown field', { policy: 'api', key: 'k', weight: 2 }, 'unknown_field'],
    ['unknown field in a check', { checks: [{ policy: 'api', key: 'k', why: 1 }] }, 'unknown_field'],
    [
      'unknown field beside checks',
      { checks: [{ policy: 'api', key: 'k' }], policy: 'api' },
      'unknown_field',
    ],
    ['empty checks', { checks: [] }, 'invalid_body'],
    ['checks not an array', { checks: 'api' }, 'invalid_body'],
    [
      'bad layer cost',
      {
        checks: [
          { policy: 'perIp', key: 'k' },
          { policy: 'api', key: 'k', cost: 0 },
        ],
      },
      'invalid_cost',
    ],
    [
      'duplicate check',
      {
        checks: [
          { policy: 'api', key: 'k' },
          { policy: 'api', key: 'k' },
        ],
      },
      'duplicate_check',
    ],
    ['body over 16 KB', { policy: 'api', key: 'k', pad: 'x'.repeat(17_000) }, 'body_too_large'],
  ]

  for (const path of ['/v1/check', '/v1/peek']) {
    it(`${path}: every mistake is a 400 with a stable code, and nothing is stored`, async () => {
      for (const [name, body, code] of cases) {
        const res = await post(at(path), body)
        expect({ name, status: res.status, error: res.body.error }).toEqual({
          name,
          status: 400,
          error: code,
        })
        expect(typeof res.body.message).toBe('string')
      }
      expect(Buffer.byteLength(longKey)).toBeGreaterThan(1024)
      // A 1 KB key is fine.
      expect((await post(at('/v1/peek'), { policy: 'api', key: 'k'.repeat(1024) })).status).toBe(200)
      for (const policy of ['api', 'perIp']) {
        const res = await post(at('/v1/peek'), { policy, key: 'k' })
        expect(res.body.remaining).toBe(res.body.limit)
      }
    })
  }

  it('an oversized body streamed without content-length is refused too', async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        at('/v1/check'),
        { method: 'POST', headers: { 'transfer-encoding': 'chunked', 'content-type': 'application/json' } },
        (res) => {
          res.resume()
          resolve(res.statusCode ?? 0)
        },
      )
      req.on('error', reject)
      for (let i = 0; i < 20; i++) req.write('x'.repeat(1024))
      req.end()
    })
    expect(status).toBe(400)
  })

  it('unknown routes are 404 and wrong methods 405, as JSON', async () => {
    expect(await get(at('/v2/check'))).toMatchObject({ status: 404, body: { error: 'not_found' } })
    expect(await get(at('/v1/check'))).toMatchObject({ status: 405, body: { error: 'method_not_allowed' } })
    expect(await post(at('/healthz'), {})).toMatchObject({ status: 405 })
  })
})

describe('health, readiness, metrics, request ids', () => {
  it('serves /healthz and /readyz', async () => {
    expect(await get(at('/healthz'))).toMatchObject({ status: 200, body: { status: 'ok' } })
    expect(await get(at('/readyz'))).toMatchObject({
      status: 200,
      body: { ready: true, store: 'memory', reachable: true },
    })
  })

  it('/readyz says which failure mode serves when the store does not answer', async () => {
    await running.service.close()
    const { memoryStore } = await import('../../packages/sluice/src/stores/memory.js')
    running = await startService(CONFIG, {
      store: {
        store: memoryStore(),
        description: 'test-store',
        ping: () => Promise.reject(new Error('down')),
      },
    })
    expect(await get(at('/readyz'))).toMatchObject({
      status: 200,
      body: { ready: true, store: 'test-store', reachable: false, serving: 'failure modes: open, closed' },
    })
  })

  it('serves the registry the service exposes on /metrics', async () => {
    const counter = new Counter({
      name: 'sluice_test_total',
      help: 'a test counter',
      registers: [running.service.registry],
    })
    counter.inc(3)
    const res = await fetch(at('/metrics'))
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toContain('text/plain')
    expect(await res.text()).toContain('sluice_test_total 3')
  })

  it('answers with a request id, echoing a sane one', async () => {
    const mine = await get(at('/healthz'), { 'x-request-id': 'abc-123' })
    expect(mine.headers.get('x-request-id')).toBe('abc-123')
    const a = (await get(at('/healthz'))).headers.get('x-request-id')
    const b = (await get(at('/healthz'))).headers.get('x-request-id')
    expect(a).toMatch(/^[0-9a-f]{8}-[0-9a-z]+$/)
    expect(a).not.toBe(b)
  })

  it('emits decision events across reloads', async () => {
    const seen: string[] = []
    running.service.subscribe((e) => seen.push(e.decision.policy))
    await post(at('/v1/check'), { policy: 'api', key: 'e' })
    running.service.reload(parseConfig(CONFIG, 'again.yaml'))
    await post(at('/v1/check'), { policy: 'login', key: 'e' })
    // The configured names, as the limiter decided them (the storage ids are apart).
    expect(seen).toEqual(['api', 'login'])
  })
})

describe('reload and close', () => {
  it('keeps counters of policies whose algorithm and window did not change', async () => {
    for (let i = 0; i < 2; i++) await post(at('/v1/check'), { policy: 'api', key: 'r' })
    await post(at('/v1/check'), { policy: 'login', key: 'r' })
    const next = CONFIG.replace('limit: 3, window: 1m', 'limit: 5, window: 1m').replace(
      'limit: 2, window: 15m',
      'limit: 2, window: 10m',
    )
    running.service.reload(parseConfig(next, 'next.yaml'))
    // api: limit raised, counter kept (2 used of 5).
    expect((await post(at('/v1/peek'), { policy: 'api', key: 'r' })).body).toMatchObject({
      limit: 5,
      remaining: 3,
    })
    // login: window changed, so a fresh counter (state shapes never mix).
    expect((await post(at('/v1/peek'), { policy: 'login', key: 'r' })).body).toMatchObject({ remaining: 2 })
  })

  it('finishes an in-flight request, then stops accepting', async () => {
    let resolveStatus: (status: number) => void = () => {}
    let rejectStatus: (error: Error) => void = () => {}
    const answered = new Promise<number>((resolve, reject) => {
      resolveStatus = resolve
      rejectStatus = reject
    })
    const req = request(
      at('/v1/check'),
      { method: 'POST', headers: { 'content-type': 'application/json' } },
      (res) => {
        res.resume()
        resolveStatus(res.statusCode ?? 0)
      },
    )
    req.on('error', rejectStatus)
    const connected = new Promise((resolve) =>
      req.once('socket', (socket) => socket.once('connect', resolve)),
    )
    req.write('{"policy":"api",')
    await connected
    // Let the server read the headers and start the request (the machine may be busy).
    await new Promise((r) => setTimeout(r, 200))
    const closed = running.service.close()
    await new Promise((r) => setTimeout(r, 50))
    await expect(fetch(at('/healthz'))).rejects.toThrow()
    req.end('"key":"slow"}')
    expect(await answered).toBe(200)
    await closed
  })
})
