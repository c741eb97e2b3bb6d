// The HTTP core every adapter shares: from a framework-neutral request to "continue with these
// headers" or "answer with this response". Knows no framework and no store.
import { createHash } from 'node:crypto'
import { z } from 'zod'
import { InvalidOptionsError } from '../errors.js'
import type { Check, Decision, LayeredDecision } from '../limiter.js'
import { isSyncStore } from '../store.js'
import { rateLimitBody, rateLimitHeaders } from './headers.js'
import { clientIpResolver, groupIp, ipMatcher, parseIp } from './ip.js'
import { type TierResolver, tierResolver } from './tiers.js'
import type {
  HttpLimiterOptions,
  HttpLogger,
  HttpOutcome,
  HttpRequestInfo,
  HttpResponseSpec,
  KeyKind,
  KeySpec,
  RouteOptions,
  Rule,
} from './types.js'

export interface HttpLimiter {
  /**
   * Decide one request. Never throws and never rejects: failures become a 500 (or, with
   * `onError: 'open'`, a pass). Returns the outcome directly when no I/O was needed (memory store,
   * one layer, no tier look-up), a promise otherwise; `await` works on both.
   */
  check(request: HttpRequestInfo, routeOptions?: RouteOptions): HttpOutcome | Promise<HttpOutcome>
  /** Validate per-route options now (at route registration) rather than on the first request. Returns them. */
  prepare(routeOptions: RouteOptions, where?: string): RouteOptions
  readonly options: Readonly<HttpLimiterOptions>
}

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT'])
const KEY_KINDS: readonly KeyKind[] = ['ip', 'user', 'apiKey', 'route', 'global']

const scalarOptions = z.object({
  headers: z.enum(['legacy', 'draft', 'both', 'none']).default('both'),
  body: z.enum(['json', 'problem']).default('json'),
  ipv6Prefix: z.number().int().min(1).max(128).default(64),
  missingIp: z.enum(['shared', 'reject']).default('shared'),
  maxKeyLength: z.number().int().min(32).max(4096).default(256),
  shadow: z.boolean().default(false),
  onError: z.enum(['fail', 'open']).default('fail'),
  apiKeyHeader: z
    .string()
    .regex(/^[A-Za-z0-9-]{1,64}$/)
    .default('x-api-key'),
  proxyHeader: z.enum(['x-forwarded-for', 'forwarded', 'x-real-ip']).default('x-forwarded-for'),
  storeUnavailableStatus: z.union([z.literal(503), z.literal(429)]).default(503),
})

/** A bounded-cardinality method: the standard ones as is, anything else as `OTHER`. */
function methodOf(raw: string): string {
  const upper = typeof raw === 'string' ? raw.toUpperCase() : ''
  return METHODS.has(upper) ? upper : 'OTHER'
}

/** `'POST /reports'` (method and route), `'/reports/:id'` (any method) or `'POST'` (any route). */
function routeMatcher(patterns: readonly string[] | undefined, what: string): (id: string) => boolean {
  if (patterns === undefined) return () => true
  if (!Array.isArray(patterns) || patterns.some((p) => typeof p !== 'string' || p.length === 0))
    throw new InvalidOptionsError(`${what}: use a list like ['POST /reports', '/users/:id', 'DELETE']`)
  const exact = new Set<string>()
  const paths = new Set<string>()
  const methods = new Set<string>()
  for (const p of patterns) {
    if (p.includes(' ')) exact.add(p)
    else if (p.startsWith('/') || p === '*') paths.add(p)
    else methods.add(p.toUpperCase())
  }
  return (id) => {
    const space = id.indexOf(' ')
    return exact.has(id) || paths.has(id.slice(space + 1)) || methods.has(id.slice(0, space))
  }
}

function hashKey(value: string): string {
  return createHash('sha256').update(value).digest('base64url').slice(0, 32)
}

const defaultLogger: HttpLogger = {
  warn: (details, message) =>
    process.stderr.write(`${JSON.stringify({ level: 'warn', msg: message, ...describe(details) })}\n`),
  error: (details, message) =>
    process.stderr.write(`${JSON.stringify({ level: 'error', msg: message, ...describe(details) })}\n`),
}

function describe(details: object): object {
  const err = (details as { err?: unknown }).err
  return err instanceof Error
    ? { ...details, err: { message: err.message, code: (err as { code?: unknown }).code } }
    : details
}

interface CompiledRule {
  rule: Rule
  applies: (routeId: string) => boolean
}

/**
 * Build the HTTP core over a limiter. Options are validated here, once.
 * @example
 * const http = createHttpLimiter({ limiter, rules: [{ policy: 'perIp', key: 'ip' }, { policy: 'perUser', key: 'user' }] })
 */
export function createHttpLimiter(options: HttpLimiterOptions): HttpLimiter {
  if (options === null || typeof options !== 'object' || typeof options.limiter?.consume !== 'function')
    throw new InvalidOptionsError('createHttpLimiter: pass { limiter: createLimiter(...), rules: [...] }')
  const parsed = scalarOptions.safeParse(options)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!
    throw new InvalidOptionsError(`createHttpLimiter: ${issue.path.join('.')}: ${issue.message}`)
  }
  const settings = parsed.data
  const { limiter } = options
  const logger = options.logger ?? defaultLogger
  const now = options.now ?? Date.now
  const policies = limiter.policies as Readonly<Record<string, (typeof limiter.policies)[string]>>
  const tierNames = new Set<string>()
  if (options.tiers !== undefined) tierNames.add(options.tiers.default)

  function validateRule(
    rule: Rule,
    where: string,
    routeCost: number | undefined,
    strict = true,
  ): CompiledRule {
    if (rule === null || typeof rule !== 'object')
      throw new InvalidOptionsError(`${where}: a rule is { policy, key }`)
    validateKey(rule.key, `${where}.key`)
    const names = typeof rule.policy === 'string' ? [rule.policy] : Object.values(rule.policy ?? {})
    if (typeof rule.policy === 'object' && rule.policy !== null) {
      if (options.tiers === undefined)
        throw new InvalidOptionsError(`${where}.policy: a policy per tier needs the tiers option`)
      if (!Object.hasOwn(rule.policy, options.tiers.default))
        throw new InvalidOptionsError(
          `${where}.policy: name a policy (or null) for the default tier ${JSON.stringify(options.tiers.default)}`,
        )
      for (const tier of Object.keys(rule.policy)) tierNames.add(tier)
    }
    for (const name of names) {
      if (name === null) continue
      const policy = typeof name === 'string' && Object.hasOwn(policies, name) ? policies[name] : undefined
      if (policy === undefined)
        throw new InvalidOptionsError(
          `${where}.policy: ${JSON.stringify(name)} is not a policy of the limiter; configured: ${Object.keys(policies).join(', ')}`,
        )
      const cost = rule.cost ?? routeCost ?? 1
      if (!Number.isSafeInteger(cost) || cost <= 0 || (strict && cost > policy.capacity))
        throw new InvalidOptionsError(
          `${where}: cost ${String(cost)} does not fit policy ${name} (a whole number from 1 to ${policy.capacity})`,
        )
    }
    return { rule, applies: routeMatcher(rule.routes, `${where}.routes`) }
  }

  function validateKey(key: KeySpec, where: string): void {
    if (typeof key === 'function') return
    const kinds = typeof key === 'string' ? [key] : key
    if (!Array.isArray(kinds) || kinds.length === 0 || kinds.some((k) => !KEY_KINDS.includes(k)))
      throw new InvalidOptionsError(
        `${where}: use one of ${KEY_KINDS.join(', ')}, a list of them, or a function`,
      )
  }

  if (!Array.isArray(options.rules))
    throw new InvalidOptionsError('createHttpLimiter: rules must be a list of { policy, key }')
  const globalRules = options.rules.map((r, i) => validateRule(r, `rules[${i}]`, undefined))
  const routeTable = new Map<string, { options: RouteOptions; rules: CompiledRule[] }>()
  for (const [id, route] of Object.entries(options.routes ?? {}))
    routeTable.set(id, compileRoute(route, `routes[${id}]`, true))

  /**
   * Validate a route's options. Routes named in `options.routes` are checked against every global
   * rule's capacity; adapter route options are not (a global rule may not apply to their route), so
   * a cost no policy can admit shows at run time as a logged InvalidCostError and a 500.
   */
  function compileRoute(
    route: RouteOptions,
    where: string,
    strict = false,
  ): { options: RouteOptions; rules: CompiledRule[] } {
    if (route.cost !== undefined && (!Number.isSafeInteger(route.cost) || route.cost <= 0))
      throw new InvalidOptionsError(`${where}.cost: a positive whole number`)
    if (strict)
      for (const [i, r] of globalRules.entries()) validateRule(r.rule, `rules[${i}] on ${where}`, route.cost)
    return {
      options: route,
      rules: (route.rules ?? []).map((r, i) => validateRule(r, `${where}.rules[${i}]`, route.cost)),
    }
  }

  // Adapter route options arrive per request; compile each distinct object once.
  const adapterRoutes = new WeakMap<RouteOptions, { options: RouteOptions; rules: CompiledRule[] }>()
  function prepared(extra: RouteOptions, where: string) {
    let compiled = adapterRoutes.get(extra)
    if (compiled === undefined) {
      if (extra === null || typeof extra !== 'object')
        throw new InvalidOptionsError(`${where}: route options are { cost?, rules?, skip? }`)
      compiled = compileRoute(extra, where)
      adapterRoutes.set(extra, compiled)
    }
    return compiled
  }

  function routeFor(routeId: string, route: string | undefined, extra: RouteOptions | undefined) {
    const configured = routeTable.get(routeId) ?? (route === undefined ? undefined : routeTable.get(route))
    if (extra === undefined) return configured
    const compiled = prepared(extra, `route options of ${routeId}`)
    if (configured === undefined) return compiled
    return {
      options: { ...configured.options, ...extra },
      rules: [...configured.rules, ...compiled.rules],
    }
  }

  const syncStore = isSyncStore(limiter.store)
  const ipResolver = clientIpResolver({
    trustProxy: options.trustProxy ?? false,
    header: settings.proxyHeader,
  })
  const skipIp = options.skip?.ips === undefined ? undefined : ipMatcher(options.skip.ips, 'skip.ips')
  const skipPaths = new Set(options.skip?.paths ?? [])
  const skipRoutes =
    options.skip?.routes === undefined ? undefined : routeMatcher(options.skip.routes, 'skip.routes')
  const denyIp = options.deny?.ips === undefined ? undefined : ipMatcher(options.deny.ips, 'deny.ips')
  let tiers: TierResolver | undefined
  if (options.tiers !== undefined) {
    if (typeof options.tiers.resolve !== 'function' || typeof options.tiers.default !== 'string')
      throw new InvalidOptionsError('tiers: pass { resolve(request), default: "free" }')
    if (options.tiers.cacheBy !== undefined) validateKey(options.tiers.cacheBy, 'tiers.cacheBy')
    tiers = tierResolver(options.tiers, tierNames, logger)
  }

  // Clients repeat: remember the key of recent addresses (bounded; cleared when full).
  const ipKeys = new Map<string, string>()
  function ipKey(ip: string | undefined): string {
    if (ip === undefined) return 'ip:unknown'
    let key = ipKeys.get(ip)
    if (key === undefined) {
      const parsed = parseIp(ip)
      key =
        parsed === undefined
          ? 'ip:unknown'
          : `ip:${groupIp(parsed.address, parsed.family, settings.ipv6Prefix)}`
      if (ipKeys.size >= 10_000) ipKeys.clear()
      ipKeys.set(ip, key)
    }
    return key
  }

  /** Per-request memo of the pieces keys are made of. */
  class RequestKeys {
    #ip: string | undefined | null = null
    #user: string | undefined | null = null
    constructor(
      readonly request: HttpRequestInfo,
      readonly routeId: string,
    ) {}
    ip(): string | undefined {
      if (this.#ip === null) {
        const forwarded =
          options.trustProxy === undefined || options.trustProxy === false
            ? undefined
            : this.request.header(settings.proxyHeader)
        this.#ip = ipResolver.resolve(this.request.remoteAddress, forwarded)
      }
      return this.#ip
    }
    user(): string | undefined {
      if (this.#user === null) {
        const id = options.user?.(this.request)
        this.#user =
          typeof id === 'string' && id.length > 0 ? id : typeof id === 'number' ? String(id) : undefined
      }
      return this.#user
    }
    part(kind: KeyKind): string | undefined {
      switch (kind) {
        case 'ip':
          return ipKey(this.ip())
        case 'user': {
          const user = this.user()
          return user === undefined ? undefined : `user:${user}`
        }
        case 'apiKey': {
          // API keys are secrets: only a hash of them reaches the store, metrics and logs.
          const key = this.request.header(settings.apiKeyHeader)
          return key === undefined || key.length === 0 ? undefined : `apikey:${hashKey(key)}`
        }
        case 'route':
          return `route:${this.routeId}`
        case 'global':
          return 'global'
      }
    }
    key(spec: KeySpec): string | undefined {
      let key: string | undefined
      if (typeof spec === 'function') {
        const value = spec(this.request)
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
      if (key !== undefined && key.length > settings.maxKeyLength) key = `hash:${hashKey(key)}`
      return key
    }
  }

  function respond(
    status: number,
    error: string,
    message: string,
    headers: Record<string, string> = {},
  ): HttpOutcome {
    return {
      action: 'respond',
      status,
      headers: { ...headers, 'Content-Type': 'application/json' },
      body: JSON.stringify({ error, message }),
    }
  }

  function notify(info: Parameters<NonNullable<HttpLimiterOptions['onDecision']>>[0]): void {
    try {
      options.onDecision?.(info)
    } catch {
      // A broken listener must never break a request.
    }
  }

  /**
   * Decide one request. Synchronous when nothing needs to wait (no tier look-up, a single layer on an
   * in-process store), so the common case costs no promise hops; a promise otherwise.
   */
  function decide(
    request: HttpRequestInfo,
    extra: RouteOptions | undefined,
  ): HttpOutcome | Promise<HttpOutcome> {
    const method = methodOf(request.method)
    const routeId = `${method} ${request.route ?? '*'}`
    const route = routeFor(routeId, request.route, extra)
    if (route?.options.skip === true || skipPaths.has(request.path) || skipRoutes?.(routeId) === true)
      return { action: 'continue', headers: {} }
    if (options.skip?.when?.(request) === true) return { action: 'continue', headers: {} }
    const keys = new RequestKeys(request, routeId)
    if (skipIp?.(keys.ip()) === true) return { action: 'continue', headers: {} }
    if (denyIp?.(keys.ip()) === true || options.deny?.when?.(request) === true) {
      if (!settings.shadow) return respond(403, 'forbidden', 'This client is not allowed to call this API.')
      logger.warn({ route: routeId, ip: keys.ip() }, 'sluice: shadow mode would refuse a denied client')
      return { action: 'continue', headers: {}, wouldDeny: true }
    }
    const rules = route === undefined ? globalRules : [...globalRules, ...route.rules]
    const routeCost = route?.options.cost ?? 1
    if (tiers !== undefined && rules.some((r) => typeof r.rule.policy !== 'string' && r.applies(routeId))) {
      const identity = keys.key(options.tiers?.cacheBy ?? 'user')
      return tiers.tierOf(request, identity).then((tier) => charge(keys, rules, routeCost, tier))
    }
    return charge(keys, rules, routeCost, undefined)
  }

  /** Build the layered check for the request and spend it. */
  function charge(
    keys: RequestKeys,
    rules: readonly CompiledRule[],
    routeCost: number,
    tier: string | undefined,
  ): HttpOutcome | Promise<HttpOutcome> {
    // Rules are few: a list with a linear merge beats a Map keyed by concatenated strings.
    const checks: Check[] = []
    for (const { rule, applies } of rules) {
      if (!applies(keys.routeId)) continue
      const policy =
        typeof rule.policy === 'string'
          ? rule.policy
          : Object.hasOwn(rule.policy, tier ?? '')
            ? rule.policy[tier ?? '']
            : rule.policy[options.tiers?.default ?? '']
      if (policy === null || policy === undefined) continue
      if (rule.key === 'ip' && keys.ip() === undefined && settings.missingIp === 'reject')
        return respond(400, 'bad_request', 'The client address is unknown; requests must come over TCP/IP.')
      const key = keys.key(rule.key)
      if (key === undefined) continue
      const cost = rule.cost ?? routeCost
      const same = checks.findIndex((c) => c.policy === policy && c.key === key)
      if (same < 0) checks.push({ policy, key, cost })
      else checks[same] = { policy, key, cost: (checks[same]?.cost ?? 0) + cost }
    }
    const only = checks.length === 1 ? checks[0] : undefined
    if (only !== undefined) {
      // One layer: the plain consume, synchronous when the store decides in-process (memory).
      const cost = { cost: only.cost ?? 1 }
      if (syncStore) return conclude(keys, tier, limiter.consumeSync(only.policy, only.key, cost))
      return limiter.consume(only.policy, only.key, cost).then((d) => conclude(keys, tier, d))
    }
    if (checks.length === 0) return { action: 'continue', headers: {} }
    return limiter.consume(checks).then((d) => conclude(keys, tier, d))
  }

  /** Turn a decision into headers and, when refused (and not in shadow mode), a response. */
  function conclude(
    keys: RequestKeys,
    tier: string | undefined,
    decision: Decision | LayeredDecision,
  ): HttpOutcome {
    const { request, routeId } = keys
    const shadow = settings.shadow
    const headers = rateLimitHeaders(decision, policies, { headers: settings.headers, nowMs: now() })
    notify({ request, route: routeId, tier, decision, shadow })
    if (decision.allowed) return { action: 'continue', headers, decision }
    if (shadow) {
      delete headers['Retry-After']
      const policy = (decision as LayeredDecision).deniedBy ?? decision.policy
      logger.warn({ route: routeId, policy, key: decision.key }, 'sluice: shadow mode would refuse')
      return { action: 'continue', headers, decision, wouldDeny: true }
    }
    // A `closed` policy whose store failed: 503 (or 429) with Retry-After, not a plain 429.
    const body = rateLimitBody(decision, settings.body, {
      storeUnavailableStatus: settings.storeUnavailableStatus,
    })
    const response: HttpResponseSpec = {
      status: body.status,
      headers: { ...headers, 'Content-Type': body.contentType },
      body: body.body,
    }
    const custom = options.onLimited?.({ request, decision, headers, response })
    return { action: 'respond', decision, ...(custom ?? response) }
  }

  function failed(request: HttpRequestInfo, error: unknown): HttpOutcome {
    logger.error({ err: error, method: request.method, route: request.route }, 'sluice: rate limiting failed')
    if (settings.onError === 'open') return { action: 'continue', headers: {} }
    return respond(500, 'rate_limiter_error', 'The rate limiter failed; the error is in the server log.')
  }

  return {
    options,
    prepare(routeOptions, where = 'route options') {
      prepared(routeOptions, where)
      return routeOptions
    },
    check(request, routeOptions) {
      try {
        const outcome = decide(request, routeOptions)
        return outcome instanceof Promise
          ? outcome.catch((error: unknown) => failed(request, error))
          : outcome
      } catch (error) {
        return failed(request, error)
      }
    },
  }
}

/** Adapters accept either a ready core or its options. */
export function asHttpLimiter(value: HttpLimiter | HttpLimiterOptions): HttpLimiter {
  return typeof (value as HttpLimiter).check === 'function'
    ? (value as HttpLimiter)
    : createHttpLimiter(value as HttpLimiterOptions)
}

/** One header value from a Node-style header map (arrays joined with `, `). */
export function headerValue(value: string | readonly string[] | undefined): string | undefined {
  return typeof value === 'string' ? value : Array.isArray(value) ? value.join(', ') : undefined
}

/** The path of a request target, without its query string. */
export function pathOf(url: string | undefined): string {
  if (url === undefined) return '/'
  const q = url.indexOf('?')
  return q < 0 ? url : url.slice(0, q)
}
