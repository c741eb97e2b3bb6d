// The service's plumbing through real sockets: error answers and their log lines, the debug request
// log, readiness when the store hangs, admin tokens across reloads, and draining on close (the
// `connection: close` header, and the grace period that cuts a request which never finishes).
import type { IncomingMessage } from 'node:http'
import { request } from 'node:http'
import type { Logger } from 'pino'
import { pino } from 'pino'
import { Gauge } from 'prom-client'
import { describe, expect, it } from 'vitest'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { parseConfig } from '../../packages/sluice-server/src/server/config.js'
import { openStore } from '../../packages/sluice-server/src/server/store-url.js'
import { startRedis } from '../helpers/redis-harness.js'
import type { Running } from '../helpers/service.js'
import { get, post, servicesClosedAfterEach } from '../helpers/service.js'

const CONFIG = `
policies:
  api:   { algorithm: fixed-window, limit: 3, window: 1m }
  login: { algorithm: sliding-window-log, limit: 2, window: 15m, onStoreError: closed }
admin: { token: first-admin-token }
`
const CLOSED_ONLY = `
policies:
  login: { algorithm: sliding-window-log, limit: 2, window: 15m, onStoreError: closed }
`

const service = servicesClosedAfterEach()

/** A pino logger at `level` whose JSON lines land in `lines`. */
function capturingLogger(level: 'info' | 'debug'): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = []
  const logger: Logger = pino({ level }, { write: (text: string) => lines.push(JSON.parse(text)) })
  return { logger, lines }
}

/** Start a POST whose body is never finished; resolves once the server has the request. */
async function hangingRequest(url: string): Promise<{ response: Promise<IncomingMessage> }> {
  const req = request(url, { method: 'POST', headers: { 'content-type': 'application/json' } })
  const response = new Promise<IncomingMessage>((resolve, reject) => {
    req.on('response', resolve)
    req.on('error', reject)
  })
  response.catch(() => {})
  await new Promise((resolve) => req.once('socket', (socket) => socket.once('connect', resolve)))
  req.write('{"policy":"api",')
  // Let the server read the headers and start the request (the machine may be busy).
  await new Promise((r) => setTimeout(r, 200))
  return { response }
}

describe('error answers', () => {
  it('a store that fails answers 503 store_unavailable, logged under the request id', async () => {
    const redis = await startRedis()
    const { logger, lines } = capturingLogger('info')
    const r = await service(CONFIG, { store: await openStore(redis.url, { prefix: 'life' }), logger })
    const auth = { authorization: 'Bearer first-admin-token' }
    expect((await post(`${r.url}/v1/reset`, { policy: 'api', key: 'k' }, auth)).status).toBe(200)
    await redis.stop()
    const res = await post(
      `${r.url}/v1/reset`,
      { policy: 'api', key: 'k' },
      { ...auth, 'x-request-id': 'req-503' },
    )
    expect(res.status).toBe(503)
    expect(res.body.error).toBe('store_unavailable')
    expect(res.body.message).toMatch(/^the store did not answer: /)
    expect(res.headers.get('x-request-id')).toBe('req-503')
    expect(lines.find((l) => l.reqId === 'req-503')).toMatchObject({ level: 50, msg: 'store unavailable' })
  })

  it('an unexpected error answers 500 internal_error without its message, logged under the request id', async () => {
    const { logger, lines } = capturingLogger('info')
    const r = await service(CONFIG, { logger })
    // A collector with a defect, registered where users register theirs: /metrics throws a plain Error.
    new Gauge({
      name: 'sluice_test_broken',
      help: 'a collector that throws',
      registers: [r.service.registry],
      collect() {
        throw new Error('secret detail')
      },
    })
    const res = await get(`${r.url}/metrics`, { 'x-request-id': 'req-500' })
    expect(res).toMatchObject({
      status: 500,
      body: { error: 'internal_error', message: 'internal error; see the service log for this request id' },
    })
    expect(JSON.stringify(res.body)).not.toContain('secret detail')
    expect(lines.find((l) => l.reqId === 'req-500')).toMatchObject({
      level: 50,
      msg: 'internal error',
      method: 'GET',
      url: '/metrics',
    })
    // Other endpoints still answer.
    expect((await post(`${r.url}/v1/check`, { policy: 'api', key: 'k' })).body.allowed).toBe(true)
  })

  it('client mistakes are logged at info with their code; at debug every request gets one line', async () => {
    const { logger, lines } = capturingLogger('debug')
    const r = await service(CONFIG, { logger })
    await post(`${r.url}/v1/check`, { policy: 'nope', key: 'k' }, { 'x-request-id': 'req-400' })
    await get(`${r.url}/healthz`, { 'x-request-id': 'req-200' })
    const mistake = lines.filter((l) => l.reqId === 'req-400')
    expect(mistake[0]).toMatchObject({ level: 30, error: 'unknown_policy', method: 'POST', url: '/v1/check' })
    expect(mistake[1]).toMatchObject({ level: 20, msg: 'request', status: 400, url: '/v1/check' })
    const ok = lines.filter((l) => l.reqId === 'req-200')
    expect(ok).toHaveLength(1)
    expect(ok[0]).toMatchObject({ msg: 'request', method: 'GET', url: '/healthz', status: 200 })
    expect(typeof ok[0]?.ms).toBe('number')
  })

  it('request ids that are not sane are replaced', async () => {
    const r = await service(CONFIG)
    for (const given of ['x'.repeat(129), 'has space', 'tab\there']) {
      const id = (await get(`${r.url}/healthz`, { 'x-request-id': given })).headers.get('x-request-id')
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-z]+$/)
    }
    expect(
      (await get(`${r.url}/healthz`, { 'x-request-id': 'y'.repeat(128) })).headers.get('x-request-id'),
    ).toBe('y'.repeat(128))
  })
})

describe('/readyz when the store never answers', () => {
  const hanging = { store: memoryStore(), description: 'hangs', ping: () => new Promise<void>(() => {}) }

  it('gives up after 1 s; ready while a policy fails open', async () => {
    const r = await service(CONFIG, { store: { ...hanging, store: memoryStore() } })
    const began = performance.now()
    const res = await get(`${r.url}/readyz`)
    expect(performance.now() - began).toBeGreaterThanOrEqual(950)
    expect(res).toMatchObject({
      status: 200,
      body: {
        ready: true,
        store: 'hangs',
        reachable: false,
        serving: 'failure modes: open, closed',
        message: 'no answer within 1000ms',
      },
    })
    expect(res.body.health).toBeTypeOf('object')
  })

  it('503 when every policy fails closed', async () => {
    const r = await service(CLOSED_ONLY, { store: { ...hanging, store: memoryStore() } })
    expect(await get(`${r.url}/readyz`)).toMatchObject({
      status: 503,
      body: { ready: false, serving: 'nothing: every policy is onStoreError closed' },
    })
  })
})

describe('admin token across reloads', () => {
  const reset = (r: Running, token: string) =>
    post(`${r.url}/v1/reset`, { policy: 'api', key: 'k' }, { authorization: `Bearer ${token}` })

  it("a reload brings the new config's token, or turns admin off", async () => {
    const r = await service(CONFIG)
    expect((await reset(r, 'first-admin-token')).status).toBe(200)
    r.service.reload(parseConfig(CONFIG.replace('first-admin-token', 'second-admin-token'), 'next.yaml'))
    expect((await reset(r, 'first-admin-token')).status).toBe(401)
    expect((await reset(r, 'second-admin-token')).status).toBe(200)
    r.service.reload(parseConfig(CONFIG.replace(/admin:.*\n/, ''), 'off.yaml'))
    expect(await reset(r, 'second-admin-token')).toMatchObject({
      status: 403,
      body: { error: 'admin_disabled' },
    })
  })

  it('the adminToken option wins over every config', async () => {
    const r = await service(CONFIG, { adminToken: 'option-admin-token' })
    expect((await reset(r, 'first-admin-token')).status).toBe(401)
    r.service.reload(parseConfig(CONFIG.replace(/admin:.*\n/, ''), 'off.yaml'))
    expect((await reset(r, 'option-admin-token')).status).toBe(200)
  })
})

describe('close', () => {
  it('answers in-flight requests with connection: close', async () => {
    const r = await service(CONFIG)
    const req = request(`${r.url}/v1/check`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
    })
    const response = new Promise<IncomingMessage>((resolve, reject) => {
      req.on('response', resolve)
      req.on('error', reject)
    })
    await new Promise((resolve) => req.once('socket', (socket) => socket.once('connect', resolve)))
    req.write('{"policy":"api",')
    await new Promise((r) => setTimeout(r, 200))
    const closed = r.service.close()
    await new Promise((r) => setTimeout(r, 50))
    req.end('"key":"k"}')
    const res = await response
    res.resume()
    expect(res.statusCode).toBe(200)
    expect(res.headers.connection).toBe('close')
    await closed
  })

  it('cuts a request that outlives the grace period', async () => {
    const r = await service(CONFIG)
    const { response } = await hangingRequest(`${r.url}/v1/check`)
    const began = performance.now()
    await r.service.close(300)
    const took = performance.now() - began
    expect(took).toBeGreaterThanOrEqual(290)
    expect(took).toBeLessThan(5000)
    await expect(response).rejects.toThrow()
    // Closed twice is fine.
    await r.service.close(300)
  })
})
