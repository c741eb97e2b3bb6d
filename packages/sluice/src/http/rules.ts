// Rules and routes: which layers apply to a request. Rules are checked against the limiter's policies
// once, route patterns become matchers, and configured routes merge with adapter route options.
import { InvalidOptionsError } from '../errors.js'
import { type CompiledLists, compileLists } from '../lists.js'
import { checkKnownKeys, keysOf } from '../options.js'
import type { ResolvedPolicy } from '../policy.js'
import { type CountIf, countIfWithSkipOptions, validateCountIf } from './count-if.js'
import { validateKey } from './keys.js'
import { type LimitedShorthand, limitedShorthand, overlay } from './limited.js'
import { type OutcomeRule, outcomeRule } from './outcome-counting.js'
import type { HttpLimiterOptions, RequestCost, RouteOptions, Rule } from './types.js'

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT'])

const RULE_KEYS = keysOf<Rule>({
  policy: true,
  key: true,
  routes: true,
  cost: true,
  allow: true,
  deny: true,
  countIf: true,
})
const ROUTE_KEYS = keysOf<RouteOptions>({
  cost: true,
  rules: true,
  skip: true,
  message: true,
  statusCode: true,
  skipFailedRequests: true,
  skipSuccessfulRequests: true,
  requestWasSuccessful: true,
})

/** A bounded-cardinality method: the standard ones as is, anything else as `OTHER`. */
function methodOf(raw: string): string {
  const upper = typeof raw === 'string' ? raw.toUpperCase() : ''
  return METHODS.has(upper) ? upper : 'OTHER'
}

/** Is `raw` a standard method exactly as `methodOf` returns it (upper case)? */
function isStandardMethod(raw: string): boolean {
  return METHODS.has(raw)
}

/** Route ids remembered (method and route pattern); patterns come from the app's routes, so few. */
const ROUTE_ID_CACHE_SIZE = 4096

/**
 * The route id of a request, `'GET /users/:id'` (`'GET *'` without a route), per standard method and
 * route pattern built once: no string per request.
 */
export function routeIdCache(): (rawMethod: string, route: string | undefined) => string {
  const routeIds = new Map<string, Map<string, string>>()
  let count = 0
  return (rawMethod, route) => {
    const pattern = route ?? '*'
    const cached = routeIds.get(rawMethod)?.get(pattern)
    if (cached !== undefined) return cached
    const id = `${methodOf(rawMethod)} ${pattern}`
    // Only methods as sent in upper case (anything else is a client's choice, unbounded).
    if (count < ROUTE_ID_CACHE_SIZE && isStandardMethod(rawMethod)) {
      let byRoute = routeIds.get(rawMethod)
      if (byRoute === undefined) {
        byRoute = new Map()
        routeIds.set(rawMethod, byRoute)
      }
      byRoute.set(pattern, id)
      count++
    }
    return id
  }
}

/** `'POST /reports'` (method and route), `'/reports/:id'` (any method) or `'POST'` (any route). */
export function routeMatcher(patterns: readonly string[] | undefined, what: string): (id: string) => boolean {
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

export interface CompiledRule {
  rule: Rule
  applies: (routeId: string) => boolean
  /** No `routes` list: the rule applies to every route (the hot path skips `applies`). */
  everywhere: boolean
  /** Its policy or its cost is a function of the request. */
  dynamic: boolean
  /** Where it was written (`rules[0]`), for the errors of its functions' answers. */
  where: string
  /** Its allow and deny lists, compiled; undefined when it has none. */
  lists: CompiledLists | undefined
  /** Its units are given back after the response unless this says the status counts; undefined: they stay. */
  countIf: CountIf | undefined
}

export interface CompiledRoute {
  options: RouteOptions
  rules: CompiledRule[]
  /** The global rules, then the route's: what a request on this route checks (built once). */
  all: readonly CompiledRule[]
  /** The route's own `message` / `statusCode`, then the limiter's. */
  limited: LimitedShorthand | undefined
  /** A rule of `all` or the route's cost is a function of the request. */
  dynamic: boolean
  /** Where the route's options were written, for the errors of its cost function's answers. */
  where: string
  /** What happens to a request's units once its response has ended (route over limiter); undefined: they stay spent. */
  counting: OutcomeRule | undefined
}

export interface RuleBook {
  /** The layers checked on every request. */
  readonly globalRules: readonly CompiledRule[]
  /** A global rule's policy or cost is a function of the request. */
  readonly globalDynamic: boolean
  /**
   * Every tier name a rule mentions, and the default tier. Live: adapter route options compiled
   * later add theirs, so pass this very set to the tier resolver.
   */
  readonly tierNames: Set<string>
  /** The limiter-wide `message` / `statusCode`. */
  readonly limited: LimitedShorthand | undefined
  /** The limiter-wide outcome rule (`skipFailedRequests`, ...). */
  readonly counting: OutcomeRule | undefined
  /** The route of a request: its entry in `options.routes` merged with the adapter's route options. */
  routeFor(
    routeId: string,
    route: string | undefined,
    extra: RouteOptions | undefined,
  ): CompiledRoute | undefined
  /** Compile adapter route options (each distinct object once); throws on a bad option. */
  prepare(extra: RouteOptions, where: string): CompiledRoute
}

/** Validate `options.rules` and `options.routes` against the limiter's policies, once. */
export function compileRules(
  options: Pick<
    HttpLimiterOptions,
    | 'rules'
    | 'routes'
    | 'tiers'
    | 'message'
    | 'statusCode'
    | 'onLimited'
    | 'skipFailedRequests'
    | 'skipSuccessfulRequests'
    | 'requestWasSuccessful'
  >,
  policies: Readonly<Record<string, ResolvedPolicy>>,
): RuleBook {
  const hasOnLimited = options.onLimited !== undefined
  const limited = limitedShorthand(options, 'createHttpLimiter', hasOnLimited)
  const counting = outcomeRule(options, 'createHttpLimiter')
  const tierNames = new Set<string>()
  if (options.tiers !== undefined) tierNames.add(options.tiers.default)

  function validateRule(rule: Rule, where: string, routeCost: RequestCost | undefined): CompiledRule {
    if (rule === null || typeof rule !== 'object')
      throw new InvalidOptionsError(`${where}: a rule is { policy, key }`)
    checkKnownKeys(where, rule, RULE_KEYS)
    validateKey(rule.key, `${where}.key`)
    if (rule.cost !== undefined && typeof rule.cost !== 'number' && typeof rule.cost !== 'function')
      throw new InvalidOptionsError(`${where}.cost: a whole number from 1, or a function of the request`)
    const policyOfRequest = typeof rule.policy === 'function'
    const names =
      typeof rule.policy === 'string'
        ? [rule.policy]
        : policyOfRequest
          ? []
          : Object.values(rule.policy ?? {})
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
      if (typeof cost === 'function') continue
      if (!Number.isSafeInteger(cost) || cost <= 0 || cost > policy.capacity)
        throw new InvalidOptionsError(
          `${where}: cost ${String(cost)} does not fit policy ${name} (a whole number from 1 to ${policy.capacity})`,
        )
    }
    // The policy of a request is known only then: its capacity is the limiter's to check.
    const cost = rule.cost ?? routeCost ?? 1
    if (policyOfRequest && typeof cost === 'number' && !(Number.isSafeInteger(cost) && cost > 0))
      throw new InvalidOptionsError(`${where}: cost ${String(cost)} is not a whole number from 1`)
    return {
      rule,
      applies: routeMatcher(rule.routes, `${where}.routes`),
      everywhere: rule.routes === undefined,
      dynamic: policyOfRequest || typeof rule.cost === 'function',
      where,
      lists: compileLists(where, rule.allow, rule.deny),
      countIf: validateCountIf(rule.countIf, where),
    }
  }

  if (!Array.isArray(options.rules))
    throw new InvalidOptionsError('createHttpLimiter: rules must be a list of { policy, key }')
  const globalRules = options.rules.map((r, i) => validateRule(r, `rules[${i}]`, undefined))
  const globalDynamic = globalRules.some((r) => r.dynamic)
  if (counting !== undefined && globalRules.some((r) => r.countIf !== undefined))
    throw countIfWithSkipOptions('createHttpLimiter')
  const routeTable = new Map<string, CompiledRoute>()
  for (const [id, route] of Object.entries(options.routes ?? {}))
    routeTable.set(id, compileRoute(route, `routes[${id}]`, true))

  /**
   * Validate a route's options. Routes named in `options.routes` are checked against every global
   * rule's capacity; adapter route options are not (a global rule may not apply to their route), so
   * a cost no policy can admit shows at run time as a logged InvalidCostError and a 500.
   */
  function compileRoute(route: RouteOptions, where: string, strict = false): CompiledRoute {
    if (route === null || typeof route !== 'object')
      throw new InvalidOptionsError(`${where}: route options are { cost?, rules?, skip? }`)
    checkKnownKeys(where, route, ROUTE_KEYS)
    const cost = route.cost
    if (cost !== undefined && typeof cost !== 'function' && !(Number.isSafeInteger(cost) && cost > 0))
      throw new InvalidOptionsError(`${where}.cost: a positive whole number, or a function of the request`)
    if (strict)
      for (const [i, r] of globalRules.entries()) validateRule(r.rule, `rules[${i}] on ${where}`, cost)
    const rules = (route.rules ?? []).map((r, i) => validateRule(r, `${where}.rules[${i}]`, cost))
    const own = limitedShorthand(route, where, hasOnLimited)
    const all = [...globalRules, ...rules]
    const counting = outcomeRule(route, where, options)
    if (counting !== undefined && all.some((r) => r.countIf !== undefined))
      throw countIfWithSkipOptions(where)
    return {
      options: route,
      rules,
      all,
      limited: overlay(own, limited),
      dynamic: typeof cost === 'function' || all.some((r) => r.dynamic),
      where,
      counting,
    }
  }

  // Adapter route options arrive per request; compile each distinct object once.
  const adapterRoutes = new WeakMap<RouteOptions, CompiledRoute>()
  const merged = new WeakMap<RouteOptions, Map<CompiledRoute, CompiledRoute>>()
  function prepare(extra: RouteOptions, where: string): CompiledRoute {
    let compiled = adapterRoutes.get(extra)
    if (compiled === undefined) {
      if (extra === null || typeof extra !== 'object')
        throw new InvalidOptionsError(`${where}: route options are { cost?, rules?, skip? }`)
      compiled = compileRoute(extra, where)
      adapterRoutes.set(extra, compiled)
    }
    return compiled
  }

  return {
    globalRules,
    globalDynamic,
    tierNames,
    limited,
    counting,
    prepare,
    routeFor(routeId, route, extra) {
      const configured = routeTable.get(routeId) ?? (route === undefined ? undefined : routeTable.get(route))
      if (extra === undefined) return configured
      const compiled = prepare(extra, `route options of ${routeId}`)
      if (configured === undefined) return compiled
      // A configured route with adapter options on top: merged once per pair of objects.
      let byRoute = merged.get(extra)
      if (byRoute === undefined) {
        byRoute = new Map()
        merged.set(extra, byRoute)
      }
      let both = byRoute.get(configured)
      if (both === undefined) {
        const rules = [...configured.rules, ...compiled.rules]
        const routeOptions = { ...configured.options, ...extra }
        const all = [...globalRules, ...rules]
        const counting = outcomeRule(routeOptions, routeId, options)
        if (counting !== undefined && all.some((r) => r.countIf !== undefined))
          throw countIfWithSkipOptions(routeId)
        both = {
          options: routeOptions,
          rules,
          all,
          // Already checked when `extra` was compiled.
          limited: overlay(limitedShorthand(extra, routeId, false), configured.limited),
          dynamic: typeof routeOptions.cost === 'function' || all.some((r) => r.dynamic),
          where: extra.cost === undefined ? configured.where : compiled.where,
          counting,
        }
        byRoute.set(configured, both)
      }
      return both
    },
  }
}
