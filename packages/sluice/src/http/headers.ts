// What the client sees: rate-limit response headers and the 429 body, as pure functions of a
// Decision. Shared by every adapter and by the decision service (its nginx auth endpoint).
import { periodAt } from '../calendar.js'
import type { Decision, LayeredDecision } from '../limiter.js'
import type { ResolvedPolicy } from '../policy.js'

/**
 * Which header families to send:
 * - `legacy`: `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (Unix seconds);
 * - `draft`: IETF `RateLimit-Policy` and `RateLimit` (draft-ietf-httpapi-ratelimit-headers 08 to 11;
 *   docs/http.md says what each number means per algorithm);
 * - `both` (the default in the adapters) or `none`;
 * - the forms of express-rate-limit's `standardHeaders`, one family each: `draft-6`
 *   (`RateLimit-Policy: 100;w=900`, `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` in
 *   seconds) and `draft-7` (`RateLimit-Policy: 100;w=900` and `RateLimit: limit=100, remaining=99,
 *   reset=900`), both describing the headline layer only; `draft-8`, the Structured Field lists of
 *   `draft`.
 * `Retry-After` is sent on every denial whatever the family, unless `none`.
 */
export type HeaderFamilies = 'legacy' | 'draft' | 'both' | 'none' | 'draft-6' | 'draft-7' | 'draft-8'

export interface RateLimitHeaderOptions {
  headers: HeaderFamilies
  /** The wall clock (ms since the epoch) used to turn relative times into `X-RateLimit-Reset`. */
  nowMs: number
}

/** The layers of a decision: every layer of a layered decision, or the single decision itself. */
function layersOf(decision: Decision | LayeredDecision): readonly Decision[] {
  return 'results' in decision && Array.isArray(decision.results) && decision.results.length > 0
    ? decision.results
    : [decision]
}

/**
 * Does `d` bind the client more than `best`? A denial beats an admit, and among denials the longer
 * wait; among admits the smaller share left (ties: the later reset). Layers the deny cache did not
 * evaluate never win: their numbers are placeholders.
 */
function tighter(d: Decision, best: Decision): boolean {
  if (d.notEvaluated) return false
  if (best.notEvaluated) return true
  if (!best.allowed) return !d.allowed && safe(d.retryAfterMs) > safe(best.retryAfterMs)
  if (!d.allowed) return true
  const share = safe(d.remaining) * safe(best.limit)
  const bestShare = safe(best.remaining) * safe(d.limit)
  return share < bestShare || (share === bestShare && safe(d.resetMs) > safe(best.resetMs))
}

/**
 * The layer the headers describe: on a denial the denying layer that asks for the longest wait,
 * otherwise the layer closest to its limit (smallest share left; ties: the later reset).
 */
export function headlineLayer(decision: Decision | LayeredDecision): Decision {
  const layers = layersOf(decision)
  let best = layers[0] ?? decision
  for (let i = 1; i < layers.length; i++) if (tighter(layers[i]!, best)) best = layers[i]!
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

/**
 * The instant a layer's `t` names, in ms from now. Denied: when this request would pass (the
 * `Retry-After` of the denying layer: the same instant, draft 08/09 section 6). Allowed: when the
 * layer is back to full, except the sliding window counter, whose count fades out over the window
 * after its own: there, when its window turns over (at most `w`), the moment its counters roll;
 * on a calendar policy, the end of the calendar period holding `nowMs`.
 */
function resetInstantMs(layer: Decision, policy: ResolvedPolicy | undefined, nowMs: number): number {
  if (!layer.allowed) return Math.max(1, safe(layer.retryAfterMs))
  const resetMs = safe(layer.resetMs)
  if (policy?.algorithm === 'sliding-window-counter') {
    if (policy.calendar !== undefined)
      return Math.min(resetMs, periodAt(nowMs, policy.calendar).endMs - nowMs)
    if (resetMs > policy.windowMs) return resetMs - policy.windowMs
  }
  return resetMs
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
 * One `RateLimit-Policy` item: `"name";q=<capacity>;w=<seconds>`. `q` is the most the key can
 * spend at once (the burst for token bucket and GCRA), so `r <= q` and `X-RateLimit-Limit` is the
 * headline's `q`; `w` is how long an empty policy takes to refill `q` (the window; for token bucket
 * and GCRA `burst / limit` windows), rounded up to whole seconds so that the advertised rate
 * `q / w` never exceeds the real one. Concurrency policies: `q` slots, `qu="concurrent-requests"`,
 * no window.
 */
function policyItem(layer: Decision, policy: ResolvedPolicy | undefined): string {
  // A key with a per-key override is decided by its own numbers: its limit, and no window claimed.
  if (policy === undefined || layer.override === true)
    return `${sfString(layer.policy)};q=${safe(layer.limit)}`
  return describePolicyCached(policy)
}

function describePolicyCached(policy: ResolvedPolicy): string {
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
  const window = windowSeconds(policy)
  if (window === undefined) return `${name};q=${safe(policy.capacity)};qu="concurrent-requests"`
  return `${name};q=${safe(policy.capacity)};w=${window}`
}

/**
 * A policy's `w`: how long an empty policy takes to refill its capacity (the window; for token
 * bucket and GCRA `burst / limit` windows), in whole seconds rounded up so that the advertised rate
 * is never above the real one. None for concurrency policies, which have no window.
 */
function windowSeconds(policy: ResolvedPolicy): number | undefined {
  if (policy.algorithm === 'concurrency') return undefined
  const refillMs =
    policy.algorithm === 'token-bucket' || policy.algorithm === 'gcra'
      ? (policy.capacity * policy.windowMs) / policy.limit
      : policy.windowMs
  return Math.max(1, Math.ceil(refillMs / 1000))
}

/**
 * The single-policy forms of express-rate-limit's `standardHeaders: 'draft-6' | 'draft-7'`, for the
 * headline layer: `RateLimit-Policy: <q>;w=<w>` (no `w` for a concurrency policy), then either the
 * three `RateLimit-Limit`, `-Remaining`, `-Reset` (draft-6) or one `RateLimit: limit=<q>,
 * remaining=<r>, reset=<t>` (draft-7). The numbers are the IETF fields' `q`, `w`, `r` and `t`.
 */
function writeSinglePolicy(
  out: Record<string, string>,
  headline: Decision,
  policy: ResolvedPolicy | undefined,
  draft7: boolean,
  nowMs: number,
): void {
  const limit = safe(headline.limit)
  const remaining = safe(headline.remaining)
  const reset = seconds(resetInstantMs(headline, policy, nowMs))
  const window = policy === undefined ? undefined : windowSeconds(policy)
  out['RateLimit-Policy'] = window === undefined ? String(limit) : `${limit};w=${window}`
  if (draft7) out.RateLimit = `limit=${limit}, remaining=${remaining}, reset=${reset}`
  else {
    out['RateLimit-Limit'] = String(limit)
    out['RateLimit-Remaining'] = String(remaining)
    out['RateLimit-Reset'] = String(reset)
  }
}

/** One `RateLimit` item: `"name";r=<remaining>;t=<seconds until the instant of resetInstantMs>`. */
function stateItem(layer: Decision, policy: ResolvedPolicy | undefined, nowMs: number): string {
  return `${sfString(layer.policy)};r=${safe(layer.remaining)};t=${seconds(resetInstantMs(layer, policy, nowMs))}`
}

/**
 * The rate-limit headers for one decision. Legacy headers describe the layer closest to its limit
 * (the denying one on a 429); the IETF fields list every policy once: a policy checked on several
 * keys (two rules) reports its tightest layer, and layers the local deny cache did not evaluate are
 * left out of `RateLimit` (their policy stays in `RateLimit-Policy`). Numbers are never negative;
 * `Retry-After` (whole seconds, rounded up, at least 1) is present only on a denial and equals the
 * denying layer's `t`; `X-RateLimit-Reset` names the instant of the headline's `t`.
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
  if (families === 'draft-6' || families === 'draft-7')
    writeSinglePolicy(
      out,
      headline,
      policyNamed(policies, headline.policy),
      families === 'draft-7',
      options.nowMs,
    )
  if (families === 'legacy' || families === 'both') {
    out['X-RateLimit-Limit'] = String(safe(headline.limit))
    out['X-RateLimit-Remaining'] = String(safe(headline.remaining))
    const resetMs = resetInstantMs(headline, policyNamed(policies, headline.policy), options.nowMs)
    out['X-RateLimit-Reset'] = String(Math.ceil((safe(options.nowMs) + resetMs) / 1000))
  }
  if (families === 'draft' || families === 'draft-8' || families === 'both') {
    const layers = layersOf(decision)
    let policyField = ''
    let stateField = ''
    for (let i = 0; i < layers.length; i++) {
      const name = layers[i]!.policy
      if (seenBefore(layers, i, name)) continue
      const policy = policyNamed(policies, name)
      policyField += (policyField === '' ? '' : ', ') + policyItem(layers[i]!, policy)
      // The tightest evaluated layer of this policy (layers are few: a scan, no grouping map).
      let state: Decision | undefined
      for (let j = i; j < layers.length; j++) {
        const d = layers[j]!
        if (d.policy === name && !d.notEvaluated && (state === undefined || tighter(d, state))) state = d
      }
      if (state !== undefined)
        stateField += (stateField === '' ? '' : ', ') + stateItem(state, policy, options.nowMs)
    }
    out['RateLimit-Policy'] = policyField
    if (stateField !== '') out.RateLimit = stateField
  }
  // A denied key (deny list) is refused whenever it asks: no time to wait for.
  if (!decision.allowed && decision.reason !== 'denied')
    out['Retry-After'] = String(retryAfterSeconds(decision))
  return out
}

function policyNamed(
  policies: Readonly<Record<string, ResolvedPolicy>>,
  name: string,
): ResolvedPolicy | undefined {
  return Object.hasOwn(policies, name) ? policies[name] : undefined
}

/** Does a layer before `index` carry policy `name`? */
function seenBefore(layers: readonly Decision[], index: number, name: string): boolean {
  for (let j = 0; j < index; j++) if (layers[j]!.policy === name) return true
  return false
}

/** The answer to a key a deny list holds: 403, the HTTP core's `forbidden` answer, and the policy. */
function deniedBody(decision: Decision | LayeredDecision, format: 'json' | 'problem'): RateLimitBody {
  const policy = (decision as LayeredDecision).deniedBy ?? decision.policy
  const message = DENIED_MESSAGE
  if (format === 'problem')
    return {
      status: 403,
      contentType: 'application/problem+json',
      body: JSON.stringify({ type: 'about:blank', title: 'Forbidden', status: 403, detail: message, policy }),
    }
  return {
    status: 403,
    contentType: 'application/json',
    body: JSON.stringify({ error: 'forbidden', message, policy }),
  }
}

/** What a denied client is told, by the HTTP core's `deny` and by a deny list alike. */
export const DENIED_MESSAGE = 'This client is not allowed to call this API.'

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
 * `"error":"store_unavailable"`. Denied by a deny list (reason `denied`): status 403 with
 * `{"error":"forbidden","message":"...","policy":"<layer>"}`. Allowed (degraded or not): status 200
 * with `{"allowed":true,"remaining":N}`.
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
  if (decision.reason === 'denied') return deniedBody(decision, format)
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

/** What a header writer keeps per policy: the constant `RateLimit-Policy` item and recent numbers as text. */
interface PolicyHeaderParts {
  policy: ResolvedPolicy
  /** `RateLimit-Policy` for a decision of this policy alone. */
  item: string
  /** `"name";r=`: the start of its `RateLimit` item. */
  statePrefix: string
  // The last number written and its text: limits never change and resets change once a second, so
  // most requests reuse the string instead of formatting it again.
  limit: number
  limitText: string
  resetSeconds: number
  resetText: string
  waitSeconds: number
  stateSuffix: string
}

/** Writes the headers of one decision, as `rateLimitHeaders` does; built once per HTTP core. */
export type HeaderWriter = (decision: Decision | LayeredDecision, nowMs: number) => Record<string, string>

/**
 * `rateLimitHeaders` for a fixed policy table and header families, with the per-policy constant
 * parts computed once: the HTTP core's hot path. A single (not layered) decision is written without
 * building a list of layers; anything else goes through `rateLimitHeaders` itself. Same output.
 */
export function headerWriter(
  policies: Readonly<Record<string, ResolvedPolicy>>,
  families: HeaderFamilies,
): HeaderWriter {
  const parts = new Map<string, PolicyHeaderParts>()
  for (const name of Object.keys(policies)) {
    const policy = policies[name]!
    parts.set(name, {
      policy,
      item: describePolicyCached(policy),
      statePrefix: `${sfString(name)};r=`,
      limit: Number.NaN,
      limitText: '',
      resetSeconds: Number.NaN,
      resetText: '',
      waitSeconds: Number.NaN,
      stateSuffix: '',
    })
  }
  const options: RateLimitHeaderOptions = { headers: families, nowMs: 0 }
  const generic = (decision: Decision | LayeredDecision, nowMs: number): Record<string, string> => {
    options.nowMs = nowMs
    return rateLimitHeaders(decision, policies, options)
  }
  if (families === 'none') return () => ({})
  // The single-policy forms are for peers' clients, not the hot path this writer is for.
  if (families === 'draft-6' || families === 'draft-7') return generic
  const legacy = families === 'legacy' || families === 'both'
  const draft = families === 'draft' || families === 'draft-8' || families === 'both'
  return (decision, nowMs) => {
    const layered = decision as LayeredDecision
    if ('results' in decision && Array.isArray(layered.results) && layered.results.length > 0)
      return generic(decision, nowMs)
    const p = Object.hasOwn(policies, decision.policy) ? parts.get(decision.policy) : undefined
    if (p === undefined || decision.notEvaluated === true || decision.override === true)
      return generic(decision, nowMs)
    const resetMs = resetInstantMs(decision, p.policy, nowMs)
    let out: Record<string, string>
    if (legacy) {
      const limit = safe(decision.limit)
      if (limit !== p.limit) {
        p.limit = limit
        p.limitText = String(limit)
      }
      const reset = Math.ceil((safe(nowMs) + resetMs) / 1000)
      if (reset !== p.resetSeconds) {
        p.resetSeconds = reset
        p.resetText = String(reset)
      }
      const remaining = String(safe(decision.remaining))
      out = draft
        ? {
            'X-RateLimit-Limit': p.limitText,
            'X-RateLimit-Remaining': remaining,
            'X-RateLimit-Reset': p.resetText,
            'RateLimit-Policy': p.item,
            RateLimit: p.statePrefix + remaining + waitSuffix(p, seconds(resetMs)),
          }
        : {
            'X-RateLimit-Limit': p.limitText,
            'X-RateLimit-Remaining': remaining,
            'X-RateLimit-Reset': p.resetText,
          }
    } else {
      out = {
        'RateLimit-Policy': p.item,
        RateLimit: p.statePrefix + String(safe(decision.remaining)) + waitSuffix(p, seconds(resetMs)),
      }
    }
    // A denied key (deny list) is refused whenever it asks: no time to wait for.
    if (!decision.allowed && decision.reason !== 'denied')
      out['Retry-After'] = String(retryAfterSeconds(decision))
    return out
  }
}

/** `;t=<seconds>`, reused while the number stays the same. */
function waitSuffix(parts: PolicyHeaderParts, waitSeconds: number): string {
  if (waitSeconds !== parts.waitSeconds) {
    parts.waitSeconds = waitSeconds
    parts.stateSuffix = `;t=${waitSeconds}`
  }
  return parts.stateSuffix
}
