// The run-time lists of the service: PUT, DELETE and GET /v1/lists behind the admin token, on a
// real Redis and on the memory store; each change logged; bad entries 400, no token 401; a reload
// replaces the YAML part and keeps the run-time entries.
import { Writable } from 'node:stream'
import { pino } from 'pino'
import { describe, expect, inject, it, vi } from 'vitest'
import { parseConfig } from '../../packages/sluice-server/src/server/config.js'
import { openStore } from '../../packages/sluice-server/src/server/store-url.js'
import { post, servicesClosedAfterEach } from '../helpers/service.js'

const service = servicesClosedAfterEach()
const TOKEN = 'lists-admin-token-0123456789'
const CONFIG = `admin: { token: ${TOKEN} }
policies:
  api:
    algorithm: fixed-window
    limit: 2
    window: 1m
    deny: { keys: [configured] }
tiers:
  pro:
    api: { limit: 10 }
`
const auth = { authorization: `Bearer ${TOKEN}` }

async function call(url: string, method: string, headers: Record<string, string> = {}, body?: unknown) {
  const res = await fetch(url, {
    method,
    headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  return { status: res.status, body: (await res.json()) as Record<string, unknown> }
}

/** A logger whose JSON lines are kept. */
function capturedLogger() {
  const lines: Record<string, unknown>[] = []
  const stream = new Writable({
    write(chunk, _, done) {
      for (const line of String(chunk).split('\n')) if (line !== '') lines.push(JSON.parse(line))
      done()
    },
  })
  return { lines, logger: pino({ level: 'info' }, stream) }
}

const stores: [string, () => Promise<Parameters<typeof service>[1]>][] = [
  ['memory', async () => ({})],
  [
    'redis',
    async () => ({
      store: await openStore(`${inject('redis').url}/0`, {
        prefix: `lists-admin-${process.pid}-${Date.now()}`,
      }),
    }),
  ],
]

describe.each(stores)('/v1/lists on the %s store', (_, options) => {
  it('adds, applies, lists, removes; every change logged', async () => {
    const { lines, logger } = capturedLogger()
    const r = await service(CONFIG, { ...(await options()), logger })
    const check = async (key: string, tier?: string) =>
      (await post(`${r.url}/v1/check`, { policy: 'api', key, ...(tier === undefined ? {} : { tier }) })).body
    const put = await call(`${r.url}/v1/lists/api/deny/10.0.0.0%2F8`, 'PUT', auth, {
      ttl: '1h',
      reason: 'scraper',
    })
    expect(put.status).toBe(200)
    expect(put.body).toMatchObject({
      ok: true,
      policy: 'api',
      list: 'deny',
      entry: { entry: '10.0.0.0/8', kind: 'ip', source: 'runtime', reason: 'scraper' },
    })
    expect((await call(`${r.url}/v1/lists/api/allow/ci-runner`, 'PUT', auth)).status).toBe(200)
    // Every tier of the policy.
    expect(await check('ip:10.1.2.3')).toMatchObject({ allowed: false, reason: 'denied', listed: 'deny' })
    expect(await check('ip:10.1.2.3', 'pro')).toMatchObject({ allowed: false, reason: 'denied' })
    for (let i = 0; i < 3; i++)
      expect(await check('ci-runner')).toMatchObject({ allowed: true, listed: 'allow' })

    const listed = await call(`${r.url}/v1/lists/api`, 'GET', auth)
    expect(listed.status).toBe(200)
    expect(listed.body).toMatchObject({
      policy: 'api',
      deny: [
        { entry: 'configured', kind: 'key', source: 'config' },
        { entry: '10.0.0.0/8', kind: 'ip', source: 'runtime', reason: 'scraper' },
      ],
      allow: [{ entry: 'ci-runner', kind: 'key', source: 'runtime' }],
    })

    const removed = await call(`${r.url}/v1/lists/api/deny/10.0.0.0%2F8`, 'DELETE', auth)
    expect(removed.body).toMatchObject({ ok: true, removed: true })
    expect(await check('ip:10.1.2.3')).toMatchObject({ allowed: true })
    expect((await call(`${r.url}/v1/lists/api/deny/10.0.0.0%2F8`, 'DELETE', auth)).body).toMatchObject({
      removed: false,
    })
    const logged = lines.filter((l) => l.action === 'list_add' || l.action === 'list_remove')
    expect(logged.map((l) => [l.action, l.list, l.entry])).toEqual([
      ['list_add', 'deny', '10.0.0.0/8'],
      ['list_add', 'allow', 'ci-runner'],
      ['list_remove', 'deny', '10.0.0.0/8'],
      ['list_remove', 'deny', '10.0.0.0/8'],
    ])
    for (const l of logged)
      expect(l).toMatchObject({
        peer: expect.any(String),
        reqId: expect.any(String),
        time: expect.any(Number),
      })
  })

  it('a reload replaces the YAML lists and keeps the run-time entries', async () => {
    const r = await service(CONFIG, await options())
    await call(`${r.url}/v1/lists/api/deny/mallory`, 'PUT', auth)
    const check = async (key: string) => (await post(`${r.url}/v1/check`, { policy: 'api', key })).body
    r.service.reload(
      parseConfig(
        CONFIG.replace('keys: [configured]', 'keys: [eve]').replace(/limit: 2\n/, 'limit: 3\n'),
        'next',
      ),
    )
    // The new limiter reads the run-time entries from the store as it starts.
    await vi.waitFor(async () =>
      expect(await check('mallory')).toMatchObject({ allowed: false, reason: 'denied' }),
    )
    expect(await check('eve')).toMatchObject({ allowed: false, reason: 'denied' })
    expect(await check('configured')).toMatchObject({ allowed: true })
  })
})

describe('/v1/lists refusals', () => {
  it('401 without the token, 403 with admin off, 400 for bad entries, 404 and 405 for bad paths; nothing stored', async () => {
    const r = await service(CONFIG)
    expect((await call(`${r.url}/v1/lists/api/deny/x`, 'PUT')).status).toBe(401)
    expect(
      (await call(`${r.url}/v1/lists/api/deny/x`, 'PUT', { authorization: 'Bearer wrong-token-000000' }))
        .status,
    ).toBe(401)
    expect((await call(`${r.url}/v1/lists/api`, 'GET')).status).toBe(401)
    for (const [path, body, code] of [
      ['/v1/lists/api/deny/10.0.0.0%2F33', undefined, 'invalid_entry'],
      ['/v1/lists/api/deny/10.0.0.256', undefined, 'invalid_entry'],
      ['/v1/lists/api/deny/%E0%A4%A', undefined, 'invalid_entry'],
      [`/v1/lists/api/deny/${'k'.repeat(1025)}`, undefined, 'invalid_entry'],
      ['/v1/lists/api/deny/x', { ttl: 'soon' }, 'invalid_duration'],
      ['/v1/lists/api/deny/x', { reason: 'r'.repeat(257) }, 'invalid_entry'],
      ['/v1/lists/api/deny/x', { why: 'typo' }, 'unknown_field'],
      ['/v1/lists/nope/deny/x', undefined, 'unknown_policy'],
    ] as const) {
      const res = await call(`${r.url}${path}`, 'PUT', auth, body)
      expect([path, res.status, res.body.error]).toEqual([path, 400, code])
    }
    expect((await call(`${r.url}/v1/lists/api/block/x`, 'PUT', auth)).status).toBe(404)
    expect((await call(`${r.url}/v1/lists/api/deny`, 'PUT', auth)).status).toBe(404)
    expect((await call(`${r.url}/v1/lists/api/deny/x`, 'GET', auth)).status).toBe(405)
    expect((await call(`${r.url}/v1/lists/api`, 'GET', auth)).body).toEqual({
      policy: 'api',
      allow: [],
      deny: [{ entry: 'configured', kind: 'key', source: 'config' }],
    })
    const off = await service('policies:\n  api: { algorithm: fixed-window, limit: 2, window: 1m }\n')
    expect((await call(`${off.url}/v1/lists/api/deny/x`, 'PUT', auth)).status).toBe(403)
  })
})

describe('/v1/lists with two instances sharing a Redis', () => {
  it('an entry added through one instance applies in the other within its staleness (1 s)', async () => {
    const prefix = `lists-shared-${process.pid}-${Date.now()}`
    const open = () => openStore(`${inject('redis').url}/0`, { prefix })
    const a = await service(CONFIG, { store: await open() })
    const b = await service(CONFIG, { store: await open() })
    const denied = async (r: { url: string }) =>
      (await post(`${r.url}/v1/check`, { policy: 'api', key: 'ip:198.51.100.9' })).body.reason === 'denied'
    expect(await denied(b)).toBe(false)
    expect((await call(`${a.url}/v1/lists/api/deny/198.51.100.0%2F24`, 'PUT', auth)).status).toBe(200)
    expect(await denied(a)).toBe(true)
    await vi.waitFor(async () => expect(await denied(b)).toBe(true), { timeout: 5_000, interval: 20 })
    expect((await call(`${b.url}/v1/lists/api/deny/198.51.100.0%2F24`, 'DELETE', auth)).body).toMatchObject({
      removed: true,
    })
    await vi.waitFor(async () => expect(await denied(a)).toBe(false), { timeout: 5_000, interval: 20 })
  })
})
