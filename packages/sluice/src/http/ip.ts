// Who is asking, by address: parse IPs, group IPv6 by prefix, and read X-Forwarded-For / Forwarded
// only through proxies the operator trusts (a header from anyone else changes nothing).
import { BlockList, isIPv4, isIPv6 } from 'node:net'
import { InvalidOptionsError, type SluiceError } from '../errors.js'

/** Normalise one address: strip brackets, zone and port; IPv4-mapped and -compatible IPv6 to IPv4. */
export function parseIp(raw: string): { address: string; family: 'ipv4' | 'ipv6' } | undefined {
  let s = raw.trim()
  if (s.length === 0 || s.length > 64) return undefined
  if (s.startsWith('[')) {
    const end = s.indexOf(']')
    if (end < 0) return undefined
    s = s.slice(1, end)
  } else if (s.indexOf(':') > 0 && s.indexOf(':') === s.lastIndexOf(':') && s.includes('.')) {
    s = s.slice(0, s.indexOf(':')) // IPv4 with a port
  }
  const zone = s.indexOf('%')
  if (zone >= 0) s = s.slice(0, zone)
  if (isIPv4(s)) return { address: s, family: 'ipv4' }
  if (!isIPv6(s)) return undefined
  const lower = s.toLowerCase()
  // IPv4 inside IPv6 starts with zero groups (`::ffff:606:606`, `0:0:0:0:0:ffff:6.6.6.6`, `::6.6.6.6`);
  // any other address skips the byte decoding.
  if (lower.startsWith('::') || lower.startsWith('0')) {
    const embedded = embeddedIpv4(ipv6Bytes(lower))
    if (embedded !== undefined) return { address: embedded, family: 'ipv4' }
  }
  return { address: lower, family: 'ipv6' }
}

/**
 * The IPv4 address an IPv6 one carries, written in any form: IPv4-mapped (`::ffff:0:0/96`) and
 * IPv4-compatible (`::/96`, deprecated but still parsed). `::`, `::1` and other addresses whose
 * first IPv4 byte would be 0 are not IPv4: they stay IPv6.
 */
function embeddedIpv4(bytes: readonly number[]): string | undefined {
  for (let i = 0; i < 10; i++) if (bytes[i] !== 0) return undefined
  const mapped = bytes[10] === 0xff && bytes[11] === 0xff
  if (!mapped && (bytes[10] !== 0 || bytes[11] !== 0 || bytes[12] === 0)) return undefined
  return `${bytes[12]}.${bytes[13]}.${bytes[14]}.${bytes[15]}`
}

/** The 16 bytes of a valid IPv6 address (as returned by `parseIp`). */
function ipv6Bytes(address: string): number[] {
  let head = address
  let tail = ''
  const gap = address.indexOf('::')
  if (gap >= 0) {
    head = address.slice(0, gap)
    tail = address.slice(gap + 2)
  }
  const groups = (part: string): number[] => {
    if (part.length === 0) return []
    const out: number[] = []
    for (const g of part.split(':')) {
      if (g.includes('.')) {
        const [a, b, c, d] = g.split('.').map(Number)
        out.push(((a ?? 0) << 8) | (b ?? 0), ((c ?? 0) << 8) | (d ?? 0))
      } else out.push(Number.parseInt(g, 16))
    }
    return out
  }
  const h = groups(head)
  const t = groups(tail)
  const words = [...h, ...new Array<number>(8 - h.length - t.length).fill(0), ...t]
  return words.flatMap((w) => [w >> 8, w & 0xff])
}

/**
 * The client key for an address: IPv4 as is; IPv6 reduced to its `/prefix` network (default /64),
 * so one host cannot rotate through the addresses of its subnet.
 * @example ipKey('2001:db8:1:2:aaaa::1', 64) // '2001:db8:1:2::/64'
 */
export function groupIp(address: string, family: 'ipv4' | 'ipv6', ipv6Prefix: number): string {
  if (family === 'ipv4' || ipv6Prefix >= 128) return address
  const bytes = ipv6Bytes(address)
  for (let i = 0; i < 16; i++) {
    const keep = Math.min(8, Math.max(0, ipv6Prefix - i * 8))
    bytes[i] = (bytes[i] ?? 0) & ((0xff << (8 - keep)) & 0xff)
  }
  const words: string[] = []
  for (let i = 0; i < 16; i += 2) words.push((((bytes[i] ?? 0) << 8) | (bytes[i + 1] ?? 0)).toString(16))
  // Compress the longest run of zero words, as RFC 5952 asks.
  let best = -1
  let bestLength = 0
  for (let i = 0; i < 8; ) {
    if (words[i] !== '0') {
      i++
      continue
    }
    let j = i
    while (j < 8 && words[j] === '0') j++
    if (j - i > bestLength && j - i > 1) {
      best = i
      bestLength = j - i
    }
    i = j
  }
  const text =
    best < 0
      ? words.join(':')
      : `${words.slice(0, best).join(':')}::${words.slice(best + bestLength).join(':')}`
  return `${text}/${ipv6Prefix}`
}

/** Named ranges accepted in `trustProxy` besides CIDRs and addresses. */
const NAMED_RANGES: Record<string, readonly string[]> = {
  loopback: ['127.0.0.0/8', '::1/128'],
  private: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'],
  linklocal: ['169.254.0.0/16', 'fe80::/10'],
}

/**
 * Which peers may set forwarding headers: `false` (none: the socket address is the client),
 * a number of proxy hops in front of the app (trusted whatever their address), or a list of
 * addresses, CIDRs, `loopback`, `private`, `linklocal` and `unix` (a peer on a unix socket).
 */
export type TrustProxy = false | number | readonly string[]

export interface ClientIpOptions {
  trustProxy: TrustProxy
  /**
   * The forwarding header the trusted proxies write: `x-forwarded-for` (a list of hops), `forwarded`
   * (RFC 7239) or `x-real-ip` (one address, as nginx's `proxy_set_header X-Real-IP $remote_addr` sends).
   */
  header: 'x-forwarded-for' | 'forwarded' | 'x-real-ip'
}

export interface ClientIpResolver {
  /**
   * The client address, or undefined when there is none (a unix socket with no trusted proxy, or
   * a trusted unix-socket proxy that sent no usable header).
   */
  resolve(remoteAddress: string | undefined, header: string | undefined): string | undefined
}

/** Compile the trust configuration once; resolving is then a few string operations per request. */
export function clientIpResolver(options: ClientIpOptions): ClientIpResolver {
  const { trustProxy, header } = options
  let trusted: (address: string | undefined) => boolean
  let hops = Number.POSITIVE_INFINITY
  if (trustProxy === false) trusted = () => false
  else if (typeof trustProxy === 'number') {
    if (!Number.isSafeInteger(trustProxy) || trustProxy < 0)
      throw new InvalidOptionsError(`trustProxy: ${trustProxy} is not a hop count; use a whole number >= 0`)
    hops = trustProxy
    trusted = () => true
  } else if (Array.isArray(trustProxy)) {
    const list = new BlockList()
    let unix = false
    for (const entry of trustProxy) {
      if (entry === 'unix') {
        unix = true
        continue
      }
      for (const range of NAMED_RANGES[entry] ?? [entry]) addRange(list, range)
    }
    trusted = (address) => {
      if (address === undefined) return unix
      const ip = parseIp(address)
      return ip !== undefined && list.check(ip.address, ip.family)
    }
  } else {
    throw new InvalidOptionsError(
      'trustProxy: use false, a number of proxy hops, or a list of addresses/CIDRs (e.g. ["loopback", "10.0.0.0/8"])',
    )
  }
  const entries = header === 'forwarded' ? forwardedFor : header === 'x-real-ip' ? realIp : forwardedList

  return {
    resolve(remoteAddress, value) {
      // No proxy to believe: the peer as given (callers normalise it when they key on it).
      if (trustProxy === false) return remoteAddress
      const peer = remoteAddress === undefined ? undefined : parseIp(remoteAddress)?.address
      if (remoteAddress !== undefined && peer === undefined) return undefined
      if (value === undefined || hops === 0 || !trusted(peer)) return peer
      // Walk from the nearest hop outwards while each hop is trusted; the first untrusted hop is
      // the client. A malformed entry ends the walk: the last address read is the client.
      const list = entries(value)
      let client = peer
      let walked = 0
      for (let i = list.length - 1; i >= 0 && walked < hops; i--) {
        const ip = parseIp(list[i] ?? '')
        if (ip === undefined) break
        client = ip.address
        walked++
        if (!trusted(client)) break
      }
      return client
    },
  }
}

/**
 * A matcher for a list of addresses and CIDRs (and the names loopback, private, linklocal). A bad
 * entry throws what `fail` makes of the message (default `InvalidOptionsError`).
 * @example ipMatcher(['10.0.0.0/8', '::1'], 'skip.ips')('10.1.2.3') // true
 */
export function ipMatcher(
  entries: readonly string[],
  what: string,
  fail: (message: string) => SluiceError = (message) => new InvalidOptionsError(message),
): (address: string | undefined) => boolean {
  const list = new BlockList()
  for (const entry of entries)
    for (const range of NAMED_RANGES[entry] ?? [entry]) addRange(list, range, what, fail)
  return (address) => {
    if (address === undefined) return false
    const ip = parseIp(address)
    return ip !== undefined && list.check(ip.address, ip.family)
  }
}

function addRange(
  list: BlockList,
  range: string,
  what = 'trustProxy',
  fail: (message: string) => SluiceError = (message) => new InvalidOptionsError(message),
): void {
  const slash = range.indexOf('/')
  const ip = parseIp(slash < 0 ? range : range.slice(0, slash))
  const length = slash < 0 ? '' : range.slice(slash + 1)
  // Digits only: Number() reads '' as 0 (`10.0.0.0/` would be every address) and ' 8' as 8.
  const bits = slash < 0 ? undefined : /^[0-9]{1,3}$/.test(length) ? Number(length) : Number.NaN
  const max = ip?.family === 'ipv4' ? 32 : 128
  if (ip === undefined || (bits !== undefined && (!Number.isInteger(bits) || bits < 0 || bits > max))) {
    throw fail(
      `${what}: ${JSON.stringify(range)} is not an address, a CIDR or one of loopback, private, linklocal${what === 'trustProxy' ? ', unix' : ''}`,
    )
  }
  if (bits === undefined) list.addAddress(ip.address, ip.family)
  else list.addSubnet(ip.address, bits, ip.family)
}

/** At most this many hops are read from a forwarding header (a longer header is cut, not trusted more). */
const MAX_HOPS = 32

function forwardedList(value: string): string[] {
  const parts = value.split(',')
  return parts.length > MAX_HOPS ? parts.slice(-MAX_HOPS) : parts
}

/** X-Real-IP holds one address: a list in it is malformed (one entry that fails to parse). */
function realIp(value: string): string[] {
  return [value]
}

/** The `for=` of each element of an RFC 7239 `Forwarded` header (`unknown` and `_hidden` stay invalid). */
function forwardedFor(value: string): string[] {
  return forwardedList(value).map((element) => {
    for (const pair of element.split(';')) {
      const eq = pair.indexOf('=')
      if (eq > 0 && pair.slice(0, eq).trim().toLowerCase() === 'for') {
        return pair
          .slice(eq + 1)
          .trim()
          .replace(/^"(.*)"$/, '$1')
      }
    }
    return ''
  })
}
