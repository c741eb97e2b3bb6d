// One behavioural table, run against every adapter through real listening servers.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import type { DecisionInfo, HttpLimiterOptions, HttpLogger } from '../../packages/sluice/src/http/index.js'
import { createHttpLimiter } from '../../packages/sluice/src/http/index.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { adapters, call, type Listen, type Reply, type Running } from './servers.js'

const policies = {
  perIp: { algorithm: 'sliding-window-log', limit: 3, window: '1m' },
  wideIp: { algorithm: 'sliding-window-log', limit: 10, window: '1m' },
  perUser: { algorithm: 'sliding-window-log', limit: 2, window: '1m' },
  one: { algorithm: 'sliding-window-log', limit: 1, window: '1m' },
  perRoute: { algorithm: 'sliding-window-log', limit: 10, window: '1m' },
  userFree: { algorithm: 'sliding-window-log', limit: 2, window: '1m' },
  userPro: { algorithm: 'sliding-window-log', limit: 5, window: '1m' },
} as const

type Options = Omit<HttpLimiterOptions, 'limiter'>

interface Log {
  warn: { details: object; message: string }[]
  error: { details: object; message: string }[]
}

function capture(): { logger: HttpLogger; log: Log } {
  const log: Log = { warn: [], error: [] }
  return {
    log,
    logger: {
      warn: (details, message) => log.warn.push({ details, message }),
      error: (details, message) => log.error.push({ details, message }),
    },
  }
}

const user = (header: string) => (r: { header(name: string): string | undefined }) => r.header(header)
const socketDir = mkdtempSync(join(tmpdir(), 'sluice-http-'))
let sockets = 0
afterAll(() => rmSync(socketDir, { recursive: true, force: true }))

for (const adapter of adapters) {
  describe(`HTTP behaviour: ${adapter.name}`, () => {
    let running: Running | undefined
    afterEach(async () => {
      await running?.close()
      running = undefined
    })

    async function start(options: Options, listen: Listen = { port: 0 }) {
      const limiter = createLimiter({ policies })
      const http = createHttpLimiter({ limiter, ...options })
      running = await adapter.start(http, listen)
      const target = running.target
      return (path: string, init: { method?: string; headers?: Record<string, string> } = {}) =>
        call(target, path, init)
    }

    it('sends both header families on every response, then a 429 with the JSON body', async () => {
      const get = await start({ rules: [{ policy: 'perIp', key: 'ip' }] })
      const before = Math.floor(Date.now() / 1000)
      for (let i = 1; i <= 3; i++) {
        const r = await get('/hello')
        expect(r.status).toBe(200)
        expect(r.headers['x-ratelimit-limit']).toBe('3')
        expect(r.headers['x-ratelimit-remaining']).toBe(String(3 - i))
        const reset = Number(r.headers['x-ratelimit-reset'])
        expect(reset).toBeGreaterThanOrEqual(before + 1)
        // Within the window (and a second of rounding) of now, however long the request took.
        expect(reset).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 61)
        expect(r.headers['ratelimit-policy']).toBe('"perIp";q=3;w=60')
        expect(r.headers.ratelimit).toMatch(new RegExp(`^"perIp";r=${3 - i};t=([1-9]|[1-5]\\d|60)$`))
        expect(r.headers['retry-after']).toBeUndefined()
      }
      const denied = await get('/hello')
      expect(denied.status).toBe(429)
      expect(denied.headers['content-type']).toMatch(/^application\/json/)
      const retryAfter = Number(denied.headers['retry-after'])
      expect(retryAfter).toBeGreaterThanOrEqual(1)
      expect(retryAfter).toBeLessThanOrEqual(60)
      expect(denied.headers['x-ratelimit-remaining']).toBe('0')
      expect(JSON.parse(denied.body)).toEqual({
        error: 'rate_limit_exceeded',
        message: `Too many requests. Please try again in ${retryAfter} ${retryAfter === 1 ? 'second' : 'seconds'}.`,
        retry_after: retryAfter,
        policy: 'perIp',
      })
      expect(running?.handled()).toBe(3)
    })

    it('checks layers all or nothing, names the denying layer, headlines the closest layer', async () => {
      const get = await start({
        rules: [
          { policy: 'wideIp', key: 'ip' },
          { policy: 'perUser', key: 'user' },
        ],
        user: user('x-user'),
      })
      expect((await get('/hello', { headers: { 'x-user': 'a' } })).status).toBe(200)
      expect((await get('/hello', { headers: { 'x-user': 'a' } })).status).toBe(200)
      const denied = await get('/hello', { headers: { 'x-user': 'a' } })
      expect(denied.status).toBe(429)
      expect(JSON.parse(denied.body).policy).toBe('perUser')
      // The refused request charged no layer: the IP layer has spent 2 of 10, and now 3.
      const b = await get('/hello', { headers: { 'x-user': 'b' } })
      expect(b.status).toBe(200)
      expect(b.headers['ratelimit-policy']).toBe('"wideIp";q=10;w=60, "perUser";q=2;w=60')
      expect(b.headers.ratelimit).toMatch(/^"wideIp";r=7;t=\d+, "perUser";r=1;t=\d+$/)
      expect(b.headers['x-ratelimit-limit']).toBe('2')
      expect(b.headers['x-ratelimit-remaining']).toBe('1')
      // Anonymous: the user layer does not apply.
      const anonymous = await get('/hello')
      expect(anonymous.headers['ratelimit-policy']).toBe('"wideIp";q=10;w=60')
      expect(anonymous.headers['x-ratelimit-remaining']).toBe('6')
    })

    it('keys routes by pattern, never the raw URL, and charges the per-route cost', async () => {
      const get = await start({ rules: [{ policy: 'perRoute', key: ['ip', 'route'] }] })
      expect((await get('/users/1')).headers['x-ratelimit-remaining']).toBe('9')
      expect((await get('/users/2')).headers['x-ratelimit-remaining']).toBe('8')
      expect((await get('/hello')).headers['x-ratelimit-remaining']).toBe('9')
      const first = await get('/reports', { method: 'POST' })
      expect(first.status).toBe(200)
      expect(first.headers['x-ratelimit-remaining']).toBe('5')
      expect((await get('/reports', { method: 'POST' })).headers['x-ratelimit-remaining']).toBe('0')
      expect((await get('/reports', { method: 'POST' })).status).toBe(429)
    })

    it('resolves tiers through a cached async resolver with a default tier', async () => {
      const { logger, log } = capture()
      let calls = 0
      const tierOf: Record<string, string> = { p: 'pro', f: 'free', g: 'gold' }
      const get = await start({
        rules: [{ policy: { free: 'userFree', pro: 'userPro' }, key: 'user' }],
        user: user('x-user'),
        logger,
        tiers: {
          default: 'free',
          async resolve(request) {
            calls++
            const id = request.header('x-user') ?? ''
            if (id === 'boom') throw new Error('tier service down')
            return tierOf[id]
          },
        },
      })
      const as = (id: string) => get('/hello', { headers: { 'x-user': id } })
      expect((await as('p')).headers['x-ratelimit-limit']).toBe('5')
      expect((await as('p')).headers['x-ratelimit-remaining']).toBe('3')
      expect((await as('f')).headers['x-ratelimit-limit']).toBe('2')
      // An unknown tier name falls back to the default tier.
      expect((await as('g')).headers['ratelimit-policy']).toBe('"userFree";q=2;w=60')
      expect(calls).toBe(3) // p resolved once, then cached
      // A throwing resolver: default tier, logged, never a crash or a bypass.
      expect((await as('boom')).headers['x-ratelimit-limit']).toBe('2')
      expect((await as('boom')).status).toBe(200)
      expect((await as('boom')).status).toBe(429)
      expect(log.error.some((e) => e.message.includes('tier resolver failed'))).toBe(true)
    })

    it('answers 500 with a logged error when a failing tier resolver is set to fail', async () => {
      const { logger, log } = capture()
      const get = await start({
        rules: [{ policy: { free: 'userFree' }, key: 'ip' }],
        logger,
        tiers: { default: 'free', onError: 'fail', resolve: () => Promise.reject(new Error('down')) },
      })
      const r = await get('/hello')
      expect(r.status).toBe(500)
      expect(JSON.parse(r.body).error).toBe('rate_limiter_error')
      expect(log.error.length).toBeGreaterThan(0)
      expect(running?.handled()).toBe(0)
    })

    it('shadow mode decides, counts, logs and sets headers but never refuses', async () => {
      const { logger, log } = capture()
      const seen: DecisionInfo[] = []
      const get = await start({
        rules: [{ policy: 'one', key: 'ip' }],
        shadow: true,
        logger,
        onDecision: (info) => seen.push(info),
      })
      for (let i = 0; i < 3; i++) {
        const r = await get('/hello')
        expect(r.status).toBe(200)
        expect(r.headers['x-ratelimit-remaining']).toBe('0')
        expect(r.headers['retry-after']).toBeUndefined()
      }
      expect(running?.handled()).toBe(3)
      expect(log.warn.filter((w) => w.message.includes('shadow')).length).toBe(2)
      expect(seen.map((s) => s.decision.allowed)).toEqual([true, false, false])
    })

    it('reads X-Forwarded-For only through trusted proxies, grouping IPv6 by /64', async () => {
      const get = await start({ rules: [{ policy: 'one', key: 'ip' }], trustProxy: ['loopback'] })
      const from = (xff: string) => get('/hello', { headers: { 'x-forwarded-for': xff } })
      expect((await from('203.0.113.5')).status).toBe(200)
      expect((await from('203.0.113.6')).status).toBe(200)
      expect((await from('203.0.113.5')).status).toBe(429)
      // A client-supplied entry to the left of the untrusted hop changes nothing.
      expect((await from('198.51.100.1, 203.0.113.5')).status).toBe(429)
      expect((await from('2001:db8:1:2::1')).status).toBe(200)
      expect((await from('2001:db8:1:2:ffff:ffff:ffff:ffff')).status).toBe(429)
      expect((await from('2001:db8:1:3::1')).status).toBe(200)
      // Malformed: the walk stops at the trusted peer, which then shares one budget.
      expect((await from('not-an-ip')).status).toBe(200)
      expect((await from('999.1.1.1, , garbage')).status).toBe(429)
      expect((await get('/hello')).status).toBe(429)
    })

    it('ignores forwarding headers from an untrusted peer', async () => {
      const get = await start({ rules: [{ policy: 'one', key: 'ip' }], trustProxy: ['10.0.0.0/8'] })
      expect((await get('/hello', { headers: { 'x-forwarded-for': '203.0.113.1' } })).status).toBe(200)
      expect((await get('/hello', { headers: { 'x-forwarded-for': '203.0.113.2' } })).status).toBe(429)
      expect((await get('/hello', { headers: { forwarded: 'for=203.0.113.3' } })).status).toBe(429)
    })

    it('skips listed paths and refuses denied clients with 403', async () => {
      const get = await start({
        rules: [{ policy: 'one', key: 'ip' }],
        trustProxy: ['loopback'],
        skip: { paths: ['/health'] },
        deny: { ips: ['203.0.113.0/24'] },
      })
      for (let i = 0; i < 3; i++) {
        const health = await get('/health')
        expect(health.status).toBe(200)
        expect(health.headers['x-ratelimit-limit']).toBeUndefined()
      }
      const denied = await get('/hello', { headers: { 'x-forwarded-for': '203.0.113.9' } })
      expect(denied.status).toBe(403)
      expect(JSON.parse(denied.body).error).toBe('forbidden')
      expect((await get('/hello', { headers: { 'x-forwarded-for': '198.51.100.9' } })).status).toBe(200)
    })

    it('limits unix-socket requests (no IP) on one shared budget, or refuses them with 400', async () => {
      const path = join(socketDir, `s${sockets++}.sock`)
      const get = await start({ rules: [{ policy: 'perIp', key: 'ip' }] }, { path })
      const statuses: number[] = []
      for (let i = 0; i < 4; i++) statuses.push((await get('/hello')).status)
      expect(statuses).toEqual([200, 200, 200, 429])
      await running?.close()
      const rejectPath = join(socketDir, `s${sockets++}.sock`)
      const strict = await start(
        { rules: [{ policy: 'perIp', key: 'ip' }], missingIp: 'reject' },
        { path: rejectPath },
      )
      const r = await strict('/hello')
      expect(r.status).toBe(400)
      expect(JSON.parse(r.body).error).toBe('bad_request')
    })

    it('limits a 10 KB user id like any other (hashed key), without a crash', async () => {
      const seen: DecisionInfo[] = []
      const get = await start({
        rules: [{ policy: 'one', key: 'user' }],
        user: user('x-user'),
        onDecision: (info) => seen.push(info),
      })
      const huge = 'u'.repeat(10_240)
      expect((await get('/hello', { headers: { 'x-user': huge } })).status).toBe(200)
      expect((await get('/hello', { headers: { 'x-user': huge } })).status).toBe(429)
      expect((await get('/hello', { headers: { 'x-user': `${huge}x` } })).status).toBe(200)
      expect(seen.every((s) => s.decision.key.length <= 256)).toBe(true)
    })

    it('answers 500 (logged) when a key callback throws, or lets it through with onError open', async () => {
      const { logger, log } = capture()
      const failing = {
        rules: [{ policy: 'one', key: 'user' }],
        user: () => {
          throw new Error('session store down')
        },
        logger,
      } satisfies Options
      let get = await start(failing)
      const r: Reply = await get('/hello')
      expect(r.status).toBe(500)
      expect(log.error).toHaveLength(1)
      await running?.close()
      get = await start({ ...failing, onError: 'open' })
      expect((await get('/hello')).status).toBe(200)
      expect(log.error).toHaveLength(2)
    })

    it('offers application/problem+json and a custom handler hook', async () => {
      let get = await start({ rules: [{ policy: 'one', key: 'ip' }], body: 'problem' })
      await get('/hello')
      const problem = await get('/hello')
      expect(problem.status).toBe(429)
      expect(problem.headers['content-type']).toMatch(/^application\/problem\+json/)
      expect(JSON.parse(problem.body)).toMatchObject({
        status: 429,
        title: 'Too Many Requests',
        policy: 'one',
      })
      await running?.close()
      get = await start({
        rules: [{ policy: 'one', key: 'ip' }],
        onLimited: ({ headers }) => ({
          status: 503,
          headers: { ...headers, 'Content-Type': 'text/plain' },
          body: 'slow down',
        }),
      })
      await get('/hello')
      const custom = await get('/hello')
      expect(custom.status).toBe(503)
      expect(custom.body).toBe('slow down')
      expect(Number(custom.headers['retry-after'])).toBeGreaterThanOrEqual(1)
    })
  })
}
