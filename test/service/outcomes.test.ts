// The service's counting by outcome and near-limit signal: `nearLimit:` on a YAML policy shows on
// /v1/check; `outcomes.countIf` gives /v1/authz's allowed answers a ticket, which POST /v1/outcome
// turns into a refund or nothing, once, from the response's status; through a real nginx too, with
// the shipped examples/nginx/sluice-outcome.conf.
import type { Server } from 'node:http'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, inject, it, vi } from 'vitest'
import { InvalidConfigError } from '../../packages/sluice/src/errors.js'
import { parseConfig } from '../../packages/sluice-server/src/server/config.js'
import { openStore } from '../../packages/sluice-server/src/server/store-url.js'
import { startShippedNginx } from '../helpers/nginx-harness.js'
import { freePort, get, post, servicesClosedAfterEach } from '../helpers/service.js'

const start = servicesClosedAfterEach()
const KEY = 'ip:127.0.0.1'

const LOGIN_YAML = [
  'policies:',
  '  login: { algorithm: fixed-window, limit: 3, window: 15m }',
  '  api: { algorithm: fixed-window, limit: 10, window: 1m, nearLimit: 0.8 }',
  'outcomes:',
  '  countIf:',
  "    login: { status: [401, 403, '5xx'] }",
  '',
].join('\n')

function configError(yaml: string): InvalidConfigError {
  try {
    parseConfig(yaml, 'conf.yaml')
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidConfigError)
    return error as InvalidConfigError
  }
  throw new Error('expected the config to be refused')
}

async function remaining(url: string, policy: string): Promise<unknown> {
  return (await post(`${url}/v1/peek`, { policy, key: KEY })).body.remaining
}

async function outcome(url: string, query: string) {
  const res = await fetch(`${url}/v1/outcome?${query}`, { method: 'POST' })
  return { status: res.status, body: (await res.json()) as Record<string, unknown> }
}

describe('nearLimit in the service', () => {
  it('/v1/check answers nearLimit from the line on; a policy without it never does', async () => {
    const { url } = await start(LOGIN_YAML)
    const seen: unknown[] = []
    for (let i = 0; i < 11; i++)
      seen.push((await post(`${url}/v1/check`, { policy: 'api', key: 'k' })).body.nearLimit)
    expect(seen).toEqual([...Array(7).fill(undefined), true, true, true, undefined])
    expect(
      (await post(`${url}/v1/check`, { policy: 'login', key: 'k', cost: 3 })).body.nearLimit,
    ).toBeUndefined()
  })

  it('a nearLimit outside (0, 1) is refused with its file, line and path', () => {
    const error = configError(
      'policies:\n  api: { algorithm: fixed-window, limit: 10, window: 1m, nearLimit: 80 }\n',
    )
    expect(error.message).toMatch(
      /conf\.yaml:2.*policies\.api\.nearLimit: must be a fraction between 0 and 1/,
    )
  })
})

describe('outcomes.countIf: config', () => {
  it('takes statuses and classes, and refuses anything else with its file, line and path', () => {
    const config = parseConfig(LOGIN_YAML, 'conf.yaml')
    const countIf = config.outcomes.countIf.get('login')!
    expect([200, 401, 403, 404, 500, 503].map(countIf)).toEqual([false, true, true, false, true, true])
    expect(config.outcomes.countIf.has('api')).toBe(false)
    expect(config.outcomes).toMatchObject({ maxTickets: 10_000, ticketTtlMs: 60_000 })
    const base = 'policies:\n  login: { algorithm: fixed-window, limit: 3, window: 15m }\noutcomes:\n'
    const cases: [string, RegExp][] = [
      ['  countIf:\n    logins: { status: [401] }\n', /outcomes\.countIf\.logins: no policy named logins/],
      ['  countIf:\n    login: { status: [] }\n', /outcomes\.countIf\.login\.status: /],
      ["  countIf:\n    login: { status: ['6xx'] }\n", /outcomes\.countIf\.login\.status\.0: /],
      ['  countIf:\n    login: { status: [99] }\n', /outcomes\.countIf\.login\.status\.0: /],
      ['  countIf:\n    login: { status: 401 }\n', /outcomes\.countIf\.login\.status: /],
      ['  countIf:\n    login: { statuses: [401] }\n', /outcomes\.countIf\.login\.status: is required/],
      ['  maxTickets: 0\n', /outcomes\.maxTickets: /],
      ['  ticketTtl: forever\n', /outcomes\.ticketTtl: /],
    ]
    for (const [yaml, message] of cases) expect(configError(base + yaml).message, yaml).toMatch(message)
  })
})

describe('outcomes.countIf: /v1/authz tickets and POST /v1/outcome', () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  it('a status that does not count gives the units back; one that counts keeps them', async () => {
    const { url } = await start(LOGIN_YAML)
    const first = await get(`${url}/v1/authz?policy=login`)
    const ticket = first.headers.get('x-sluice-ticket')
    expect(ticket).toMatch(/^[A-Za-z0-9_-]{24}$/)
    expect(await remaining(url, 'login')).toBe(2)
    expect(await outcome(url, `ticket=${ticket}&status=200`)).toEqual({
      status: 200,
      body: { counted: false, refunded: 1 },
    })
    expect(await remaining(url, 'login')).toBe(3)
    const second = (await get(`${url}/v1/authz?policy=login`)).headers.get('x-sluice-ticket')
    expect(await outcome(url, `ticket=${second}&status=503`)).toEqual({
      status: 200,
      body: { counted: true, refunded: 0 },
    })
    expect(await remaining(url, 'login')).toBe(2)
    // No ticket for a policy without countIf, nor for a denial.
    expect((await get(`${url}/v1/authz?policy=api`)).headers.get('x-sluice-ticket')).toBeNull()
    await get(`${url}/v1/authz?policy=login`)
    await get(`${url}/v1/authz?policy=login`)
    const denied = await get(`${url}/v1/authz?policy=login`)
    expect(denied.status).toBe(429)
    expect(denied.headers.get('x-sluice-ticket')).toBeNull()
  })

  it('on a real Redis store: the ticket gives back there, and nearLimit shows', async () => {
    const store = await openStore(`${inject('redis').url}/0`, { prefix: `outcomes-${process.pid}` })
    const { url } = await start(LOGIN_YAML, { store })
    const ticket = (await get(`${url}/v1/authz?policy=login`)).headers.get('x-sluice-ticket')
    expect(await remaining(url, 'login')).toBe(2)
    expect((await outcome(url, `ticket=${ticket}&status=201`)).body).toEqual({ counted: false, refunded: 1 })
    expect(await remaining(url, 'login')).toBe(3)
    const near = []
    for (let i = 0; i < 9; i++)
      near.push((await post(`${url}/v1/check`, { policy: 'api', key: 'r' })).body.nearLimit)
    expect(near.slice(6)).toEqual([undefined, true, true])
  })

  it('refuses unknown and reused tickets and bad statuses, changing nothing', async () => {
    const { url } = await start(LOGIN_YAML)
    const ticket = (await get(`${url}/v1/authz?policy=login`)).headers.get('x-sluice-ticket')!
    expect(await outcome(url, `ticket=${ticket}&status=2OO`)).toMatchObject({
      status: 400,
      body: { error: 'invalid_status' },
    })
    expect(await outcome(url, `ticket=${ticket}&status=600`)).toMatchObject({
      status: 400,
      body: { error: 'invalid_status' },
    })
    expect(await outcome(url, 'ticket=abc&status=200')).toMatchObject({
      status: 400,
      body: { error: 'invalid_ticket' },
    })
    expect(await outcome(url, `ticket=${'A'.repeat(24)}&status=200`)).toMatchObject({
      status: 404,
      body: { error: 'unknown_ticket' },
    })
    expect(await outcome(url, `ticket=${ticket}&status=200&extra=1`)).toMatchObject({
      status: 400,
      body: { error: 'unknown_field' },
    })
    expect(await remaining(url, 'login')).toBe(2)
    // The refused calls left the ticket as it was: it still gives back, once.
    expect((await outcome(url, `ticket=${ticket}&status=200`)).body).toEqual({ counted: false, refunded: 1 })
    expect(await outcome(url, `ticket=${ticket}&status=200`)).toMatchObject({
      status: 404,
      body: { error: 'unknown_ticket' },
    })
    expect(await remaining(url, 'login')).toBe(3)
    const wrongMethod = await fetch(`${url}/v1/outcome?ticket=${ticket}&status=200`)
    expect(wrongMethod.status).toBe(405)
  })

  it('holds at most maxTickets (the oldest go first) for at most ticketTtl', async () => {
    vi.useFakeTimers({ toFake: ['Date'] })
    vi.setSystemTime(1_800_000_000_000)
    const { url } = await start(
      `${LOGIN_YAML}  maxTickets: 2\n  ticketTtl: 30s\n`.replace('limit: 3,', 'limit: 9,'),
    )
    const tickets: string[] = []
    for (let i = 0; i < 3; i++)
      tickets.push((await get(`${url}/v1/authz?policy=login`)).headers.get('x-sluice-ticket')!)
    expect((await outcome(url, `ticket=${tickets[0]}&status=200`)).status).toBe(404)
    expect((await outcome(url, `ticket=${tickets[1]}&status=200`)).body).toEqual({
      counted: false,
      refunded: 1,
    })
    vi.setSystemTime(1_800_000_030_000)
    expect((await outcome(url, `ticket=${tickets[2]}&status=200`)).status).toBe(404)
    expect(await remaining(url, 'login')).toBe(7)
  })
})

describe('outcomes.countIf through a real nginx (examples/nginx/sluice-outcome.conf)', () => {
  let upstream: Server | undefined
  afterEach(async () => {
    const server = upstream
    upstream = undefined
    if (server !== undefined) await new Promise((resolve) => server.close(resolve))
  })

  it('only failed logins count: post_action reports each status with its ticket', async () => {
    const { url } = await start(LOGIN_YAML)
    upstream = createServer((req, res) => {
      res.writeHead(req.url === '/login?password=right' ? 200 : 401).end('app')
    })
    await new Promise<void>((resolve) => upstream!.listen(0, '127.0.0.1', resolve))
    const nginx = await startShippedNginx(
      {
        sluice: Number(new URL(url).port),
        upstream: (upstream.address() as AddressInfo).port,
        nginx: await freePort(),
      },
      'sluice-outcome.conf',
    )
    try {
      const through = async (path: string) => (await fetch(`http://127.0.0.1:${nginx.port}${path}`)).status
      /** nginx reports the outcome after the response: wait until the service has it. */
      const settled = async (expected: number) => {
        for (let i = 0; i < 200 && (await remaining(url, 'login')) !== expected; i++)
          await new Promise((resolve) => setTimeout(resolve, 10))
        expect(await remaining(url, 'login')).toBe(expected)
      }
      for (let i = 0; i < 4; i++) {
        expect(await through('/login?password=right')).toBe(200)
        await settled(3)
      }
      const failed = []
      for (let i = 0; i < 4; i++) failed.push(await through('/login?password=wrong'))
      expect(failed).toEqual([401, 401, 401, 429])
      await settled(0)
      // Over the limit, a login that would have succeeded is refused before the app sees it.
      expect(await through('/login?password=right')).toBe(429)
    } finally {
      await nginx.stop()
    }
  })
})
