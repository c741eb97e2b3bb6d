// `ipKey(request)`: the key of the `'ip'` kind for a key function's fallback ("the user, else the
// client address"), with the core's trusted proxies and IPv6 grouping, through every adapter's real
// server; and a key function that returns undefined still skips its layer.
import { afterEach, describe, expect, it } from 'vitest'
import type {
  DecisionInfo,
  HttpLimiterOptions,
  HttpRequestInfo,
} from '../../packages/sluice/src/http/index.js'
import { createHttpLimiter, ipKey } from '../../packages/sluice/src/http/index.js'
import { ipKey as rootIpKey } from '../../packages/sluice/src/index.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { adapters, call, type Running } from './servers.js'

const policies = {
  two: { algorithm: 'fixed-window', limit: 2, window: '1m' },
} as const

type Options = Omit<HttpLimiterOptions, 'limiter' | 'onDecision'>

/** A signed-in user from a header, for the tests: undefined when anonymous. */
const userOf = (req: HttpRequestInfo): string | undefined => req.header('x-user')

function request(fields: Partial<HttpRequestInfo>): HttpRequestInfo {
  return {
    method: 'GET',
    route: '/hello',
    path: '/hello',
    remoteAddress: '127.0.0.1',
    header: () => undefined,
    raw: undefined,
    ...fields,
  }
}

for (const adapter of adapters) {
  describe(`ipKey in a key function: ${adapter.name}`, () => {
    let running: Running | undefined
    afterEach(async () => {
      await running?.close()
      running = undefined
    })

    async function start(options: Options) {
      const keys: string[] = []
      const http = createHttpLimiter({
        limiter: createLimiter({ policies }),
        onDecision: (info: DecisionInfo) => keys.push(info.decision.key),
        ...options,
      })
      running = await adapter.start(http, { port: 0 })
      const target = running.target
      const get = (headers: Record<string, string> = {}) => call(target, '/hello', { headers })
      return { get, keys }
    }

    it('falls back to the client address, IPv6 grouped behind trusted proxies, instead of skipping', async () => {
      const { get, keys } = await start({
        trustProxy: ['loopback'],
        rules: [{ policy: 'two', key: (req) => userOf(req) ?? ipKey(req) }],
      })
      const from = (address: string) => ({ 'x-forwarded-for': address })
      expect((await get(from('2001:db8:1:2::1'))).status).toBe(200)
      // Another address of the same /64: the same budget.
      expect((await get(from('2001:db8:1:2::ffff'))).status).toBe(200)
      expect((await get(from('2001:db8:1:2::1'))).status).toBe(429)
      // The next /64 and a signed-in user have budgets of their own.
      expect((await get(from('2001:db8:1:3::1'))).status).toBe(200)
      expect((await get({ ...from('2001:db8:1:2::1'), 'x-user': 'ada' })).status).toBe(200)
      expect(keys).toEqual([
        'fn:ip:2001:db8:1:2::/64',
        'fn:ip:2001:db8:1:2::/64',
        'fn:ip:2001:db8:1:2::/64',
        'fn:ip:2001:db8:1:3::/64',
        'fn:ada',
      ])
    })

    it('skips the layer when the key function returns undefined', async () => {
      const { get, keys } = await start({ rules: [{ policy: 'two', key: (req) => userOf(req) }] })
      for (let i = 0; i < 4; i++) expect((await get()).status).toBe(200)
      expect(keys).toEqual([])
      expect((await get({ 'x-user': 'ada' })).status).toBe(200)
      expect(keys).toEqual(['fn:ada'])
    })
  })
}

describe('ipKey', () => {
  it("reads the core's ipv6Prefix and proxy header, as the 'ip' kind does", async () => {
    const http = createHttpLimiter({
      limiter: createLimiter({ policies }),
      trustProxy: 1,
      proxyHeader: 'x-real-ip',
      ipv6Prefix: 48,
      rules: [
        { policy: 'two', key: 'ip' },
        { policy: 'two', key: (req) => userOf(req) ?? ipKey(req) },
      ],
    })
    const outcome = await http.check(
      request({ header: (name) => (name === 'x-real-ip' ? '2001:db8:7:9::1' : undefined) }),
    )
    const layers = (outcome.decision as { results: { key: string }[] }).results.map((d) => d.key)
    expect(layers).toEqual(['ip:2001:db8:7::/48', 'fn:ip:2001:db8:7::/48'])
  })

  it('is exported from the root', () => {
    expect(typeof rootIpKey).toBe('function')
    expect(rootIpKey).toBe(ipKey)
  })

  it("outside a core's key function keys the socket peer with the defaults: IPv6 /64, IPv4 written as IPv6 as IPv4, no proxies", () => {
    expect(ipKey(request({ remoteAddress: '2001:db8:1:2::5' }))).toBe('ip:2001:db8:1:2::/64')
    expect(ipKey(request({ remoteAddress: '::ffff:6.6.6.6' }))).toBe('ip:6.6.6.6')
    expect(
      ipKey(request({ remoteAddress: '127.0.0.1', header: () => '6.6.6.6' })),
      'forwarding headers are not read without trusted proxies',
    ).toBe('ip:127.0.0.1')
    expect(ipKey(request({ remoteAddress: '127.0.0.1', frameworkClientAddress: '203.0.113.9' }))).toBe(
      'ip:203.0.113.9',
    )
    expect(ipKey(request({ remoteAddress: undefined }))).toBe('ip:unknown')
  })
})
