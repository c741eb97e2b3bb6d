// The HTTP core every adapter shares: from a framework-neutral request to "continue with these
// headers" or "answer with this response". Knows no framework and no store. Its options are resolved
// in options.ts, who is asking lives in keys.ts, which rules apply in rules.ts; this file decides,
// charges and turns decisions into responses.
import type { Check, Decision, LayeredDecision } from '../limiter.js'
import type { MaybePromise } from '../store.js'
import { rateLimitBody } from './headers.js'
import { RequestKeys } from './keys.js'
import { resolveHttpOptions } from './options.js'
import { type CompiledRule, isStandardMethod, methodOf } from './rules.js'
import type {
  DecisionInfo,
  HttpLimiterOptions,
  HttpOutcome,
  HttpRequestInfo,
  HttpResponseSpec,
  RouteOptions,
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

/**
 * What an adapter does with an outcome. `a` and `b` are its per-request values (Fastify's reply and
 * `next`, Express's response and `next`), passed along so that no closure is made per request.
 */
export type OutcomeSink<A, B> = (outcome: HttpOutcome, a: A, b: B) => void

/**
 * Internal to the adapters: `check`, then hand the outcome to `sink`, now or once the store answers.
 * When the decision waits (Redis), the sink runs inside the core's own continuation of the store's
 * promise: one promise and one microtask per request fewer than `check(...).then(...)`. Present on
 * cores made by `createHttpLimiter`; adapters fall back to `check` for anything else.
 */
export const checkInto: unique symbol = Symbol('sluice.checkInto')

/** The core as the adapters see it: `check`, and `checkInto` when the core is Sluice's own. */
export interface HttpLimiterInternals extends HttpLimiter {
  [checkInto]?: <A, B>(
    request: HttpRequestInfo,
    routeOptions: RouteOptions | undefined,
    sink: OutcomeSink<A, B>,
    a: A,
    b: B,
  ) => void
}

/** Returned by `answer` when it handed the outcome to a sink itself (the store's promise continues it). */
const HANDED_OVER: HttpOutcome = Object.freeze({ action: 'continue', headers: {} }) as HttpOutcome

/** A plain pass: no limit applied, nothing to add to the response. */
function pass(): HttpOutcome {
  return { action: 'continue', headers: {} }
}

/** A refusal that is not a rate limit (403 deny list, 400 unknown client, 500 limiter failure). */
function respond(status: number, error: string, message: string): HttpOutcome {
  return {
    action: 'respond',
    status,
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ error, message }),
  }
}

/** The options of a plain cost-1 consume, shared: the limiter only reads them. */
const COST_ONE: { readonly cost: number } = Object.freeze({ cost: 1 })
/** Route ids remembered (method and route pattern); patterns come from the app's routes, so few. */
const ROUTE_ID_CACHE_SIZE = 4096

/**
 * Build the HTTP core over a limiter. Options are validated here, once.
 * @example
 * const http = createHttpLimiter({ limiter, rules: [{ policy: 'perIp', key: 'ip' }, { policy: 'perUser', key: 'user' }] })
 */
export function createHttpLimiter(options: HttpLimiterOptions): HttpLimiter {
  const resolved = resolveHttpOptions(options)
  const { settings, limiter, logger, now, keyMaker, writeHeaders, tiers, queue } = resolved
  const { skipIp, skipPaths, skipRoutes, denyIp } = resolved
  const { globalRules, routeFor, prepare: prepareRoute } = resolved.rules
  // `'GET /users/:id'` per standard method and route pattern, built once: no string per request.
  const routeIds = new Map<string, Map<string, string>>()
  let routeIdCount = 0
  function routeIdOf(rawMethod: string, route: string | undefined): string {
    const pattern = route ?? '*'
    const cached = routeIds.get(rawMethod)?.get(pattern)
    if (cached !== undefined) return cached
    const id = `${methodOf(rawMethod)} ${pattern}`
    // Only methods as sent in upper case (anything else is a client's choice, unbounded).
    if (routeIdCount < ROUTE_ID_CACHE_SIZE && isStandardMethod(rawMethod)) {
      let byRoute = routeIds.get(rawMethod)
      if (byRoute === undefined) {
        byRoute = new Map()
        routeIds.set(rawMethod, byRoute)
      }
      byRoute.set(pattern, id)
      routeIdCount++
    }
    return id
  }

  function notify(info: DecisionInfo): void {
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
    sink: AnySink | undefined,
    a: unknown,
    b: unknown,
  ): HttpOutcome | Promise<HttpOutcome> {
    const routeId = routeIdOf(request.method, request.route)
    const route = routeFor(routeId, request.route, extra)
    if (
      route?.options.skip === true ||
      skipPaths.has(request.path) ||
      skipRoutes?.(routeId) === true ||
      options.skip?.when?.(request) === true
    )
      return pass()
    const keys = new RequestKeys(keyMaker, request, routeId)
    if (skipIp?.(keys.ip()) === true) return pass()
    if (denyIp?.(keys.ip()) === true || options.deny?.when?.(request) === true) {
      if (!settings.shadow) return respond(403, 'forbidden', 'This client is not allowed to call this API.')
      logger.warn({ route: routeId, ip: keys.ip() }, 'sluice: shadow mode would refuse a denied client')
      return { action: 'continue', headers: {}, wouldDeny: true }
    }
    const rules = route === undefined ? globalRules : route.all
    const routeCost = route?.options.cost ?? 1
    if (tiers !== undefined && rules.some((r) => typeof r.rule.policy !== 'string' && r.applies(routeId))) {
      const identity = keys.key(options.tiers?.cacheBy ?? 'user')
      return tiers
        .tierOf(request, identity)
        .then((tier) => charge(keys, rules, routeCost, tier, undefined, undefined, undefined))
        .then(undefined, (error: unknown) => failed(request, error))
    }
    return charge(keys, rules, routeCost, undefined, sink, a, b)
  }

  /**
   * Build the layered check for the request and spend it. A promise returned from here never
   * rejects: failures are answered by `failed`. With a sink, a decision that waits is handed to it
   * (and `HANDED_OVER` returned) instead.
   */
  function charge(
    keys: RequestKeys,
    rules: readonly CompiledRule[],
    routeCost: number,
    tier: string | undefined,
    sink: AnySink | undefined,
    a: unknown,
    b: unknown,
  ): HttpOutcome | Promise<HttpOutcome> {
    // Most requests make one check: it stays in locals; a list exists only from the second one on
    // (rules are few: a linear merge beats a Map keyed by concatenated strings).
    let firstPolicy: string | undefined
    let firstKey = ''
    let firstCost = 0
    let checks: Check[] | undefined
    for (let i = 0; i < rules.length; i++) {
      const { rule, applies, everywhere } = rules[i]!
      if (!everywhere && !applies(keys.routeId)) continue
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
      if (firstPolicy === undefined) {
        firstPolicy = policy
        firstKey = key
        firstCost = cost
        continue
      }
      if (checks === undefined) {
        if (policy === firstPolicy && key === firstKey) {
          firstCost += cost
          continue
        }
        checks = [{ policy: firstPolicy, key: firstKey, cost: firstCost }]
      }
      const same = indexOfCheck(checks, policy, key)
      if (same < 0) checks.push({ policy, key, cost })
      else checks[same] = { policy, key, cost: (checks[same]?.cost ?? 0) + cost }
    }
    if (firstPolicy === undefined) return pass()
    if (queue !== undefined)
      // waiting:
      return answer(
        keys,
        tier,
        queue.consume(checks ?? [{ policy: firstPolicy, key: firstKey, cost: firstCost }]),
        sink,
        a,
        b,
      )
    // One layer: the plain check. Synchronous when the chain answers in-process (the memory store).
    if (checks === undefined)
      return answer(
        keys,
        tier,
        limiter.decide(firstPolicy, firstKey, firstCost === 1 ? COST_ONE : { cost: firstCost }),
        sink,
        a,
        b,
      )
    return answer(keys, tier, limiter.decide(checks), sink, a, b)
  }

  /** Conclude now, or once the chain answers (into the sink when there is one); a promise from here never rejects. */
  function answer(
    keys: RequestKeys,
    tier: string | undefined,
    decision: MaybePromise<Decision | LayeredDecision>,
    sink: AnySink | undefined,
    a: unknown,
    b: unknown,
  ): HttpOutcome | Promise<HttpOutcome> {
    if (!(decision instanceof Promise)) return conclude(keys, tier, decision)
    if (sink !== undefined) {
      decision.then(
        (d) => sink(settle(keys, tier, d), a, b),
        (error: unknown) => sink(failed(keys.request, error), a, b),
      )
      return HANDED_OVER
    }
    return decision.then(
      (d) => settle(keys, tier, d),
      (error: unknown) => failed(keys.request, error),
    )
  }

  /** `conclude` after an await: what it throws (a custom `onLimited`) is answered, not rejected. */
  function settle(
    keys: RequestKeys,
    tier: string | undefined,
    decision: Decision | LayeredDecision,
  ): HttpOutcome {
    try {
      return conclude(keys, tier, decision)
    } catch (error) {
      return failed(keys.request, error)
    }
  }

  /** Turn a decision into headers and, when refused (and not in shadow mode), a response. */
  function conclude(
    keys: RequestKeys,
    tier: string | undefined,
    decision: Decision | LayeredDecision,
  ): HttpOutcome {
    const { request, routeId } = keys
    const shadow = settings.shadow
    const headers = writeHeaders(decision, now())
    if (options.onDecision !== undefined) notify({ request, route: routeId, tier, decision, shadow })
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
    if (settings.onError === 'open') return pass()
    return respond(500, 'rate_limiter_error', 'The rate limiter failed; the error is in the server log.')
  }

  /** `[checkInto]`: a named function, so profiles (bench/budgets/adapter-allocations.mjs) can tell it apart. */
  function checkIntoSink<A, B>(
    request: HttpRequestInfo,
    routeOptions: RouteOptions | undefined,
    sink: OutcomeSink<A, B>,
    a: A,
    b: B,
  ): void {
    let outcome: HttpOutcome | Promise<HttpOutcome>
    try {
      outcome = decide(request, routeOptions, sink as AnySink, a, b)
    } catch (error) {
      outcome = failed(request, error)
    }
    if (outcome === HANDED_OVER) return
    // Only a tier look-up still answers with a promise here (it never rejects).
    if (outcome instanceof Promise) outcome.then((o) => sink(o, a, b))
    else sink(outcome, a, b)
  }

  const core: HttpLimiterInternals = {
    options,
    prepare(routeOptions, where = 'route options') {
      prepareRoute(routeOptions, where)
      return routeOptions
    },
    check(request, routeOptions) {
      try {
        // A promise from decide never rejects (each await answers its own failures).
        return decide(request, routeOptions, undefined, undefined, undefined)
      } catch (error) {
        return failed(request, error)
      }
    },
    [checkInto]: checkIntoSink,
  }
  return core
}

type AnySink = OutcomeSink<unknown, unknown>

function indexOfCheck(checks: readonly Check[], policy: string, key: string): number {
  for (let i = 0; i < checks.length; i++) if (checks[i]!.policy === policy && checks[i]!.key === key) return i
  return -1
}

/** Adapters accept either a ready core or its options. */
export function asHttpLimiter(value: HttpLimiter | HttpLimiterOptions): HttpLimiter {
  return typeof (value as HttpLimiter | undefined)?.check === 'function'
    ? (value as HttpLimiter)
    : createHttpLimiter(value as HttpLimiterOptions)
}
