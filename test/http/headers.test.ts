import { describe, expect, it } from 'vitest'
import { rateLimitBody, rateLimitHeaders } from '../../packages/sluice/src/http/headers.js'
import type { Decision, LayeredDecision } from '../../packages/sluice/src/limiter.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'

const NOW = 1_700_000_000_000

function setup() {
  let now = NOW
  const limiter = createLimiter({
    store: memoryStore({ now: () => now }),
    policies: {
      perIp: { algorithm: 'fixed-window', limit: 10, window: '1m' },
      perUser: { algorithm: 'fixed-window', limit: 3, window: '30s' },
      fast: { algorithm: 'token-bucket', limit: 5, window: '500ms' },
      slots: { algorithm: 'concurrency', limit: 2, timeout: '10s' },
    },
  })
  return { limiter, advance: (ms: number) => (now += ms) }
}

describe('rateLimitHeaders', () => {
  it('describes a single allowed decision in both families', async () => {
    const { limiter } = setup()
    const d = await limiter.consume('perUser', 'u1')
    const h = rateLimitHeaders(d, limiter.policies, { headers: 'both', nowMs: NOW })
    expect(h).toEqual({
      'X-RateLimit-Limit': '3',
      'X-RateLimit-Remaining': '2',
      'X-RateLimit-Reset': String(NOW / 1000 + 30),
      'RateLimit-Policy': '"perUser";q=3;w=30',
      RateLimit: '"perUser";r=2;t=30',
    })
  })

  it('lists every layer and headlines the one closest to its limit', async () => {
    const { limiter } = setup()
    const checks = [
      { policy: 'perIp', key: '1.2.3.4' },
      { policy: 'perUser', key: 'u1' },
    ] as const
    await limiter.consume([...checks])
    const d = await limiter.consume([...checks])
    const h = rateLimitHeaders(d, limiter.policies, { headers: 'both', nowMs: NOW })
    expect(h['X-RateLimit-Limit']).toBe('3')
    expect(h['X-RateLimit-Remaining']).toBe('1')
    expect(h['RateLimit-Policy']).toBe('"perIp";q=10;w=60, "perUser";q=3;w=30')
    expect(h.RateLimit).toBe('"perIp";r=8;t=60, "perUser";r=1;t=30')
    expect(h['Retry-After']).toBeUndefined()
  })

  it('on a denial names the denying layer, never negative, Retry-After >= 1', async () => {
    const { limiter, advance } = setup()
    const checks = [
      { policy: 'perIp', key: '1.2.3.4' },
      { policy: 'perUser', key: 'u1' },
    ] as const
    for (let i = 0; i < 3; i++) await limiter.consume([...checks])
    advance(29_999)
    const d = await limiter.consume([...checks])
    expect(d.allowed).toBe(false)
    const h = rateLimitHeaders(d, limiter.policies, { headers: 'legacy', nowMs: NOW + 29_999 })
    expect(h).toEqual({
      'X-RateLimit-Limit': '3',
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': String(NOW / 1000 + 30),
      'Retry-After': '1',
    })
  })

  it('takes the longest wait when several layers deny', () => {
    const layer = (policy: string, retryAfterMs: number): Decision => ({
      allowed: false,
      limit: 5,
      remaining: 0,
      resetMs: retryAfterMs,
      retryAfterMs,
      policy,
      key: 'k',
      reason: 'limit',
    })
    const results = [layer('a', 1200), layer('b', 4001)]
    const d: LayeredDecision = { ...results[0]!, results, deniedBy: 'a' }
    const h = rateLimitHeaders(d, {}, { headers: 'both', nowMs: NOW })
    expect(h['Retry-After']).toBe('5')
    expect(h['X-RateLimit-Reset']).toBe(String(NOW / 1000 + 5))
    expect(h.RateLimit).toBe('"a";r=0;t=2, "b";r=0;t=5')
    // Policies unknown to the caller still get a quota item.
    expect(h['RateLimit-Policy']).toBe('"a";q=5, "b";q=5')
  })

  it('clamps nonsense numbers and rounds Retry-After up to at least 1', () => {
    const d: Decision = {
      allowed: false,
      limit: 4,
      remaining: -3,
      resetMs: -10,
      retryAfterMs: 0,
      policy: 'x',
      key: 'k',
    }
    const h = rateLimitHeaders(d, {}, { headers: 'both', nowMs: NOW })
    expect(h['X-RateLimit-Remaining']).toBe('0')
    expect(h['Retry-After']).toBe('1')
    expect(h.RateLimit).toBe('"x";r=0;t=1')
    for (const v of Object.values(h)) expect(v).not.toMatch(/-\d/)
  })

  it('rounds sub-second windows up, keeps q at capacity, and marks concurrency policies', async () => {
    const { limiter } = setup()
    const fast = await limiter.consume('fast', 'k')
    // 5 per 500 ms is stated as 5 per 1 s: never more than the real rate, and q = X-RateLimit-Limit.
    expect(rateLimitHeaders(fast, limiter.policies, { headers: 'draft', nowMs: NOW })).toEqual({
      'RateLimit-Policy': '"fast";q=5;w=1',
      RateLimit: '"fast";r=4;t=1',
    })
    const slots = await limiter.acquire('slots', 'k')
    expect(
      rateLimitHeaders(slots, limiter.policies, { headers: 'draft', nowMs: NOW })['RateLimit-Policy'],
    ).toBe('"slots";q=2;qu="concurrent-requests"')
  })

  it('leaves layers the deny cache did not evaluate out of RateLimit, not out of the policy list', () => {
    const denied: Decision = {
      allowed: false,
      limit: 2,
      remaining: 0,
      resetMs: 30_000,
      retryAfterMs: 30_000,
      policy: 'perUser',
      key: 'u',
      reason: 'limit',
    }
    const placeholder: Decision = {
      allowed: true,
      limit: 300,
      remaining: 300,
      resetMs: 0,
      retryAfterMs: 0,
      policy: 'perIp',
      key: 'ip',
      notEvaluated: true,
    }
    const d: LayeredDecision = {
      ...denied,
      results: [placeholder, denied],
      deniedBy: 'perUser',
      cached: true,
    }
    const h = rateLimitHeaders(d, {}, { headers: 'both', nowMs: NOW })
    expect(h['RateLimit-Policy']).toBe('"perIp";q=300, "perUser";q=2')
    expect(h.RateLimit).toBe('"perUser";r=0;t=30')
    expect(h['X-RateLimit-Limit']).toBe('2')
    expect(h['Retry-After']).toBe('30')
  })

  it('sends nothing with none', async () => {
    const { limiter } = setup()
    for (let i = 0; i < 3; i++) await limiter.consume('perUser', 'u')
    const d = await limiter.consume('perUser', 'u')
    expect(rateLimitHeaders(d, limiter.policies, { headers: 'none', nowMs: NOW })).toEqual({})
  })
})

describe("rateLimitHeaders in express-rate-limit's forms", () => {
  const layers = [
    { policy: 'perIp', key: '1.2.3.4' },
    { policy: 'perUser', key: 'u1' },
  ] as const

  it('draft-6 describes the layer closest to its limit, in seconds', async () => {
    const { limiter } = setup()
    await limiter.consume([...layers])
    const d = await limiter.consume([...layers])
    expect(rateLimitHeaders(d, limiter.policies, { headers: 'draft-6', nowMs: NOW })).toEqual({
      'RateLimit-Policy': '3;w=30',
      'RateLimit-Limit': '3',
      'RateLimit-Remaining': '1',
      'RateLimit-Reset': '30',
    })
  })

  it('draft-7 describes the denying layer on a denial, with Retry-After equal to its reset', async () => {
    const { limiter, advance } = setup()
    for (let i = 0; i < 3; i++) await limiter.consume([...layers])
    advance(10_000)
    const d = await limiter.consume([...layers])
    expect(d.allowed).toBe(false)
    expect(rateLimitHeaders(d, limiter.policies, { headers: 'draft-7', nowMs: NOW })).toEqual({
      'RateLimit-Policy': '3;w=30',
      RateLimit: 'limit=3, remaining=0, reset=20',
      'Retry-After': '20',
    })
  })

  it('draft-6 and draft-7 state a token bucket as its burst refilled, a concurrency policy without a window', async () => {
    const { limiter } = setup()
    const fast = await limiter.consume('fast', 'k')
    expect(rateLimitHeaders(fast, limiter.policies, { headers: 'draft-7', nowMs: NOW })).toEqual({
      'RateLimit-Policy': '5;w=1',
      RateLimit: 'limit=5, remaining=4, reset=1',
    })
    const slot = await limiter.acquire('slots', 'k')
    const h = rateLimitHeaders(slot, limiter.policies, { headers: 'draft-6', nowMs: NOW })
    expect(h['RateLimit-Policy']).toBe('2')
    expect(h['RateLimit-Remaining']).toBe('1')
  })

  it('draft-8 is the Structured Field lists of draft, every layer listed', async () => {
    const { limiter } = setup()
    await limiter.consume([...layers])
    const d = await limiter.consume([...layers])
    const draft8 = rateLimitHeaders(d, limiter.policies, { headers: 'draft-8', nowMs: NOW })
    expect(draft8).toEqual(rateLimitHeaders(d, limiter.policies, { headers: 'draft', nowMs: NOW }))
    expect(draft8.RateLimit).toBe('"perIp";r=8;t=60, "perUser";r=1;t=30')
  })
})

describe('rateLimitBody', () => {
  it('builds the default JSON 429 body and the problem+json variant', async () => {
    const { limiter, advance } = setup()
    for (let i = 0; i < 3; i++) await limiter.consume('perUser', 'u')
    advance(25_500)
    const d = await limiter.consume('perUser', 'u')
    const json = rateLimitBody(d)
    expect(json.status).toBe(429)
    expect(json.contentType).toBe('application/json')
    expect(JSON.parse(json.body)).toEqual({
      error: 'rate_limit_exceeded',
      message: 'Too many requests. Please try again in 5 seconds.',
      retry_after: 5,
      policy: 'perUser',
    })
    const problem = rateLimitBody(d, 'problem')
    expect(problem.contentType).toBe('application/problem+json')
    expect(JSON.parse(problem.body)).toMatchObject({
      status: 429,
      title: 'Too Many Requests',
      retry_after: 5,
    })
  })

  it('answers 200 for an allowed decision', async () => {
    const { limiter } = setup()
    const d = await limiter.consume('perUser', 'u')
    expect(rateLimitBody(d)).toEqual({
      status: 200,
      contentType: 'application/json',
      body: '{"allowed":true,"remaining":2}',
    })
  })
})
