// The typical setup of docs/migrating-from-express-rate-limit.md side by side: express-rate-limit as
// its users write it (100 requests per 15 minutes, draft-7 headers, a signed-in user by id and
// everyone else by address) and the guide's Sluice setup, each in its own Express app on 127.0.0.1,
// the same requests to both. Where the guide says they match, the answers are equal (reset seconds
// within the time between the two apps' first requests); where it says they differ, the difference
// is pinned.
import { readFileSync } from 'node:fs'
import express from 'express'
import { ipKeyGenerator, rateLimit } from 'express-rate-limit'
import { afterEach, describe, expect, it } from 'vitest'
import { sluice } from '../../packages/sluice/src/adapters/express.js'
import { ipKey } from '../../packages/sluice/src/http/index.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { appServers, call, type Reply } from './servers.js'

/** The guide these setups come from: each option the tests give either side is written there. */
const GUIDE = readFileSync(
  new URL('../../docs/migrating-from-express-rate-limit.md', import.meta.url),
  'utf8',
)

const { serve, closeAll } = appServers()
afterEach(closeAll)

interface SignedIn {
  user?: { id: string }
}

/** The app's own sign-in, a stand-in for a session or token check: `x-user` names the user. */
function app(): express.Express {
  const out = express()
  out.use((req, _res, next) => {
    const id = req.header('x-user')
    if (id !== undefined) (req as express.Request & SignedIn).user = { id }
    next()
  })
  return out
}

/** express-rate-limit, as the guide's "before" block writes it. */
function peerApp(): express.Express {
  const out = app()
  out.use(
    rateLimit({
      windowMs: 15 * 60 * 1000,
      limit: 100,
      standardHeaders: 'draft-7',
      legacyHeaders: false,
      keyGenerator: (req) => (req as express.Request & SignedIn).user?.id ?? ipKeyGenerator(req.ip ?? ''),
    }),
  )
  out.get('/', (_req, res) => res.send('hello'))
  return out
}

function guideLimiter() {
  return createLimiter({
    policies: { '100-in-15min': { algorithm: 'fixed-window', limit: 100, window: '15m' } },
  })
}

/** The guide's Sluice block. */
function sluiceApp(limiter = guideLimiter()): express.Express {
  const userId = (raw: unknown): string | undefined => (raw as SignedIn).user?.id
  const out = app()
  out.use(
    sluice({
      limiter,
      rules: [
        {
          policy: '100-in-15min',
          key: (req) => {
            const id = userId(req.raw)
            return id === undefined ? ipKey(req) : `user:${id}`
          },
        },
      ],
      headers: 'draft-7',
      ipv6Prefix: 56,
      message: 'Too many requests, please try again later.',
    }),
  )
  out.get('/', (_req, res) => res.send('hello'))
  return out
}

/** The rate-limit headers of a reply, reset and retry seconds replaced by N (compared apart). */
function limitHeaders(reply: Reply): { headers: Record<string, string>; seconds: number[] } {
  const headers: Record<string, string> = {}
  const seconds: number[] = []
  for (const [name, value] of Object.entries(reply.headers)) {
    if (!/^(ratelimit|x-ratelimit|retry-after)/.test(name)) continue
    // Seconds: the whole value of these three, the `reset` parameter of draft-7's RateLimit.
    const pattern = /^(retry-after|x-ratelimit-reset|ratelimit-reset)$/.test(name)
      ? /^()(\d+)$/
      : /(reset=)(\d+)$/
    headers[name] = String(value).replace(pattern, (_m, prefix: string, n: string) => {
      seconds.push(Number(n))
      return `${prefix}N`
    })
  }
  return { headers, seconds }
}

function expectSame(peer: Reply, ours: Reply, slackSeconds: number, what: string): void {
  expect(ours.status, what).toBe(peer.status)
  expect(ours.body, what).toBe(peer.body)
  const theirs = limitHeaders(peer)
  const mine = limitHeaders(ours)
  expect(mine.headers, what).toEqual(theirs.headers)
  expect(mine.seconds.length, what).toBe(theirs.seconds.length)
  for (const [i, n] of theirs.seconds.entries())
    expect(Math.abs((mine.seconds[i] as number) - n), `${what}: seconds`).toBeLessThanOrEqual(slackSeconds)
}

describe('docs/migrating-from-express-rate-limit.md: 100 per 15 minutes, draft-7, user else IP', () => {
  it('the same status, body and draft-7 headers on every request; a user and the anonymous address count apart', async () => {
    const peer = await serve(peerApp())
    const ours = await serve(sluiceApp())
    const alice = { headers: { 'x-user': 'alice' } }
    const firstAt = Date.now()
    const firstPeer = await call(peer, '/', alice)
    const firstOurs = await call(ours, '/', alice)
    const slack = Math.ceil((Date.now() - firstAt) / 1000) + 1
    expect(firstPeer.headers.ratelimit).toMatch(/^limit=100, remaining=99, reset=\d+$/)
    expect(firstPeer.headers['ratelimit-policy']).toBe('100;w=900')
    expectSame(firstPeer, firstOurs, slack, 'alice 1')
    for (let i = 2; i <= 101; i++) {
      const theirs = await call(peer, '/', alice)
      const mine = await call(ours, '/', alice)
      expect(theirs.status, `alice ${i}`).toBe(i <= 100 ? 200 : 429)
      expectSame(theirs, mine, slack, `alice ${i}`)
    }
    // Alice is spent; another user and the anonymous caller (keyed by address) are not.
    for (const [who, options] of [
      ['bob', { headers: { 'x-user': 'bob' } }],
      ['anonymous', {}],
    ] as const) {
      const theirs = await call(peer, '/', options)
      const mine = await call(ours, '/', options)
      expect(theirs.status, who).toBe(200)
      expect(theirs.headers.ratelimit, who).toMatch(/remaining=99,/)
      expectSame(theirs, mine, slack + 1, who)
    }
  })

  it('legacyHeaders (its default) against headers: "legacy": the same X-RateLimit-Limit, -Remaining and -Reset (Unix seconds), to the 429', async () => {
    const peerOnly = express()
    peerOnly.use(rateLimit({ windowMs: 60_000, limit: 3 }))
    peerOnly.get('/', (_req, res) => res.send('hello'))
    const limiter = createLimiter({
      policies: { perIp: { algorithm: 'fixed-window', limit: 3, window: '1m' } },
    })
    const oursOnly = express()
    oursOnly.use(
      sluice({
        limiter,
        rules: [{ policy: 'perIp', key: 'ip' }],
        headers: 'legacy',
        message: 'Too many requests, please try again later.',
      }),
    )
    oursOnly.get('/', (_req, res) => res.send('hello'))
    const peer = await serve(peerOnly)
    const ours = await serve(oursOnly)
    const firstAt = Date.now()
    for (let i = 1; i <= 4; i++) {
      const theirs = await call(peer, '/')
      const mine = await call(ours, '/')
      const slack = Math.ceil((Date.now() - firstAt) / 1000) + 1
      expect(theirs.status, `request ${i}`).toBe(i <= 3 ? 200 : 429)
      expect(theirs.headers['x-ratelimit-reset'], `request ${i}`).toMatch(/^\d{10}$/)
      expectSame(theirs, mine, slack, `request ${i}`)
    }
  })

  it('differs, as the guide says, in the content type of the string message; resetKey is reset with the fn: key', async () => {
    const peer = await serve(peerApp())
    const limiter = guideLimiter()
    const ours = await serve(sluiceApp(limiter))
    const carol = { headers: { 'x-user': 'carol' } }
    for (let i = 0; i < 100; i++) {
      await call(peer, '/', carol)
      await call(ours, '/', carol)
    }
    const theirs = await call(peer, '/', carol)
    const mine = await call(ours, '/', carol)
    expect([theirs.status, mine.status]).toEqual([429, 429])
    expect(mine.body).toBe(theirs.body)
    expect(theirs.headers['content-type']).toBe('text/html; charset=utf-8')
    expect(mine.headers['content-type']).toBe('text/plain; charset=utf-8')
    await limiter.reset('100-in-15min', 'fn:user:carol')
    const again = await call(ours, '/', carol)
    expect(again.status).toBe(200)
    expect(again.headers.ratelimit).toMatch(/remaining=99,/)
  })
})

describe('docs/migrating-from-express-rate-limit.md: a limit per plan', () => {
  it('limit as a function of the request against a policy function: the same status, body and draft-7 headers for a pro and a free caller, each to its 429', async () => {
    const peerPlans = express()
    peerPlans.use(
      rateLimit({
        windowMs: 60 * 1000,
        limit: (req) => (req.get('x-plan') === 'pro' ? 5 : 2),
        standardHeaders: 'draft-7',
        legacyHeaders: false,
        skipFailedRequests: true,
      }),
    )
    peerPlans.get('/', (_req, res) => res.send('hello'))
    const limiter = createLimiter({
      policies: {
        pro: { algorithm: 'fixed-window', limit: 5, window: '1m' },
        free: { algorithm: 'fixed-window', limit: 2, window: '1m' },
      },
    })
    const ourPlans = express()
    ourPlans.use(
      sluice({
        limiter,
        rules: [{ policy: (req) => (req.raw.get('x-plan') === 'pro' ? 'pro' : 'free'), key: 'ip' }],
        headers: 'draft-7',
        skipFailedRequests: true,
        message: 'Too many requests, please try again later.',
      }),
    )
    ourPlans.get('/', (_req, res) => res.send('hello'))
    const peer = await serve(peerPlans)
    const ours = await serve(ourPlans)
    const firstAt = Date.now()
    const pro = { headers: { 'x-plan': 'pro' } }
    const free = { headers: { 'x-plan': 'free' } }
    for (let i = 1; i <= 6; i++) {
      const theirs = await call(peer, '/', pro)
      const mine = await call(ours, '/', pro)
      const slack = Math.ceil((Date.now() - firstAt) / 1000) + 1
      expect(theirs.status, `pro ${i}`).toBe(i <= 5 ? 200 : 429)
      expect(theirs.headers['ratelimit-policy'], `pro ${i}`).toBe('5;w=60')
      expectSame(theirs, mine, slack, `pro ${i}`)
    }
    // The difference the guide states: express-rate-limit keeps one count per key and asks the
    // function for the limit each time, so the same address as a free caller is already past 2;
    // Sluice counts each policy apart, so the free policy starts its own window for that address.
    const statuses: [number, number][] = []
    for (let i = 1; i <= 3; i++) {
      const theirs = await call(peer, '/', free)
      const mine = await call(ours, '/', free)
      expect(theirs.headers['ratelimit-policy']).toBe('2;w=60')
      expect(mine.headers['ratelimit-policy']).toBe('2;w=60')
      statuses.push([theirs.status, mine.status])
    }
    expect(statuses).toEqual([
      [429, 200],
      [429, 200],
      [429, 429],
    ])
  })
})

describe('docs/migrating-from-express-rate-limit.md', () => {
  it('shows the setups these tests run, option for option', () => {
    for (const written of [
      'windowMs: 15 * 60 * 1000',
      'limit: 100,',
      "standardHeaders: 'draft-7'",
      'legacyHeaders: false',
      'keyGenerator: (req) => req.user?.id ?? ipKeyGenerator(req.ip)',
      "policies: { '100-in-15min': { algorithm: 'fixed-window', limit: 100, window: '15m' } }",
      'return id === undefined ? ipKey(req) : `user:',
      "headers: 'draft-7'",
      'ipv6Prefix: 56',
      "message: 'Too many requests, please try again later.'",
      "limit: (req) => (req.get('x-plan') === 'pro' ? 5 : 2)",
      "policy: (req) => (req.raw.get('x-plan') === 'pro' ? 'pro' : 'free')",
      'skipFailedRequests: true',
      "pro: { algorithm: 'fixed-window', limit: 5, window: '1m' }",
      "free: { algorithm: 'fixed-window', limit: 2, window: '1m' }",
    ])
      expect(GUIDE).toContain(written)
  })
})
