// What the client sees: rate-limit response headers and the 429 body, as pure functions of a
// Decision. Shared by every adapter and by the decision service (its nginx auth endpoint).
import type { Decision, LayeredDecision } from '../limiter.js'
import type { ResolvedPolicy } from '../policy.js'

/**
 * Which header families to send:
 * - `legacy`: `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (Unix seconds);
 * - `draft`: IETF `RateLimit-Policy` and `RateLimit` (draft-ietf-httpapi-ratelimit-headers-08+);
 * - `both` (the default in the adapters) or `none`.
 * `Retry-After` is sent on every denial whatever the family, unless `none`.
 */
export type HeaderFamilies = 'legacy' | 'draft' | 'both' | 'none'

export interface RateLimitHeaderOptions {
  headers: HeaderFamilies
  /** The wall clock (ms since the epoch) used to turn relative times into `X-RateLimit-Reset`. */
  nowMs: number
}

/** The layers of a decision: every layer of a layered decision, or the single decision itself. */
export function layersOf(decision: Decision | LayeredDecision): readonly Decision[] {
  return 'results' in decision && Array.isArray(decision.results) && decision.results.length > 0
    ? decision.results
    : [decision]
}

/**
 * The layer the headers describe: on a denial the denying layer that asks for the longest wait,
 * otherwise the layer closest to its limit (smallest share left; ties: the later reset).
 */
export function headlineLayer(decision: Decision | LayeredDecision): Decision {
  const layers = layersOf(decision)
  let best = layers[0] ?? decision
  for (let i = 1; i < layers.length; i++) {
    const d = layers[i]!
    if (!best.allowed) {
      if (!d.allowed && safe(d.retryAfterMs) > safe(best.retryAfterMs)) best = d
    } else if (!d.allowed) best = d
    else {
      const share = safe(d.remaining) * safe(best.limit)
      const bestShare = safe(best.remaining) * safe(d.limit)
      if (share < bestShare || (share === bestShare && safe(d.resetMs) > safe(best.resetMs))) best = d
    }
  }
  return best
}

/** Whole seconds, rounded up, never negative. */
function seconds(ms: number): number {
  return Math.ceil(safe(ms) / 1000)
}

/** A finite, non-negative whole number (NaN and negatives become 0). */
function safe(n: number): number {
  return Number.isFinite(n) && n > 0 ? Math.floor(n) : 0
}

/** `Retry-After` for a denial: the longest wait of any denying layer, in whole seconds, at least 1. */
export function retryAfterSeconds(decision: Decision | LayeredDecision): number {
  let waitMs = 0
  for (const d of layersOf(decision)) if (!d.allowed) waitMs = Math.max(waitMs, safe(d.retryAfterMs))
  if (waitMs === 0) waitMs = safe(decision.retryAfterMs)
  return Math.max(1, seconds(waitMs))
}

/** A Structured Field string (RFC 8941 sf-string): printable ASCII, `"` and `\` escaped. */
function sfString(value: string): string {
  let quoted = quotedNames.get(value)
  if (quoted === undefined) {
    quoted = `"${value.replace(/[^\x20-\x7e]/g, '?').replace(/["\\]/g, '\\$&')}"`
    // Policy names come from configuration, so this stays small; the cap guards odd callers.
    if (quotedNames.size < 1024) quotedNames.set(value, quoted)
  }
  return quoted
}
const quotedNames = new Map<string, string>()

/**
 * One `RateLimit-Policy` item: `"name";q=<quota>;w=<window seconds>`. Windows that are not whole
 * seconds are expressed over the nearest whole number of seconds with the quota scaled (rounded down), so
 * the advertised rate never exceeds the real one. Concurrency policies have no window: `q` only.
 */
function policyItem(layer: Decision, policy: ResolvedPolicy | undefined): string {
  if (policy === undefined) return `${sfString(layer.policy)};q=${safe(layer.limit)}`
  let item = policyItems.get(policy)
  if (item === undefined) {
    item = describePolicy(policy)
    policyItems.set(policy, item)
  }
  return item
}
/** Resolved policies are frozen, so their items never change. */
const policyItems = new WeakMap<ResolvedPolicy, string>()

function describePolicy(policy: ResolvedPolicy): string {
  const name = sfString(policy.name)
  if (policy.algorithm === 'concurrency') return `${name};q=${safe(policy.limit)}`
  const windowSeconds = Math.max(1, Math.round(policy.windowMs / 1000))
  const quota =
    windowSeconds * 1000 === policy.windowMs
      ? policy.limit
      : Math.max(1, Math.floor((policy.limit * windowSeconds * 1000) / policy.windowMs))
  return `${name};q=${safe(quota)};w=${windowSeconds}`
}

/** One `RateLimit` item: `"name";r=<remaining>;t=<seconds until the quota resets>`. */
function stateItem(layer: Decision): string {
  const resetSeconds = layer.allowed ? seconds(layer.resetMs) : Math.max(1, seconds(layer.resetMs))
  return `${sfString(layer.policy)};r=${safe(layer.remaining)};t=${resetSeconds}`
}

/**
 * The rate-limit headers for one decision. Legacy headers describe the layer closest to its limit
 * (the denying one on a 429); the IETF fields list every layer, one item each. Numbers are never
 * negative; `Retry-After` (whole seconds, rounded up, at least 1) is present only on a denial.
 * @example
 * const d = await limiter.consume([{ policy: 'perIp', key: ip }, { policy: 'perUser', key: user }])
 * for (const [name, value] of Object.entries(rateLimitHeaders(d, limiter.policies, { headers: 'both', nowMs: Date.now() })))
 *   res.setHeader(name, value)
 */
export function rateLimitHeaders(
  decision: Decision | LayeredDecision,
  policies: Readonly<Record<string, ResolvedPolicy>>,
  options: RateLimitHeaderOptions,
): Record<string, string> {
  const out: Record<string, string> = {}
  const families = options.headers
  if (families === 'none') return out
  const headline = headlineLayer(decision)
  if (families === 'legacy' || families === 'both') {
    out['X-RateLimit-Limit'] = String(safe(headline.limit))
    out['X-RateLimit-Remaining'] = String(safe(headline.remaining))
    const resetMs = headline.allowed ? safe(headline.resetMs) : Math.max(safe(headline.resetMs), 1)
    out['X-RateLimit-Reset'] = String(Math.ceil((safe(options.nowMs) + resetMs) / 1000))
  }
  if (families === 'draft' || families === 'both') {
    const layers = layersOf(decision)
    let policyField = ''
    let stateField = ''
    for (const l of layers) {
      const separator = policyField === '' ? '' : ', '
      policyField +=
        separator + policyItem(l, Object.hasOwn(policies, l.policy) ? policies[l.policy] : undefined)
      stateField += separator + stateItem(l)
    }
    out['RateLimit-Policy'] = policyField
    out.RateLimit = stateField
  }
  if (!decision.allowed) out['Retry-After'] = String(retryAfterSeconds(decision))
  return out
}

export interface RateLimitBody {
  status: number
  contentType: string
  body: string
}

/** The status of a denial caused by the store failing (`onStoreError: 'closed'`): 503 by default, or 429. */
export type StoreUnavailableStatus = 429 | 503

export interface RateLimitBodyOptions {
  /** Status of a denial whose reason is `store_unavailable`. Default 503. */
  storeUnavailableStatus?: StoreUnavailableStatus
}

/**
 * The response body for a decision. Denied: status 429 with
 * `{"error":"rate_limit_exceeded","message":"Too many requests. Please try again in N seconds.","retry_after":N,"policy":"<layer>"}`
 * (`format: 'json'`, the default) or an RFC 9457 problem document (`format: 'problem'`,
 * `application/problem+json`). Denied because the store failed (reason `store_unavailable`, a policy
 * with `onStoreError: 'closed'`): status 503 (or `storeUnavailableStatus`) with
 * `"error":"store_unavailable"`. Allowed (degraded or not): status 200 with `{"allowed":true,"remaining":N}`.
 */
export function rateLimitBody(
  decision: Decision | LayeredDecision,
  format: 'json' | 'problem' = 'json',
  options: RateLimitBodyOptions = {},
): RateLimitBody {
  if (decision.allowed) {
    const remaining = safe(headlineLayer(decision).remaining)
    return {
      status: 200,
      contentType: 'application/json',
      body: JSON.stringify({ allowed: true, remaining }),
    }
  }
  const retryAfter = retryAfterSeconds(decision)
  const policy =
    'deniedBy' in decision && typeof decision.deniedBy === 'string'
      ? decision.deniedBy
      : headlineLayer(decision).policy
  const unavailable = decision.reason === 'store_unavailable'
  const status = unavailable ? (options.storeUnavailableStatus ?? 503) : 429
  const wait = `${retryAfter} ${retryAfter === 1 ? 'second' : 'seconds'}`
  const message = unavailable
    ? `The rate limiter cannot reach its store. Please try again in ${wait}.`
    : `Too many requests. Please try again in ${wait}.`
  const error = unavailable ? 'store_unavailable' : 'rate_limit_exceeded'
  if (format === 'problem') {
    return {
      status,
      contentType: 'application/problem+json',
      body: JSON.stringify({
        type: 'about:blank',
        title: status === 503 ? 'Service Unavailable' : 'Too Many Requests',
        status,
        detail: message,
        retry_after: retryAfter,
        policy,
        ...(unavailable ? { reason: 'store_unavailable' } : {}),
      }),
    }
  }
  return {
    status,
    contentType: 'application/json',
    body: JSON.stringify({ error, message, retry_after: retryAfter, policy }),
  }
}
