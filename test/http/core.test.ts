// The HTTP core in process (no sockets): which key each key kind makes, which rules apply to which
// route, how route options merge, and the configuration errors. The adapters' behaviour through real
// servers is in test/http/behaviour.test.ts.
import { describe, expect, it } from 'vitest'
import type {
  HttpLimiterOptions,
  HttpOutcome,
  HttpRequestInfo,
  RouteOptions,
} from '../../packages/sluice/src/http/index.js'
import { createHttpLimiter } from '../../packages/sluice/src/http/index.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'

const policies = {
  wide: { algorithm: 'fixed-window', limit: 1000, window: '1m' },
  other: { algorithm: 'fixed-window', limit: 1000, window: '1m' },
  small: { algorithm: 'fixed-window', limit: 3, window: '1m' },
} as const

function core(options: Omit<HttpLimiterOptions, 'limiter'>) {
  return createHttpLimiter({ limiter: createLimiter({ policies }), ...options })
}

function request(
  overrides: Partial<Omit<HttpRequestInfo, 'header'>> & { headers?: Record<string, string> } = {},
) {
  const { headers = {}, ...rest } = overrides
  return {
    method: 'GET',
    route: '/items/:id',
    path: '/items/7',
    remoteAddress: '203.0.113.7',
    header: (name: string) => headers[name],
    raw: undefined,
    ...rest,
  } satisfies HttpRequestInfo
}

/** The outcome of a request on the memory store (synchronous for one layer). */
function sync(outcome: HttpOutcome | Promise<HttpOutcome>): HttpOutcome {
  if (outcome instanceof Promise) throw new Error('expected a synchronous outcome')
  return outcome
}

const keyOf = (outcome: HttpOutcome | Promise<HttpOutcome>) => sync(outcome).decision?.key
const remainingOf = (outcome: HttpOutcome | Promise<HttpOutcome>) => sync(outcome).decision?.remaining

describe('HTTP core: request keys', () => {
  it('makes one key per kind: ip (IPv6 grouped), user, route, global', () => {
    const byKind = (key: 'ip' | 'user' | 'route' | 'global', r = request()) =>
      keyOf(core({ rules: [{ policy: 'wide', key }], user: (q) => q.header('x-user') }).check(r))
    expect(byKind('ip')).toBe('ip:203.0.113.7')
    expect(byKind('ip', request({ remoteAddress: '2001:db8:1:2:aaaa::1' }))).toBe(
      byKind('ip', request({ remoteAddress: '2001:db8:1:2:bbbb::9' })),
    )
    expect(byKind('ip', request({ remoteAddress: '2001:db8:1:2:aaaa::1' }))).not.toBe(
      byKind('ip', request({ remoteAddress: '2001:db8:1:3::1' })),
    )
    expect(byKind('ip', request({ remoteAddress: '::ffff:203.0.113.7' }))).toBe('ip:203.0.113.7')
    expect(byKind('user', request({ headers: { 'x-user': 'u-42' } }))).toBe('user:u-42')
    expect(byKind('route')).toBe('route:GET /items/:id')
    expect(byKind('global')).toBe('global')
  })

  it('keys a numeric user id as its string, and skips the layer of an anonymous caller', () => {
    const http = core({
      rules: [{ policy: 'wide', key: 'user' }],
      user: (q) => (q.header('x-user') === '7' ? (7 as unknown as string) : undefined),
    })
    expect(keyOf(http.check(request({ headers: { 'x-user': '7' } })))).toBe('user:7')
    expect(sync(http.check(request()))).toEqual({ action: 'continue', headers: {} })
  })

  it('hashes API keys (never stores the secret), from the configured header', () => {
    const http = core({ rules: [{ policy: 'wide', key: 'apiKey' }], apiKeyHeader: 'x-token' })
    const key = keyOf(http.check(request({ headers: { 'x-token': 'secret-123' } })))
    expect(key).toMatch(/^apikey:[A-Za-z0-9_-]{32}$/)
    expect(key).not.toContain('secret')
    expect(keyOf(http.check(request({ headers: { 'x-token': 'secret-123' } })))).toBe(key)
    expect(keyOf(http.check(request({ headers: { 'x-token': 'secret-124' } })))).not.toBe(key)
    expect(keyOf(http.check(request({ headers: { 'x-api-key': 'secret-123' } })))).toBeUndefined()
  })

  it('joins combined kinds with |, and skips the layer when one piece is missing', () => {
    const http = core({
      rules: [{ policy: 'wide', key: ['user', 'route'] }],
      user: (q) => q.header('x-user'),
    })
    expect(keyOf(http.check(request({ headers: { 'x-user': 'ann' } })))).toBe('user:ann|route:GET /items/:id')
    expect(keyOf(http.check(request()))).toBeUndefined()
  })

  it('prefixes function keys, and hashes any key past maxKeyLength', () => {
    const http = core({ rules: [{ policy: 'wide', key: (q) => q.header('x-tenant') }], maxKeyLength: 40 })
    expect(keyOf(http.check(request({ headers: { 'x-tenant': 'acme' } })))).toBe('fn:acme')
    const long = 'a'.repeat(100)
    const hashed = keyOf(http.check(request({ headers: { 'x-tenant': long } })))
    expect(hashed).toMatch(/^hash:[A-Za-z0-9_-]{32}$/)
    expect(keyOf(http.check(request({ headers: { 'x-tenant': long } })))).toBe(hashed)
    expect(keyOf(http.check(request({ headers: { 'x-tenant': `${long}b` } })))).not.toBe(hashed)
  })

  it('reads the forwarding header only when a proxy is trusted', () => {
    const forwarded = request({ remoteAddress: '127.0.0.1', headers: { 'x-forwarded-for': '198.51.100.9' } })
    expect(keyOf(core({ rules: [{ policy: 'wide', key: 'ip' }] }).check(forwarded))).toBe('ip:127.0.0.1')
    const trusting = core({ rules: [{ policy: 'wide', key: 'ip' }], trustProxy: ['loopback'] })
    expect(keyOf(trusting.check(forwarded))).toBe('ip:198.51.100.9')
  })
})

describe('HTTP core: rules and routes', () => {
  const applies = (routes: readonly string[], method: string, route: string | undefined) =>
    keyOf(core({ rules: [{ policy: 'wide', key: 'global', routes }] }).check(request({ method, route }))) !==
    undefined

  it('matches a rule by method and route, by route alone, or by method alone', () => {
    expect(applies(['POST /reports'], 'POST', '/reports')).toBe(true)
    expect(applies(['POST /reports'], 'GET', '/reports')).toBe(false)
    expect(applies(['POST /reports'], 'POST', '/other')).toBe(false)
    expect(applies(['/reports'], 'DELETE', '/reports')).toBe(true)
    expect(applies(['/reports'], 'DELETE', '/reports/:id')).toBe(false)
    expect(applies(['delete'], 'DELETE', '/anything')).toBe(true)
    expect(applies(['DELETE'], 'GET', '/anything')).toBe(false)
    expect(applies(['*'], 'GET', undefined)).toBe(true)
    expect(applies(['*'], 'GET', '/x')).toBe(false)
  })

  it('upper-cases methods and folds unknown ones into OTHER', () => {
    const http = core({ rules: [{ policy: 'wide', key: 'route' }] })
    expect(keyOf(http.check(request({ method: 'get' })))).toBe('route:GET /items/:id')
    expect(keyOf(http.check(request({ method: 'BREW' })))).toBe('route:OTHER /items/:id')
    expect(keyOf(http.check(request({ route: undefined })))).toBe('route:GET *')
  })

  it('finds configured routes by method and pattern or by pattern, and charges their cost', () => {
    const http = core({
      rules: [{ policy: 'wide', key: 'ip' }],
      routes: { 'POST /upload': { cost: 5 }, '/export': { cost: 7 }, '/health': { skip: true } },
    })
    expect(remainingOf(http.check(request({ method: 'POST', route: '/upload' })))).toBe(995)
    expect(remainingOf(http.check(request({ method: 'GET', route: '/upload' })))).toBe(994)
    expect(remainingOf(http.check(request({ method: 'PUT', route: '/export' })))).toBe(987)
    expect(sync(http.check(request({ route: '/health' })))).toEqual({ action: 'continue', headers: {} })
  })

  it('merges adapter route options over a configured route: its options win, its rules add', () => {
    const http = core({
      rules: [{ policy: 'wide', key: 'ip' }],
      routes: { '/items/:id': { cost: 2, rules: [{ policy: 'other', key: 'ip', cost: 1 }] } },
    })
    const extra = http.prepare({ cost: 4, rules: [{ policy: 'small', key: 'user', cost: 1 }] })
    // No user: the small layer is skipped, so two layers (wide at cost 4, other at its fixed 1).
    // Layered on the memory store: answered synchronously too (the whole chain is in-process).
    const outcome = sync(http.check(request(), extra))
    const results = (outcome.decision as { results?: { policy: string; remaining: number }[] }).results
    expect(results?.map((r) => [r.policy, r.remaining])).toEqual([
      ['wide', 996],
      ['other', 999],
    ])
  })

  it('one adapter options object on two configured routes merges with each route, every time', async () => {
    const http = core({
      rules: [{ policy: 'wide', key: 'ip' }],
      routes: {
        '/a': { rules: [{ policy: 'other', key: 'ip' }] },
        '/b': { rules: [{ policy: 'small', key: 'ip' }] },
      },
    })
    const extra = http.prepare({ cost: 2 })
    const layers = async (route: string) => {
      const o = await Promise.resolve(http.check(request({ route, path: route }), extra))
      return (o.decision as { results?: { policy: string }[] }).results?.map((r) => r.policy)
    }
    // Each pair (route, options) gets its own merged rules, and asking again gives the same.
    for (let i = 0; i < 2; i++) {
      expect(await layers('/a')).toEqual(['wide', 'other'])
      expect(await layers('/b')).toEqual(['wide', 'small'])
    }
  })

  it('skips listed routes and paths before any key is made', () => {
    let userCalls = 0
    const http = core({
      rules: [{ policy: 'wide', key: 'user' }],
      user: () => {
        userCalls++
        return 'u'
      },
      skip: { routes: ['GET /items/:id'], paths: ['/ping'] },
    })
    expect(sync(http.check(request()))).toEqual({ action: 'continue', headers: {} })
    expect(sync(http.check(request({ route: '/p', path: '/ping' })))).toEqual({
      action: 'continue',
      headers: {},
    })
    expect(userCalls).toBe(0)
    expect(keyOf(http.check(request({ method: 'POST' })))).toBe('user:u')
  })
})

describe('HTTP core: configuration errors', () => {
  const fails = (options: Omit<HttpLimiterOptions, 'limiter'>) => {
    try {
      core(options)
    } catch (error) {
      return { code: (error as { code?: string }).code, message: (error as Error).message }
    }
    throw new Error('expected createHttpLimiter to throw')
  }

  it('names the rule and says what to write instead', () => {
    expect(fails({ rules: [{ policy: 'nope', key: 'ip' }] })).toEqual({
      code: 'SLUICE_INVALID_OPTIONS',
      message: 'rules[0].policy: "nope" is not a policy of the limiter; configured: wide, other, small',
    })
    expect(fails({ rules: [{ policy: 'wide', key: 'email' as 'ip' }] }).message).toBe(
      'rules[0].key: use one of ip, user, apiKey, route, global, a list of them, or a function',
    )
    expect(fails({ rules: [{ policy: 'wide', key: [] }] }).message).toMatch(/^rules\[0\]\.key: use one of/)
    expect(fails({ rules: [{ policy: { free: 'wide' }, key: 'ip' }] }).message).toBe(
      'rules[0].policy: a policy per tier needs the tiers option',
    )
    expect(fails({ rules: [{ policy: 'small', key: 'ip', cost: 4 }] }).message).toBe(
      'rules[0]: cost 4 does not fit policy small (a whole number from 1 to 3)',
    )
    expect(
      fails({ rules: [{ policy: 'wide', key: 'ip', routes: 'POST /x' as unknown as string[] }] }).message,
    ).toBe("rules[0].routes: use a list like ['POST /reports', '/users/:id', 'DELETE']")
    expect(fails({ rules: {} as unknown as [] }).message).toBe(
      'createHttpLimiter: rules must be a list of { policy, key }',
    )
  })

  it("checks a configured route's cost against every global rule, adapter route options only against their own", () => {
    expect(fails({ rules: [{ policy: 'small', key: 'ip' }], routes: { '/big': { cost: 5 } } }).message).toBe(
      'rules[0] on routes[/big]: cost 5 does not fit policy small (a whole number from 1 to 3)',
    )
    expect(fails({ rules: [], routes: { '/x': { cost: 0 } } }).message).toBe(
      'routes[/x].cost: a positive whole number, or a function of the request',
    )
    const http = core({ rules: [{ policy: 'small', key: 'ip' }] })
    expect(http.prepare({ cost: 5 })).toEqual({ cost: 5 })
    expect(() => http.prepare({ rules: [{ policy: 'nope', key: 'ip' }] }, 'my route')).toThrow(
      'my route.rules[0].policy: "nope" is not a policy of the limiter',
    )
    expect(() => http.prepare(null as unknown as RouteOptions, 'my route')).toThrow(
      'my route: route options are { cost?, rules?, skip? }',
    )
  })

  it('answers 500 for bad adapter route options met at run time, never throws', () => {
    const errors: string[] = []
    const http = core({
      rules: [{ policy: 'wide', key: 'ip' }],
      logger: { warn: () => {}, error: (_details, message) => errors.push(message) },
    })
    const outcome = sync(http.check(request(), { cost: -1 }))
    expect(outcome).toMatchObject({ action: 'respond', status: 500 })
    expect(errors).toEqual(['sluice: rate limiting failed'])
  })
})
