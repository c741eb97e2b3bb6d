// Request -> checks: what one request spends. Skipped and denied requests are answered here, without
// the limiter; any other request's rules (the global ones and its route's, with its tier's policies)
// become checks, a policy, a key and a cost each, that the limiter decides together: every layer
// admits or none is committed. Who is asking (the keys) is keys.ts; which rules apply, rules.ts.
import { InvalidCostError, UnknownPolicyError } from '../errors.js'
import type { Check } from '../limiter.js'
import { listOf } from '../lists.js'
import { isPending } from '../store.js'
import type { ConditionalCharge, CountIf } from './count-if.js'
import { DENIED_MESSAGE } from './headers.js'
import { RequestKeys } from './keys.js'
import type { LimitedShorthand } from './limited.js'
import type { ResolvedHttpOptions } from './options.js'
import { pass, refusal } from './outcome.js'
import type { OutcomeRule } from './outcome-counting.js'
import { type CompiledRoute, type CompiledRule, routeIdCache } from './rules.js'
import type { HttpOutcome, HttpRequestInfo, RouteOptions } from './types.js'

/** One layer of a request whose policy or cost is a function of it: the answers, maybe promised. */
interface LayerOfRequest {
  compiled: CompiledRule
  policy: string | null | undefined | Promise<string | null>
  cost: number | Promise<number>
  /** Where the cost was written: the rule's or the route's. */
  costWhere: string
}

/**
 * A request on its way to the limiter: who is asking (its keys, memoised), its tier, and the checks
 * it spends. Most requests make one check: it stays in the `first*` fields, and `all` is made only
 * from the second distinct one on. No check yet: `firstCost` is 0 (a cost is a whole number from 1).
 */
export class RequestChecks extends RequestKeys {
  tier: string | undefined = undefined
  /** The `message` / `statusCode` of the request's route, or the limiter's. */
  limited: LimitedShorthand | undefined = undefined
  /** What happens to the request's units once its response has ended; undefined: they stay spent. */
  counting: OutcomeRule | undefined = undefined
  firstPolicy = ''
  firstKey = ''
  firstCost = 0
  /** Every check, once there are two or more (rules are few: a linear merge beats a Map keyed by strings). */
  all: Check[] | undefined = undefined
  /** The charges of rules with a countIf, settled after the response; undefined when there are none. */
  conditional: ConditionalCharge[] | undefined = undefined

  /** `add`, for a rule whose units are given back after the response unless `countIf` says they count. */
  addConditional(policy: string, key: string, cost: number, countIf: CountIf): void {
    this.add(policy, key, cost)
    const charge = { policy, key, cost, countIf }
    if (this.conditional === undefined) this.conditional = [charge]
    else this.conditional.push(charge)
  }

  /** Add `cost` to the check of (policy, key), or add that check. */
  add(policy: string, key: string, cost: number): void {
    if (this.firstCost === 0) {
      this.firstPolicy = policy
      this.firstKey = key
      this.firstCost = cost
      return
    }
    if (this.all === undefined) {
      if (policy === this.firstPolicy && key === this.firstKey) {
        this.firstCost += cost
        return
      }
      this.all = [{ policy: this.firstPolicy, key: this.firstKey, cost: this.firstCost }]
    }
    const all = this.all
    for (let i = 0; i < all.length; i++) {
      const check = all[i]!
      if (check.policy === policy && check.key === key) {
        all[i] = { policy, key, cost: (check.cost ?? 0) + cost }
        return
      }
    }
    all.push({ policy, key, cost })
  }

  /** The checks as a list (made here when there is only the first). */
  list(): Check[] {
    return this.all ?? [{ policy: this.firstPolicy, key: this.firstKey, cost: this.firstCost }]
  }
}

/**
 * What reading a request gives: the checks it spends, or its outcome when the limiter has nothing to
 * decide (skipped, denied, a refused unknown client, no rule that applies).
 */
export type RequestRead = RequestChecks | HttpOutcome

/**
 * The reader of one HTTP core: request -> checks. Synchronous unless a tier must be looked up. It
 * throws (or the promise rejects) when a user callback does; the caller answers that as a failure.
 */
export function checksReader(
  resolved: ResolvedHttpOptions,
): (request: HttpRequestInfo, routeOptions: RouteOptions | undefined) => RequestRead | Promise<RequestRead> {
  const { options, settings, logger, rules, keyMaker, tiers, skipIp, skipPaths, skipRoutes, denyIp } =
    resolved
  const policies = resolved.limiter.policies as Readonly<Record<string, unknown>>
  const routeIdOf = routeIdCache()
  const defaultTier = options.tiers?.default ?? ''
  const tierCacheKey = options.tiers?.cacheBy ?? 'user'

  /**
   * The answer to a denied client (the limiter's `deny`, or a rule's deny list): 403 without a
   * store call, or in shadow mode a logged pass.
   */
  function denied(checks: RequestChecks): HttpOutcome {
    if (!settings.shadow) return refusal(403, 'forbidden', DENIED_MESSAGE)
    logger.warn(
      { route: checks.routeId, ip: checks.ip() },
      'sluice: shadow mode would refuse a denied client',
    )
    return { action: 'continue', headers: {}, wouldDeny: true }
  }

  /** Each rule that applies to the request, with its tier's policy, added to its checks. */
  function gather(
    checks: RequestChecks,
    applicable: readonly CompiledRule[],
    routeCost: number,
  ): RequestRead {
    const tier = checks.tier
    for (let i = 0; i < applicable.length; i++) {
      const { rule, applies, everywhere, countIf } = applicable[i]!
      if (!everywhere && !applies(checks.routeId)) continue
      const policy = typeof rule.policy === 'string' ? rule.policy : policyOfTier(rule.policy, tier)
      if (policy === null || policy === undefined) continue
      if (rule.key === 'ip' && checks.ip() === undefined && settings.missingIp === 'reject')
        return refusal(400, 'bad_request', 'The client address is unknown; requests must come over TCP/IP.')
      const key = checks.key(rule.key)
      const { lists } = applicable[i]!
      if (lists !== undefined) {
        const listed = listOf(lists, key, checks.ip())
        if (listed === 'deny') return denied(checks)
        if (listed === 'allow') continue
      }
      if (key === undefined) continue
      // Not of the request here: a rule's cost is a number (`gatherOfRequest` takes the others).
      const cost = (rule.cost as number | undefined) ?? routeCost
      if (countIf === undefined) checks.add(policy, key, cost)
      else checks.addConditional(policy, key, cost, countIf)
    }
    return checks.firstCost === 0 ? pass() : checks
  }

  /** The policy a rule names for a tier (`undefined`: none named, so no limit on this layer). */
  function policyOfTier(policy: CompiledRule['rule']['policy'], tier: string | undefined) {
    if (typeof policy !== 'object') return undefined
    return Object.hasOwn(policy, tier ?? '') ? policy[tier ?? ''] : policy[defaultTier]
  }

  /**
   * `gather` for requests with a rule whose policy or cost is a function of the request: each
   * function of a rule that applies is called once (a route's cost function once in all), and the
   * request waits only when one of them answers with a promise.
   */
  function gatherOfRequest(
    checks: RequestChecks,
    applicable: readonly CompiledRule[],
    route: CompiledRoute | undefined,
  ): RequestRead | Promise<RequestRead> {
    const request = checks.request
    const routeCostSpec = route?.options.cost ?? 1
    let routeCost: number | Promise<number> | undefined
    const layers: LayerOfRequest[] = []
    let waits = false
    for (let i = 0; i < applicable.length; i++) {
      const compiled = applicable[i]!
      if (!compiled.everywhere && !compiled.applies(checks.routeId)) continue
      const { rule } = compiled
      const policy =
        typeof rule.policy === 'function'
          ? rule.policy(request)
          : typeof rule.policy === 'string'
            ? rule.policy
            : policyOfTier(rule.policy, checks.tier)
      let cost: number | Promise<number>
      if (typeof rule.cost === 'function') cost = rule.cost(request)
      else if (rule.cost !== undefined) cost = rule.cost
      else if (typeof routeCostSpec === 'function') cost = routeCost ??= routeCostSpec(request)
      else cost = routeCostSpec
      if (isPending(policy) || isPending(cost)) waits = true
      const costWhere = rule.cost === undefined && route !== undefined ? route.where : compiled.where
      layers.push({ compiled, policy, cost, costWhere })
    }
    if (!waits) return addLayers(checks, layers)
    // Every answer awaited together: a second rejection is handled too, not left unhandled.
    return Promise.all(
      layers.map((layer) =>
        Promise.all([layer.policy, layer.cost]).then(([policy, cost]) => ({ ...layer, policy, cost })),
      ),
    ).then((answered) => addLayers(checks, answered))
  }

  /** The answered layers of `gatherOfRequest` checked and added; throws on a function's bad answer. */
  function addLayers(checks: RequestChecks, layers: readonly LayerOfRequest[]): RequestRead {
    for (const { compiled, policy, cost, costWhere } of layers) {
      const { rule, where, lists } = compiled
      if (typeof rule.policy === 'function') {
        if (policy === null) continue
        if (typeof policy !== 'string' || !Object.hasOwn(policies, policy))
          throw new UnknownPolicyError(
            `${where}.policy(request) answered ${typeof policy === 'string' ? JSON.stringify(policy) : String(policy)}: not a policy of the limiter; configured: ${Object.keys(policies).join(', ')}`,
          )
      }
      if (policy === null || policy === undefined) continue
      if (rule.key === 'ip' && checks.ip() === undefined && settings.missingIp === 'reject')
        return refusal(400, 'bad_request', 'The client address is unknown; requests must come over TCP/IP.')
      const key = checks.key(rule.key)
      if (lists !== undefined) {
        const listed = listOf(lists, key, checks.ip())
        if (listed === 'deny') return denied(checks)
        if (listed === 'allow') continue
      }
      if (key === undefined) continue
      if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost <= 0)
        throw new InvalidCostError(
          `${costWhere}.cost(request) answered ${typeof cost === 'string' ? JSON.stringify(cost) : String(cost)}: a cost is a whole number from 1`,
        )
      if (compiled.countIf === undefined) checks.add(policy as string, key, cost)
      else checks.addConditional(policy as string, key, cost, compiled.countIf)
    }
    return checks.firstCost === 0 ? pass() : checks
  }

  return (request, routeOptions) => {
    const routeId = routeIdOf(request.method, request.route)
    const route = rules.routeFor(routeId, request.route, routeOptions)
    if (
      route?.options.skip === true ||
      skipPaths.has(request.path) ||
      skipRoutes?.(routeId) === true ||
      options.skip?.when?.(request) === true
    )
      return pass()
    const checks = new RequestChecks(keyMaker, request, routeId)
    checks.limited = route === undefined ? rules.limited : route.limited
    checks.counting = route === undefined ? rules.counting : route.counting
    if (skipIp?.(checks.ip()) === true) return pass()
    if (denyIp?.(checks.ip()) === true || options.deny?.when?.(request) === true) return denied(checks)
    const applicable = route === undefined ? rules.globalRules : route.all
    const ofRequest = route === undefined ? rules.globalDynamic : route.dynamic
    // Without functions of the request, the route's cost is a number (checked when compiled).
    const routeCost = (route?.options.cost ?? 1) as number
    if (
      tiers !== undefined &&
      applicable.some((r) => typeof r.rule.policy === 'object' && r.applies(routeId))
    )
      return tiers.tierOf(request, checks.key(tierCacheKey)).then((tier) => {
        checks.tier = tier
        return ofRequest ? gatherOfRequest(checks, applicable, route) : gather(checks, applicable, routeCost)
      })
    return ofRequest ? gatherOfRequest(checks, applicable, route) : gather(checks, applicable, routeCost)
  }
}
