// The rate-limit headers, read the way a client reads them: RateLimit-Policy and RateLimit parsed
// with a real Structured Field Values parser (structured-headers), through real HTTP servers, on
// allowed and denied responses of every algorithm. The headers must agree with each other and with
// draft-ietf-httpapi-ratelimit-headers (08/09: Retry-After and t name the same instant; 10/11:
// Retry-After is not earlier than t).
import { Redis } from 'ioredis'
import { type Item, parseList } from 'structured-headers'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import type { DecisionInfo, HttpLimiterOptions, Rule } from '../../packages/sluice/src/http/index.js'
import { createHttpLimiter } from '../../packages/sluice/src/http/index.js'
import type { Policy } from '../../packages/sluice/src/index.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { redisStore } from '../../packages/sluice/src/stores/redis/index.js'
import { type RedisServer, startRedis } from '../helpers/redis-harness.js'
import { adapters, call, type Reply, type Running } from './servers.js'

/** A multiple of every window below, plus 2.5 s: windows aligned to the clock are part-way through. */
const T0 = 1_800_000_000_000 + 2_500

interface PolicyItem {
  q: number
  w: number | undefined
  qu: string | undefined
}
interface StateItem {
  r: number
  t: number | undefined
}

function integer(item: Item, name: string, required: boolean): number | undefined {
  const value = item[1].get(name)
  if (value === undefined && !required) return undefined
  expect(Number.isInteger(value), `${String(item[0])}: ${name}=${String(value)} is an Integer`).toBe(true)
  expect(value as number).toBeGreaterThanOrEqual(0)
  return value as number
}

/** Parse both fields as sf-lists of sf-string items; every name appears at most once in each. */
function parseDraft(reply: Reply): { policies: Map<string, PolicyItem>; states: Map<string, StateItem> } {
  const policyField = reply.headers['ratelimit-policy']
  const stateField = reply.headers.ratelimit
  expect(typeof policyField).toBe('string')
  expect(typeof stateField).toBe('string')
  const policies = new Map<string, PolicyItem>()
  for (const item of parseList(policyField as string) as Item[]) {
    const name = item[0]
    expect(typeof name, 'a policy item is an sf-string').toBe('string')
    expect(policies.has(name as string), `policy ${String(name)} listed once`).toBe(false)
    const qu = item[1].get('qu')
    if (qu !== undefined) expect(typeof qu).toBe('string')
    const w = integer(item, 'w', false)
    if (w !== undefined) expect(w).toBeGreaterThan(0)
    policies.set(name as string, {
      q: integer(item, 'q', true)!,
      w,
      qu: qu as string | undefined,
    })
  }
  const states = new Map<string, StateItem>()
  for (const item of parseList(stateField as string) as Item[]) {
    const name = item[0]
    expect(typeof name, 'a service limit item is an sf-string').toBe('string')
    expect(states.has(name as string), `state of ${String(name)} listed once`).toBe(false)
    states.set(name as string, { r: integer(item, 'r', true)!, t: integer(item, 't', false) })
  }
  return { policies, states }
}

interface Expect {
  /** The policy the legacy headers describe. */
  headline: string
  /** Concurrency policies (quota unit concurrent-requests, no window). */
  concurrency?: readonly string[]
  /** The clock the core used for X-RateLimit-Reset; undefined: the real clock, within a second. */
  nowMs: number | undefined
  /** Policies whose denial may wait past their window (see the counter test below). */
  mayExceedWindow?: readonly string[]
}

/** Every agreement the issue asks for; returns the parsed fields for further checks. */
function checkAgreement(reply: Reply, expected: Expect) {
  const { policies, states } = parseDraft(reply)
  for (const [name, state] of states) {
    const policy = policies.get(name)
    expect(policy, `RateLimit names ${name}, which RateLimit-Policy lists`).toBeDefined()
    expect(state.r, `${name}: r <= q`).toBeLessThanOrEqual(policy!.q)
    if (policy!.w !== undefined && state.t !== undefined && !expected.mayExceedWindow?.includes(name))
      expect(state.t, `${name}: t <= w`).toBeLessThanOrEqual(policy!.w)
  }
  for (const name of expected.concurrency ?? []) {
    expect(policies.get(name)?.qu).toBe('concurrent-requests')
    expect(policies.get(name)?.w).toBeUndefined()
  }
  for (const [name, policy] of policies)
    if (!(expected.concurrency ?? []).includes(name)) expect(policy.qu, name).toBeUndefined()
  const headline = states.get(expected.headline)
  expect(headline, `the headline ${expected.headline} has a RateLimit item`).toBeDefined()
  expect(reply.headers['x-ratelimit-limit']).toBe(String(policies.get(expected.headline)!.q))
  expect(reply.headers['x-ratelimit-remaining']).toBe(String(headline!.r))
  // The legacy reset names the instant of the headline's t (Unix seconds).
  // X-RateLimit-Reset is the instant now + t, rounded up to a whole Unix second (t was rounded up too).
  const offset = Number(reply.headers['x-ratelimit-reset']) - (headline!.t ?? 0)
  const nowSeconds = (expected.nowMs ?? Date.now()) / 1000
  expect(Math.abs(offset - nowSeconds)).toBeLessThan(expected.nowMs === undefined ? 2 : 1)
  if (reply.status === 429) {
    const retryAfter = Number(reply.headers['retry-after'])
    expect(Number.isInteger(retryAfter) && retryAfter >= 1).toBe(true)
    expect(headline!.r).toBe(0)
    // 08/09: the same point in time; 10/11: Retry-After not earlier than t.
    expect(headline!.t, 'Retry-After == t of the denying item').toBe(retryAfter)
  } else {
    expect(reply.headers['retry-after']).toBeUndefined()
  }
  return { policies, states }
}

const cases: { name: string; policy: Policy; requests: number }[] = [
  { name: 'fixed window', policy: { algorithm: 'fixed-window', limit: 3, window: '10s' }, requests: 3 },
  {
    name: 'sliding window log',
    policy: { algorithm: 'sliding-window-log', limit: 3, window: '10s' },
    requests: 3,
  },
  {
    name: 'sliding window counter',
    policy: { algorithm: 'sliding-window-counter', limit: 3, window: '10s' },
    requests: 3,
  },
  { name: 'token bucket', policy: { algorithm: 'token-bucket', limit: 3, window: '10s' }, requests: 3 },
  {
    name: 'token bucket, burst > limit',
    policy: { algorithm: 'token-bucket', limit: 1, window: '10s', burst: 2 },
    requests: 2,
  },
  { name: 'gcra', policy: { algorithm: 'gcra', limit: 3, window: '10s' }, requests: 3 },
  {
    name: 'gcra, burst > limit',
    policy: { algorithm: 'gcra', limit: 2, window: '10s', burst: 3 },
    requests: 3,
  },
  {
    name: 'fixed window of 1.5 s',
    policy: { algorithm: 'fixed-window', limit: 5, window: '1500ms' },
    requests: 5,
  },
  { name: 'concurrency', policy: { algorithm: 'concurrency', limit: 2, timeout: '10s' }, requests: 2 },
]

const chosen = adapters.filter((a) => a.name === 'express 5' || a.name === 'node:http')

for (const adapter of chosen) {
  describe(`draft headers agree: ${adapter.name}`, () => {
    let running: Running | undefined
    afterEach(async () => {
      await running?.close()
      running = undefined
    })

    /** A server over a memory store whose clock the test moves. */
    async function start(
      policies: Record<string, Policy>,
      rules: Rule[],
      extra: Partial<HttpLimiterOptions> = {},
    ) {
      const clock = { now: T0 }
      const limiter = createLimiter({ store: memoryStore({ now: () => clock.now }), policies })
      const http = createHttpLimiter({ limiter, rules, now: () => clock.now, ...extra })
      running = await adapter.start(http, { port: 0 })
      const target = running.target
      return {
        clock,
        get: (headers: Record<string, string> = {}) => call(target, '/hello', { headers }),
      }
    }

    for (const c of cases) {
      it(`${c.name}: allowed and denied responses`, async () => {
        const { clock, get } = await start({ p: c.policy }, [{ policy: 'p', key: 'ip' }])
        const concurrency = c.policy.algorithm === 'concurrency' ? ['p'] : []
        // Requests spread over time, so "back to full" and "next unit" are different instants.
        const step = Math.floor(900 / c.requests)
        for (let i = 0; i < c.requests; i++) {
          const reply = await get()
          expect(reply.status).toBe(200)
          checkAgreement(reply, { headline: 'p', concurrency, nowMs: clock.now })
          clock.now += step
        }
        const denied = await get()
        expect(denied.status).toBe(429)
        checkAgreement(denied, { headline: 'p', concurrency, nowMs: clock.now })
        clock.now += 123
        const again = await get()
        expect(again.status).toBe(429)
        checkAgreement(again, { headline: 'p', concurrency, nowMs: clock.now })
      })
    }

    it('layers of every algorithm at once: the headline is the tightest, each item agrees', async () => {
      const policies: Record<string, Policy> = {}
      const rules: Rule[] = []
      for (const [i, c] of cases.entries()) {
        policies[`p${i}`] = c.policy
        rules.push({ policy: `p${i}`, key: 'ip' })
      }
      policies.tight = { algorithm: 'fixed-window', limit: 1, window: '20s' }
      rules.push({ policy: 'tight', key: 'ip' })
      const { clock, get } = await start(policies, rules)
      const concurrency = cases.flatMap((c, i) => (c.policy.algorithm === 'concurrency' ? [`p${i}`] : []))
      const first = await get()
      expect(first.status).toBe(200)
      const { states } = checkAgreement(first, { headline: 'tight', concurrency, nowMs: clock.now })
      expect(states.size).toBe(cases.length + 1)
      clock.now += 400
      const denied = await get()
      expect(denied.status).toBe(429)
      checkAgreement(denied, { headline: 'tight', concurrency, nowMs: clock.now })
    })

    it('a policy used by two rules is listed once, with the tighter of its states', async () => {
      const { clock, get } = await start(
        { shared: { algorithm: 'sliding-window-log', limit: 5, window: '10s' } },
        [
          { policy: 'shared', key: 'ip' },
          { policy: 'shared', key: 'global' },
        ],
        { trustProxy: ['loopback'] },
      )
      const from = (ip: string) => get({ 'x-forwarded-for': ip })
      await from('10.0.0.1')
      await from('10.0.0.1')
      clock.now += 100
      const other = await from('10.0.0.2')
      expect(other.status).toBe(200)
      const { policies, states } = checkAgreement(other, { headline: 'shared', nowMs: clock.now })
      expect([...policies.keys()]).toEqual(['shared'])
      // Its own address has 4 left, the global key 2: the client can count on 2.
      expect(states.get('shared')?.r).toBe(2)
      expect(other.headers['x-ratelimit-remaining']).toBe('2')
    })

    it('a token bucket with burst > limit states its capacity as q, refilled over w', async () => {
      const { get } = await start({ b: { algorithm: 'token-bucket', limit: 1, window: '10s', burst: 2 } }, [
        { policy: 'b', key: 'ip' },
      ])
      const reply = await get()
      // 2 units, refilled at 1 per 10 s: the full capacity comes back in 20 s.
      expect(reply.headers['ratelimit-policy']).toBe('"b";q=2;w=20')
      expect(reply.headers.ratelimit).toBe('"b";r=1;t=10')
    })

    it('a sliding window counter never states t beyond its window on an allowed response', async () => {
      const { clock, get } = await start(
        { c: { algorithm: 'sliding-window-counter', limit: 10, window: '10s' } },
        [{ policy: 'c', key: 'ip' }],
      )
      const reply = await get()
      // 2.5 s into the clock-aligned window: it turns over in 7.5 s.
      expect(reply.headers.ratelimit).toBe('"c";r=9;t=8')
      clock.now += 10_000
      // Next window: the previous window's request fades out; the current one turns over in 7.5 s.
      const later = await get()
      expect(later.headers.ratelimit).toBe('"c";r=8;t=8')
    })

    it('a sliding window counter denial that needs the next window: t = Retry-After, past w', async () => {
      const { clock, get } = await start(
        { c: { algorithm: 'sliding-window-counter', limit: 1, window: '10s' } },
        [{ policy: 'c', key: 'ip' }],
      )
      expect((await get()).status).toBe(200)
      clock.now += 500
      const denied = await get()
      // The request counted at 2.5 s weighs 1 until the window turns over (7.5 s from the first
      // request), then fades over the whole next window: a unit fits again 17 s after the denial.
      checkAgreement(denied, { headline: 'c', nowMs: clock.now, mayExceedWindow: ['c'] })
      expect(denied.headers['retry-after']).toBe('17')
      expect(denied.headers.ratelimit).toBe('"c";r=0;t=17')
    })
  })
}

describe('draft headers from the local deny cache (real redis-server)', () => {
  let server: RedisServer
  let client: Redis
  let running: Running | undefined
  beforeAll(async () => {
    server = await startRedis()
    client = new Redis(server.port, '127.0.0.1')
  })
  afterAll(async () => {
    await running?.close()
    client.disconnect()
    await server.stop()
  })

  it('a cached denial of a layered rule does not claim full budgets for the other layers', async () => {
    const limiter = createLimiter({
      store: redisStore(client, { prefix: 'hd' }),
      policies: {
        perIp: { algorithm: 'fixed-window', limit: 300, window: '1m' },
        perUser: { algorithm: 'fixed-window', limit: 2, window: '1m' },
      },
    })
    const seen: DecisionInfo[] = []
    const http = createHttpLimiter({
      limiter,
      user: (r) => r.header('x-user'),
      rules: [
        { policy: 'perIp', key: 'ip' },
        { policy: 'perUser', key: 'user' },
      ],
      onDecision: (info) => seen.push(info),
    })
    running = await chosen[0]!.start(http, { port: 0 })
    const target = running.target
    const get = () => call(target, '/hello', { headers: { 'x-user': 'alice' } })
    expect((await get()).status).toBe(200)
    const second = await get()
    expect(second.headers.ratelimit).toMatch(/^"perIp";r=298;t=\d+, "perUser";r=0;t=\d+$/)
    const byStore = await get()
    expect(byStore.status).toBe(429)
    expect(seen.at(-1)?.decision.cached).toBeUndefined()
    const cached = await get()
    expect(cached.status).toBe(429)
    expect(seen.at(-1)?.decision.cached, 'the deny cache answered').toBe(true)
    const { policies, states } = checkAgreement(cached, { headline: 'perUser', nowMs: undefined })
    // The policy still applies; its state was not read: either left out or no more than known.
    expect([...policies.keys()]).toEqual(['perIp', 'perUser'])
    const perIp = states.get('perIp')
    if (perIp !== undefined) expect(perIp.r).toBeLessThanOrEqual(298)
    expect(states.get('perUser')).toMatchObject({ r: 0 })
  })
})
