// Request keys: who is asking. Turns one request into the store keys its rules name (client IP with
// IPv6 grouping, user id, a hash of the API key, route, global, or a custom function), memoised per request.
import { createHash } from 'node:crypto'
import { InvalidOptionsError } from '../errors.js'
import { type ClientIpResolver, clientIpResolver, groupIp, parseIp } from './ip.js'
import type { HttpLimiterOptions, HttpRequestInfo, KeyKind, KeySpec } from './types.js'

const KEY_KINDS: readonly KeyKind[] = ['ip', 'user', 'apiKey', 'route', 'global']
/** Distinct client addresses whose key is remembered before the memo is cleared. */
const IP_KEY_MEMO_SIZE = 10_000

/** Throw unless `key` is a key kind, a non-empty list of them, or a function. */
export function validateKey(key: KeySpec, where: string): void {
  if (typeof key === 'function') return
  const kinds = typeof key === 'string' ? [key] : key
  if (!Array.isArray(kinds) || kinds.length === 0 || kinds.some((k) => !KEY_KINDS.includes(k)))
    throw new InvalidOptionsError(
      `${where}: use one of ${KEY_KINDS.join(', ')}, a list of them, or a function`,
    )
}

/** A stable, non-reversible name for a secret or an over-long key: 32 base64url characters of SHA-256. */
export function hashKey(value: string): string {
  return createHash('sha256').update(value).digest('base64url').slice(0, 32)
}

/**
 * The store key of an API key: `apikey:<hashKey(key)>`. The HTTP core and the service's /v1/authz
 * both use it, so the raw key never reaches a store, a metric, top keys or a log.
 * @example hashedApiKey('sk_live_abc') // 'apikey:' + 32 base64url characters
 */
export function hashedApiKey(key: string): string {
  return `apikey:${hashKey(key)}`
}

/** The key settings of one HTTP core, validated and with their defaults applied. */
export interface KeySettings {
  proxyHeader: 'x-forwarded-for' | 'forwarded' | 'x-real-ip'
  ipv6Prefix: number
  apiKeyHeader: string
  maxKeyLength: number
}

/** The key settings of a core given none: the HTTP options' defaults, and `ipKey`'s outside a core. */
export const DEFAULT_KEY_SETTINGS: Readonly<KeySettings> = {
  proxyHeader: 'x-forwarded-for',
  ipv6Prefix: 64,
  apiKeyHeader: 'x-api-key',
  maxKeyLength: 256,
}

/** What every request of one HTTP core shares: the settings, the client IP resolver, the IP-key memo. */
export class KeyMaker {
  readonly #options: Pick<HttpLimiterOptions, 'trustProxy' | 'user'>
  readonly #settings: KeySettings
  readonly #ipResolver: ClientIpResolver
  /** The forwarding header to read, or undefined when no proxy is trusted. */
  readonly #proxyHeader: string | undefined
  // Clients repeat: remember the key of recent addresses (bounded; cleared when full).
  readonly #ipKeys = new Map<string, string>()

  constructor(options: Pick<HttpLimiterOptions, 'trustProxy' | 'user'>, settings: KeySettings) {
    this.#options = options
    this.#settings = settings
    this.#ipResolver = clientIpResolver({
      trustProxy: options.trustProxy ?? false,
      header: settings.proxyHeader,
    })
    this.#proxyHeader =
      options.trustProxy === undefined || options.trustProxy === false ? undefined : settings.proxyHeader
  }

  clientIp(request: HttpRequestInfo): string | undefined {
    // The framework resolved the client through its own trusted proxies and Sluice was not told to:
    // the framework's answer wins (adapters refuse the setup where both are set).
    if (request.frameworkClientAddress !== undefined && this.#options.trustProxy === undefined)
      return request.frameworkClientAddress
    const forwarded = this.#proxyHeader === undefined ? undefined : request.header(this.#proxyHeader)
    return this.#ipResolver.resolve(request.remoteAddress, forwarded)
  }

  userOf(request: HttpRequestInfo): string | undefined {
    const id = this.#options.user?.(request)
    return typeof id === 'string' && id.length > 0 ? id : typeof id === 'number' ? String(id) : undefined
  }

  ipKey(ip: string | undefined): string {
    if (ip === undefined) return 'ip:unknown'
    let key = this.#ipKeys.get(ip)
    if (key === undefined) {
      const parsed = parseIp(ip)
      key =
        parsed === undefined
          ? 'ip:unknown'
          : `ip:${groupIp(parsed.address, parsed.family, this.#settings.ipv6Prefix)}`
      if (this.#ipKeys.size >= IP_KEY_MEMO_SIZE) this.#ipKeys.clear()
      this.#ipKeys.set(ip, key)
    }
    return key
  }

  apiKeyOf(request: HttpRequestInfo): string | undefined {
    // API keys are secrets: only a hash of them reaches the store, metrics and logs.
    const key = request.header(this.#settings.apiKeyHeader)
    return key === undefined || key.length === 0 ? undefined : hashedApiKey(key)
  }

  /** A key past `maxKeyLength` becomes a hash of itself (same caller, same budget). */
  bounded(key: string): string {
    return key.length > this.#settings.maxKeyLength ? `hash:${hashKey(key)}` : key
  }
}

/**
 * The request whose key function the core is calling: `ipKey` answers with that core's settings.
 * Key functions are synchronous, so one slot (restored after each call) is enough.
 */
let calling: RequestKeys | undefined

/** The key maker of `ipKey` outside a core's callbacks: no trusted proxies, IPv6 /64. */
let defaultKeys: KeyMaker | undefined

/**
 * The key the `'ip'` key kind gives a request (`ip:203.0.113.9`, IPv6 grouped: `ip:2001:db8:1:2::/64`),
 * for a key function that falls back to the client address rather than skipping its layer. Called
 * from a key function of a core (a rule's `key`, `tiers.cacheBy`), it uses that core's `trustProxy`, `proxyHeader` and
 * `ipv6Prefix`; anywhere else, the defaults (the socket peer, or the framework's resolved client;
 * IPv6 /64). A request without an address keys as `ip:unknown` (never a 400).
 * @example
 * rules: [{ policy: 'perUser', key: (req) => sessionUserId(req.raw) ?? ipKey(req) }]
 */
export function ipKey(request: HttpRequestInfo): string {
  if (calling !== undefined && calling.request === request) return calling.maker.ipKey(calling.ip())
  defaultKeys ??= new KeyMaker({}, DEFAULT_KEY_SETTINGS)
  return defaultKeys.ipKey(defaultKeys.clientIp(request))
}

/** Per-request memo of the pieces keys are made of. */
export class RequestKeys {
  #ip: string | undefined | null = null
  #user: string | undefined | null = null
  constructor(
    readonly maker: KeyMaker,
    readonly request: HttpRequestInfo,
    readonly routeId: string,
  ) {}

  ip(): string | undefined {
    if (this.#ip === null) this.#ip = this.maker.clientIp(this.request)
    return this.#ip
  }

  user(): string | undefined {
    if (this.#user === null) this.#user = this.maker.userOf(this.request)
    return this.#user
  }

  part(kind: KeyKind): string | undefined {
    switch (kind) {
      case 'ip':
        return this.maker.ipKey(this.ip())
      case 'user': {
        const user = this.user()
        return user === undefined ? undefined : `user:${user}`
      }
      case 'apiKey':
        return this.maker.apiKeyOf(this.request)
      case 'route':
        return `route:${this.routeId}`
      case 'global':
        return 'global'
    }
  }

  /** The store key of `spec` for this request, or undefined when a piece is missing. */
  key(spec: KeySpec): string | undefined {
    let key: string | undefined
    if (typeof spec === 'function') {
      const outer = calling
      calling = this
      let value: string | undefined
      try {
        value = spec(this.request)
      } finally {
        calling = outer
      }
      key = typeof value === 'string' && value.length > 0 ? `fn:${value}` : undefined
    } else if (typeof spec === 'string') key = this.part(spec)
    else {
      const parts: string[] = []
      for (const kind of spec) {
        const part = this.part(kind)
        if (part === undefined) return undefined
        parts.push(part)
      }
      key = parts.join('|')
    }
    return key === undefined ? undefined : this.maker.bounded(key)
  }
}
