import { describe, expect, it } from 'vitest'
import { createHttpLimiter } from '../../packages/sluice/src/http/index.js'
import { clientIpResolver, groupIp, ipMatcher, parseIp } from '../../packages/sluice/src/http/ip.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'

describe('parseIp', () => {
  it.each([
    ['203.0.113.7', '203.0.113.7', 'ipv4'],
    [' 203.0.113.7:8080', '203.0.113.7', 'ipv4'],
    ['[2001:DB8::1]:443', '2001:db8::1', 'ipv6'],
    ['fe80::1%eth0', 'fe80::1', 'ipv6'],
    ['::ffff:198.51.100.4', '198.51.100.4', 'ipv4'],
  ])('%s -> %s', (raw, address, family) => {
    expect(parseIp(raw)).toEqual({ address, family })
  })

  it.each(['', 'unknown', '_hidden', '999.1.1.1', '1.2.3', 'x'.repeat(100), '[::1'])('rejects %j', (raw) => {
    expect(parseIp(raw)).toBeUndefined()
  })
})

describe('groupIp', () => {
  it('keeps IPv4 and groups IPv6 by prefix', () => {
    expect(groupIp('198.51.100.4', 'ipv4', 64)).toBe('198.51.100.4')
    expect(groupIp('2001:db8:1:2:aaaa:bbbb:cccc:dddd', 'ipv6', 64)).toBe('2001:db8:1:2::/64')
    expect(groupIp('2001:db8:1:2:aaaa::1', 'ipv6', 48)).toBe('2001:db8:1::/48')
    expect(groupIp('2001:db8:1:2:aaaa::1', 'ipv6', 56)).toBe('2001:db8:1::/56')
    expect(groupIp('2001:db8:1:2ff:aaaa::1', 'ipv6', 56)).toBe('2001:db8:1:200::/56')
    expect(groupIp('::1', 'ipv6', 128)).toBe('::1')
  })
})

describe('clientIpResolver', () => {
  it('ignores headers without trusted proxies', () => {
    const r = clientIpResolver({ trustProxy: false, header: 'x-forwarded-for' })
    expect(r.resolve('10.0.0.1', '203.0.113.1')).toBe('10.0.0.1')
  })

  it('walks trusted hops from the right', () => {
    const r = clientIpResolver({ trustProxy: ['10.0.0.0/8', 'loopback'], header: 'x-forwarded-for' })
    expect(r.resolve('127.0.0.1', '198.51.100.1, 203.0.113.1, 10.1.1.1')).toBe('203.0.113.1')
    expect(r.resolve('198.51.100.9', '203.0.113.1')).toBe('198.51.100.9')
    // Every hop trusted: the leftmost is the client.
    expect(r.resolve('10.0.0.2', '10.0.0.3')).toBe('10.0.0.3')
    // Malformed entry: the walk stops at the last readable hop.
    expect(r.resolve('10.0.0.2', 'junk, 10.0.0.3')).toBe('10.0.0.3')
    expect(r.resolve('10.0.0.2', 'junk')).toBe('10.0.0.2')
  })

  it('trusts a fixed number of hops', () => {
    const r = clientIpResolver({ trustProxy: 1, header: 'x-forwarded-for' })
    expect(r.resolve('198.51.100.9', '1.1.1.1, 203.0.113.1')).toBe('203.0.113.1')
    const none = clientIpResolver({ trustProxy: 0, header: 'x-forwarded-for' })
    expect(none.resolve('198.51.100.9', '203.0.113.1')).toBe('198.51.100.9')
  })

  it('reads RFC 7239 Forwarded and a trusted unix-socket peer', () => {
    const r = clientIpResolver({ trustProxy: ['unix', 'loopback'], header: 'forwarded' })
    expect(r.resolve(undefined, 'for=192.0.2.60;proto=http;by=203.0.113.43')).toBe('192.0.2.60')
    expect(r.resolve('127.0.0.1', 'for="[2001:db8:cafe::17]:4711"')).toBe('2001:db8:cafe::17')
    expect(r.resolve('127.0.0.1', 'for=unknown')).toBe('127.0.0.1')
    const noUnix = clientIpResolver({ trustProxy: ['loopback'], header: 'forwarded' })
    expect(noUnix.resolve(undefined, 'for=192.0.2.60')).toBeUndefined()
  })

  it('refuses bad configuration with SLUICE_INVALID_OPTIONS', () => {
    expect(() => clientIpResolver({ trustProxy: ['10.0.0.0/33'], header: 'x-forwarded-for' })).toThrow(
      expect.objectContaining({ code: 'SLUICE_INVALID_OPTIONS' }),
    )
    expect(() => clientIpResolver({ trustProxy: -1, header: 'x-forwarded-for' })).toThrow(
      expect.objectContaining({ code: 'SLUICE_INVALID_OPTIONS' }),
    )
    expect(() => ipMatcher(['nope'], 'deny.ips')).toThrow(/deny\.ips/)
  })

  it('reads a prefix length of digits only: an empty or padded one is refused, not read as a number', () => {
    for (const range of [
      '10.0.0.0/',
      '10.0.0.0/ 8',
      '10.0.0.0/8 ',
      '10.0.0.0/0x8',
      '2001:db8::/',
      '10.0.0.0/1e1',
    ])
      expect(() => ipMatcher([range], 'skip.ips'), range).toThrow(
        expect.objectContaining({ code: 'SLUICE_INVALID_OPTIONS' }),
      )
    expect(ipMatcher(['10.0.0.0/8'], 'skip.ips')('10.9.9.9')).toBe(true)
  })
})

describe('createHttpLimiter options', () => {
  const limiter = createLimiter({ policies: { a: { algorithm: 'fixed-window', limit: 2, window: '1s' } } })
  const bad: [string, Record<string, unknown>][] = [
    ['unknown policy', { rules: [{ policy: 'nope', key: 'ip' }] }],
    ['unknown key kind', { rules: [{ policy: 'a', key: 'cookie' }] }],
    ['cost above capacity', { rules: [{ policy: 'a', key: 'ip', cost: 3 }] }],
    [
      'route cost above capacity',
      { rules: [{ policy: 'a', key: 'ip' }], routes: { 'POST /x': { cost: 3 } } },
    ],
    ['tier map without tiers', { rules: [{ policy: { free: 'a' }, key: 'ip' }] }],
    [
      'tier map without the default',
      { rules: [{ policy: { pro: 'a' }, key: 'ip' }], tiers: { default: 'free', resolve: () => 'pro' } },
    ],
    ['header family', { rules: [], headers: 'all' }],
    ['ipv6 prefix', { rules: [], ipv6Prefix: 129 }],
  ]
  it.each(bad)('rejects %s', (_what, options) => {
    expect(() => createHttpLimiter({ limiter, ...(options as { rules: [] }) })).toThrow(
      expect.objectContaining({ code: 'SLUICE_INVALID_OPTIONS' }),
    )
  })
})
