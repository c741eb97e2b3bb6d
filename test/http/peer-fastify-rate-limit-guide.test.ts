// The setups of docs/migrating-from-fastify-rate-limit.md side by side with @fastify/rate-limit: a
// global limit (its x-ratelimit-* headers, and its draft headers), limits per route, `ban`, and a
// Redis shared by two instances. Each setup runs as two Fastify apps on 127.0.0.1, one per plugin,
// with the same requests; the answers are equal where the guide says they match (reset and retry
// seconds within the time between the two apps' first requests), and each difference it states is
// pinned.
import { readFileSync } from 'node:fs'
import rateLimit from '@fastify/rate-limit'
import Fastify, { type FastifyInstance } from 'fastify'
import type { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { sluice } from '../../packages/sluice/src/adapters/fastify.js'
import type { HeaderFamilies } from '../../packages/sluice/src/index.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { redisStore } from '../../packages/sluice/src/stores/redis/index.js'
import { freshPrefix, ioredis } from '../helpers/redis-clients.js'
import { call, type Reply } from './servers.js'

/** The guide these setups come from: each option the tests give either side is written there. */
const GUIDE = readFileSync(
  new URL('../../docs/migrating-from-fastify-rate-limit.md', import.meta.url),
  'utf8',
)

const apps: FastifyInstance[] = []
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close()
})

async function listen(app: FastifyInstance): Promise<{ port: number }> {
  apps.push(app)
  app.get('/', async () => ({ hello: 'world' }))
  await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('no port')
  return { port: address.port }
}

/** The guide's global setup: 100 requests a minute per client address. */
async function globalPeer(options: { enableDraftSpec?: boolean } = {}) {
  const app = Fastify()
  await app.register(rateLimit, { max: 100, timeWindow: '1 minute', ...options })
  return listen(app)
}
async function globalSluice(headers: HeaderFamilies) {
  const limiter = createLimiter({
    policies: { perIp: { algorithm: 'fixed-window', limit: 100, window: '1m' } },
  })
  const app = Fastify()
  await app.register(sluice, { limiter, rules: [{ policy: 'perIp', key: 'ip' }], headers })
  return listen(app)
}

const RESET = /^(x-ratelimit-reset|ratelimit-reset|retry-after)$/

/** The rate-limit headers of a reply, the seconds ones apart. */
function limitHeaders(reply: Reply): { same: Record<string, string>; seconds: Record<string, number> } {
  const same: Record<string, string> = {}
  const seconds: Record<string, number> = {}
  for (const [name, value] of Object.entries(reply.headers)) {
    if (!/^(ratelimit|x-ratelimit|retry-after)/.test(name)) continue
    if (RESET.test(name)) seconds[name] = Number(value)
    else same[name] = String(value)
  }
  return { same, seconds }
}

describe('docs/migrating-from-fastify-rate-limit.md: a global limit', () => {
  it('headers: "legacy": the same status and x-ratelimit-limit/-remaining, Retry-After; x-ratelimit-reset is seconds there, a Unix time here', async () => {
    const peer = await globalPeer()
    const ours = await globalSluice('legacy')
    const firstAt = Date.now()
    for (let i = 1; i <= 101; i++) {
      const theirs = await call(peer, '/')
      const mine = await call(ours, '/')
      const what = `request ${i}`
      const slack = Math.ceil((Date.now() - firstAt) / 1000) + 1
      expect(theirs.status, what).toBe(i <= 100 ? 200 : 429)
      expect(mine.status, what).toBe(theirs.status)
      const a = limitHeaders(theirs)
      const b = limitHeaders(mine)
      expect(b.same, what).toEqual(a.same)
      expect(Object.keys(b.seconds).sort(), what).toEqual(Object.keys(a.seconds).sort())
      // @fastify/rate-limit: seconds from now; Sluice: the instant, in Unix seconds.
      const theirReset = a.seconds['x-ratelimit-reset'] as number
      const myReset = b.seconds['x-ratelimit-reset'] as number
      expect(theirReset, what).toBeLessThanOrEqual(60)
      expect(Math.abs(myReset - Math.ceil(Date.now() / 1000) - theirReset), what).toBeLessThanOrEqual(slack)
      if (i === 101) {
        expect(
          Math.abs((b.seconds['retry-after'] as number) - (a.seconds['retry-after'] as number)),
        ).toBeLessThanOrEqual(slack)
        // The 429's body: Fastify's error JSON there, Sluice's own here (or `message`).
        expect(JSON.parse(theirs.body)).toMatchObject({ statusCode: 429, error: 'Too Many Requests' })
        expect(JSON.parse(mine.body)).toMatchObject({ error: 'rate_limit_exceeded', policy: 'perIp' })
      }
    }
  })

  it('headers: "draft-6" against enableDraftSpec: the same ratelimit-limit/-remaining/-reset and Retry-After, and a RateLimit-Policy only here', async () => {
    const peer = await globalPeer({ enableDraftSpec: true })
    const ours = await globalSluice('draft-6')
    const firstAt = Date.now()
    for (let i = 1; i <= 101; i++) {
      const theirs = await call(peer, '/')
      const mine = await call(ours, '/')
      const what = `request ${i}`
      const slack = Math.ceil((Date.now() - firstAt) / 1000) + 1
      expect(mine.status, what).toBe(theirs.status)
      const a = limitHeaders(theirs)
      const b = limitHeaders(mine)
      expect(b.same, what).toEqual({ ...a.same, 'ratelimit-policy': '100;w=60' })
      expect(Object.keys(b.seconds).sort(), what).toEqual(Object.keys(a.seconds).sort())
      for (const [name, n] of Object.entries(a.seconds))
        expect(Math.abs((b.seconds[name] as number) - n), `${what}: ${name}`).toBeLessThanOrEqual(slack)
    }
  })
  it('a 404 is limited by the global rule here; there only with preHandler: fastify.rateLimit() on the not-found handler', async () => {
    const peer = await globalPeer()
    const ours = await globalSluice('legacy')
    const theirs = await call(peer, '/nowhere')
    const mine = await call(ours, '/nowhere')
    expect([theirs.status, mine.status]).toEqual([404, 404])
    expect(theirs.headers['x-ratelimit-limit']).toBeUndefined()
    expect(mine.headers['x-ratelimit-limit']).toBe('100')
  })
})

describe('docs/migrating-from-fastify-rate-limit.md: limits per route', () => {
  it('global: false and config.rateLimit on one route, against rules: [] and config.sluice.rules: the same answers; an unlimited route has no headers', async () => {
    const peerApp = Fastify()
    await peerApp.register(rateLimit, { global: false })
    peerApp.get('/login', { config: { rateLimit: { max: 3, timeWindow: '1 minute' } } }, async () => 'ok')
    peerApp.get('/public', async () => 'ok')
    const peer = await listen(peerApp)

    const limiter = createLimiter({
      policies: { login: { algorithm: 'fixed-window', limit: 3, window: '1m' } },
    })
    const ourApp = Fastify()
    await ourApp.register(sluice, { limiter, rules: [], headers: 'legacy' })
    ourApp.get(
      '/login',
      { config: { sluice: { rules: [{ policy: 'login', key: 'ip' }] } } },
      async () => 'ok',
    )
    ourApp.get('/public', async () => 'ok')
    const ours = await listen(ourApp)

    for (let i = 1; i <= 4; i++) {
      const theirs = await call(peer, '/login')
      const mine = await call(ours, '/login')
      expect(theirs.status, `login ${i}`).toBe(i <= 3 ? 200 : 429)
      expect(mine.status, `login ${i}`).toBe(theirs.status)
      expect(limitHeaders(mine).same, `login ${i}`).toEqual(limitHeaders(theirs).same)
    }
    for (const reply of [await call(peer, '/public'), await call(ours, '/public')]) {
      expect(reply.status).toBe(200)
      expect(Object.keys(limitHeaders(reply).same)).toEqual([])
    }
  })

  it('a route of its own under a global limit: there it replaces the global limit, here it adds a layer (the global budget is spent too); rateLimit: false is skip: true', async () => {
    const peerApp = Fastify()
    await peerApp.register(rateLimit, { max: 5, timeWindow: '1 minute' })
    peerApp.get('/account', { config: { rateLimit: { max: 2 } } }, async () => 'ok')
    peerApp.get('/health', { config: { rateLimit: false } }, async () => 'ok')
    const peer = await listen(peerApp)

    const limiter = createLimiter({
      policies: {
        perIp: { algorithm: 'fixed-window', limit: 5, window: '1m' },
        account: { algorithm: 'fixed-window', limit: 2, window: '1m' },
      },
    })
    const ourApp = Fastify()
    await ourApp.register(sluice, { limiter, rules: [{ policy: 'perIp', key: 'ip' }], headers: 'legacy' })
    ourApp.get(
      '/account',
      { config: { sluice: { rules: [{ policy: 'account', key: 'ip' }] } } },
      async () => 'ok',
    )
    ourApp.get('/health', { config: { sluice: { skip: true } } }, async () => 'ok')
    const ours = await listen(ourApp)

    for (let i = 1; i <= 3; i++) {
      const theirs = await call(peer, '/account')
      const mine = await call(ours, '/account')
      expect(theirs.status, `account ${i}`).toBe(i <= 2 ? 200 : 429)
      expect(mine.status, `account ${i}`).toBe(theirs.status)
      // The headline is the tighter layer: the route's 2.
      expect(limitHeaders(mine).same, `account ${i}`).toEqual(limitHeaders(theirs).same)
    }
    for (let i = 0; i < 10; i++) {
      const theirs = await call(peer, '/health')
      const mine = await call(ours, '/health')
      expect([theirs.status, mine.status]).toEqual([200, 200])
      expect(Object.keys(limitHeaders(mine).same)).toEqual(Object.keys(limitHeaders(theirs).same))
      expect(Object.keys(limitHeaders(mine).same)).toEqual([])
    }
    const theirs = await call(peer, '/')
    const mine = await call(ours, '/')
    expect(theirs.headers['x-ratelimit-remaining']).toBe('4')
    expect(mine.headers['x-ratelimit-remaining']).toBe('2')
  })
})

describe('docs/migrating-from-fastify-rate-limit.md: ban', () => {
  it('ban: 2 answers 403 from the third refusal on; Sluice has no ban: blockDuration keeps answering 429, with the block in Retry-After', async () => {
    const peerApp = Fastify()
    await peerApp.register(rateLimit, { max: 3, timeWindow: '1 minute', ban: 2 })
    const peer = await listen(peerApp)

    const limiter = createLimiter({
      policies: { perIp: { algorithm: 'fixed-window', limit: 3, window: '1m', blockDuration: '5m' } },
    })
    const ourApp = Fastify()
    await ourApp.register(sluice, { limiter, rules: [{ policy: 'perIp', key: 'ip' }], headers: 'legacy' })
    const ours = await listen(ourApp)

    const theirStatus: number[] = []
    const myStatus: number[] = []
    let lastOurs: Reply | undefined
    let lastTheirs: Reply | undefined
    for (let i = 0; i < 7; i++) {
      lastTheirs = await call(peer, '/')
      lastOurs = await call(ours, '/')
      theirStatus.push(lastTheirs.status)
      myStatus.push(lastOurs.status)
    }
    expect(theirStatus).toEqual([200, 200, 200, 429, 429, 403, 403])
    expect(myStatus).toEqual([200, 200, 200, 429, 429, 429, 429])
    expect(Number(lastTheirs?.headers['retry-after'])).toBeLessThanOrEqual(60)
    expect(Number(lastOurs?.headers['retry-after'])).toBeGreaterThan(290)
  })
})

describe('docs/migrating-from-fastify-rate-limit.md: Redis', () => {
  let client: Redis
  beforeAll(() => {
    client = ioredis()
  })
  afterAll(async () => {
    await client.quit()
  })

  it('two instances on one Redis share the budget, with the same status and headers in both setups', async () => {
    const nameSpace = `${freshPrefix('fastify')}-`
    const peers = []
    for (let i = 0; i < 2; i++) {
      const app = Fastify()
      await app.register(rateLimit, { max: 100, timeWindow: '1 minute', redis: client, nameSpace })
      peers.push(await listen(app))
    }
    const prefix = freshPrefix('sluice')
    const ours = []
    for (let i = 0; i < 2; i++) {
      const store = redisStore(client, { prefix })
      await store.ready()
      const limiter = createLimiter({
        store,
        policies: { perIp: { algorithm: 'fixed-window', limit: 100, window: '1m' } },
      })
      const app = Fastify()
      await app.register(sluice, { limiter, rules: [{ policy: 'perIp', key: 'ip' }], headers: 'legacy' })
      app.addHook('onClose', () => store.close())
      ours.push(await listen(app))
    }
    for (let i = 1; i <= 101; i++) {
      const theirs = await call(peers[i % 2] as { port: number }, '/')
      const mine = await call(ours[i % 2] as { port: number }, '/')
      expect(theirs.status, `request ${i}`).toBe(i <= 100 ? 200 : 429)
      expect(mine.status, `request ${i}`).toBe(theirs.status)
      expect(limitHeaders(mine).same, `request ${i}`).toEqual(limitHeaders(theirs).same)
    }
  })
})

describe('docs/migrating-from-fastify-rate-limit.md', () => {
  it('shows the setups these tests run, option for option', () => {
    for (const written of [
      "await app.register(rateLimit, { max: 100, timeWindow: '1 minute' })",
      "policies: { perIp: { algorithm: 'fixed-window', limit: 100, window: '1m' } }",
      "await app.register(sluice, { limiter, rules: [{ policy: 'perIp', key: 'ip' }], headers: 'legacy' })",
      'await app.register(rateLimit, { global: false })',
      "{ config: { rateLimit: { max: 3, timeWindow: '1 minute' } } }",
      "policies: { login: { algorithm: 'fixed-window', limit: 3, window: '1m' } }",
      "await app.register(sluice, { limiter, rules: [], headers: 'legacy' })",
      "{ config: { sluice: { rules: [{ policy: 'login', key: 'ip' }] } } }",
      'config: { rateLimit: { max: 2 } }',
      "config: { sluice: { rules: [{ policy: 'account', key: 'ip' }] } }",
      'config: { rateLimit: false }',
      'config: { sluice: { skip: true } }',
      "{ max: 3, timeWindow: '1 minute', ban: 2 }",
      "policies: { perIp: { algorithm: 'fixed-window', limit: 3, window: '1m', blockDuration: '5m' } }",
      "{ max: 100, timeWindow: '1 minute', redis, nameSpace: 'rl-' }",
      "redisStore(redis, { prefix: 'rl' })",
      "headers: 'draft-6'",
      'enableDraftSpec: true',
    ])
      expect(GUIDE).toContain(written)
  })
})
