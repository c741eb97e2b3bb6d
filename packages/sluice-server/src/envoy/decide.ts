// One ShouldRateLimit call: validate the request (bounded, typed errors), match each descriptor to
// the most specific configured entry, charge the limiter, and build Envoy's answer.
import { createHash } from 'node:crypto'
import type { Check, Decision, LayeredDecision, Limiter, Policy } from 'sluice'
import { hashedApiKey, resolvePolicy } from 'sluice/internal'
import type { EnvoyLevel, EnvoyLimit, EnvoyNode, EnvoyRules, Unit } from './config.js'
import { UNITS } from './config.js'
import type { PeerSubject } from './peers.js'
import type { EnvoySettings } from './settings.js'

/** Request bounds: what one Envoy call may carry (docs/envoy.md, "Bounds"). */
const BOUNDS = {
  domainBytes: 255,
  descriptors: 64,
  entries: 16,
  keyBytes: 256,
  valueBytes: 1024,
  hitsAddend: 1_000_000,
} as const

/** gRPC status codes this service answers with (the numbers of the gRPC status code list). */
const GRPC = { INVALID_ARGUMENT: 3, NOT_FOUND: 5, PERMISSION_DENIED: 7, UNAVAILABLE: 14 } as const

/** A request refused with a gRPC status and a message saying what to send instead. */
export class EnvoyRequestError extends Error {
  constructor(
    readonly grpcCode: (typeof GRPC)[keyof typeof GRPC],
    message: string,
  ) {
    super(message)
    this.name = 'EnvoyRequestError'
  }
}

export interface WireEntry {
  key: string
  value: string
}
export interface WireDescriptor {
  entries: WireEntry[]
  limit?: { requests_per_unit: number; unit: string } | null
}
export interface WireRequest {
  domain: string
  descriptors: WireDescriptor[]
  hits_addend: number
}

type Code = 'OK' | 'OVER_LIMIT'
export interface WireStatus {
  code: Code
  current_limit?: { name: string; requests_per_unit: number; unit: string }
  limit_remaining: number
  duration_until_reset?: { seconds: number; nanos: number }
}
export interface WireResponse {
  overall_code: Code
  statuses: readonly WireStatus[]
  response_headers_to_add: readonly { key: string; value: string }[]
}

/** What the decision needs from the service: the limiter in force, and one for override policies. */
export interface EnvoyContext {
  readonly rules: EnvoyRules
  readonly settings: EnvoySettings
  readonly limiter: Limiter
  /** Whether a call from this peer (address, verified certificate subject) is answered (grpc.trustedPeers). */
  peerTrusted(address: string | undefined, subject?: PeerSubject): boolean
  /** A limiter holding the configured policies and these extra ones (per-request overrides). */
  limiterWith(extra: Readonly<Record<string, Policy>>): Limiter
  /** Answers a call in the trace of its `traceparent` metadata (telemetry with traces); undefined: off. */
  readonly inTrace?:
    | (<T>(headers: Readonly<Record<string, string | string[] | undefined>>, answer: () => T) => T)
    | undefined
}

// Invalid UTF-8 arrives as U+FFFD (protobuf strings are UTF-8); NUL would end a C string in a log.
const holdsNulOrInvalid = (text: string) => text.includes('\u0000') || text.includes('\ufffd')

function validateText(what: string, text: unknown, max: number): string {
  if (typeof text !== 'string' || text === '')
    throw new EnvoyRequestError(
      GRPC.INVALID_ARGUMENT,
      `${what} is empty; every entry needs a key and a value`,
    )
  if (text.length > max && Buffer.byteLength(text) > max)
    throw new EnvoyRequestError(GRPC.INVALID_ARGUMENT, `${what} is over ${max} bytes`)
  if (holdsNulOrInvalid(text))
    throw new EnvoyRequestError(GRPC.INVALID_ARGUMENT, `${what} holds a NUL or invalid UTF-8`)
  return text
}

/** Whether validateText would take `text` (checked without building the field's name). */
const textIsValid = (text: unknown, max: number) =>
  typeof text === 'string' &&
  text !== '' &&
  (text.length <= max || Buffer.byteLength(text) <= max) &&
  !holdsNulOrInvalid(text)

/** The request's shape checked against BOUNDS; throws EnvoyRequestError (INVALID_ARGUMENT). */
function validateRequest(request: WireRequest): number {
  const { domain, descriptors } = request
  if (typeof domain !== 'string' || domain === '')
    throw new EnvoyRequestError(
      GRPC.INVALID_ARGUMENT,
      'domain is empty; Envoy sends the domain of its rate limit filter',
    )
  if (domain.length > BOUNDS.domainBytes / 3 && Buffer.byteLength(domain) > BOUNDS.domainBytes)
    throw new EnvoyRequestError(GRPC.INVALID_ARGUMENT, `domain is over ${BOUNDS.domainBytes} bytes`)
  if (!Array.isArray(descriptors) || descriptors.length === 0)
    throw new EnvoyRequestError(GRPC.INVALID_ARGUMENT, 'no descriptors; send at least one')
  if (descriptors.length > BOUNDS.descriptors)
    throw new EnvoyRequestError(
      GRPC.INVALID_ARGUMENT,
      `${descriptors.length} descriptors; at most ${BOUNDS.descriptors} per request`,
    )
  for (let i = 0; i < descriptors.length; i++) {
    const entries = descriptors[i]!.entries
    if (entries.length === 0)
      throw new EnvoyRequestError(GRPC.INVALID_ARGUMENT, `descriptors[${i}] has no entries`)
    if (entries.length > BOUNDS.entries)
      throw new EnvoyRequestError(
        GRPC.INVALID_ARGUMENT,
        `descriptors[${i}] has ${entries.length} entries; at most ${BOUNDS.entries}`,
      )
    for (let j = 0; j < entries.length; j++) {
      const { key, value } = entries[j]!
      // The message names its field only once it is known to be refused.
      if (!textIsValid(key, BOUNDS.keyBytes))
        validateText(`descriptors[${i}].entries[${j}].key`, key, BOUNDS.keyBytes)
      if (!textIsValid(value, BOUNDS.valueBytes))
        validateText(`descriptors[${i}].entries[${j}].value`, value, BOUNDS.valueBytes)
    }
  }
  const hits = request.hits_addend === 0 ? 1 : request.hits_addend
  if (!Number.isSafeInteger(hits) || hits < 1 || hits > BOUNDS.hitsAddend)
    throw new EnvoyRequestError(
      GRPC.INVALID_ARGUMENT,
      `hits_addend ${request.hits_addend} is over ${BOUNDS.hitsAddend}`,
    )
  return hits
}

interface Matched {
  node: EnvoyNode
  /** `k=v|k=v` with the request's values (a share_threshold wildcard's pattern instead). */
  key: string
}

/**
 * Whether `value` matches a glob given as its literal parts between stars (`foo*bar*` ->
 * ['foo', 'bar', '']). The first part must be a prefix and the last a suffix; each middle part is
 * taken at its leftmost place after the one before. The leftmost place leaves the most room for
 * the parts after it, so when it fails every later place fails too: nothing is ever tried again,
 * and the cost is one left-to-right search of the value whatever the number of stars (a regular
 * expression with one `.*` per star backtracks: seconds for a 1 KB value and four stars).
 * @example matchesGlob(['svc', 'ep', 'rpc'], 'svc-a.ep-b.rpc') // true
 */
export function matchesGlob(parts: readonly string[], value: string): boolean {
  const first = parts[0] ?? ''
  if (parts.length === 1) return first === value
  const last = parts[parts.length - 1]!
  const end = value.length - last.length
  if (end < first.length || !value.startsWith(first) || !value.endsWith(last)) return false
  let from = first.length
  for (let i = 1; i < parts.length - 1; i++) {
    const part = parts[i]!
    const at = value.indexOf(part, from)
    if (at < 0 || at + part.length > end) return false
    from = at + part.length
  }
  return true
}

/** Whether a descriptor key carries a secret (EnvoySettings.secretKeys, lower case). */
type IsSecret = (key: string) => boolean

let secretKeysSeen: readonly string[] | undefined
let isSecretOfSeen: IsSecret = () => false
/**
 * Whether `text` is its own lower case, told without toLowerCase (which makes a new string every
 * time): no A-Z, and nothing outside ASCII (whose case this does not tell).
 */
function isLowerAscii(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if ((c >= 0x41 && c <= 0x5a) || c >= 0x80) return false
  }
  return true
}

/** The test for the settings in force (made once per settings object: a reload makes a new one). */
function secretTest(secretKeys: readonly string[]): IsSecret {
  if (secretKeys !== secretKeysSeen) {
    const names = new Set(secretKeys)
    secretKeysSeen = secretKeys
    isSecretOfSeen = (key) => names.has(isLowerAscii(key) ? key : key.toLowerCase())
  }
  return isSecretOfSeen
}

/**
 * `key=value` as a counter's key names it. A secret's value is matched as sent but named by its hash
 * (the HTTP path's `apikey:<hash>`), so it never reaches a store key, a metric, a log or the dashboard.
 */
const entryKey = (key: string, value: string, isSecret: IsSecret) =>
  `${key}=${isSecret(key) ? hashedApiKey(value) : value}`

/** The node of `level` an entry picks: its exact value, else the first wildcard it matches, else its key alone. */
function nodeOf(level: EnvoyLevel, key: string, value: string): EnvoyNode | undefined {
  // A level without exact values or wildcards (key-only entries) costs no lookup of either.
  if (level.exact.size > 0) {
    const exact = level.exact.get(`${key}\u0000${value}`)
    if (exact !== undefined) return exact
  }
  if (level.wildcards.size > 0) {
    const wildcards = level.wildcards.get(key)
    if (wildcards !== undefined) for (const n of wildcards) if (matchesGlob(n.wildcard!, value)) return n
  }
  return level.keyOnly.get(key)
}

/** The most specific entry for the descriptor: exact value, then wildcard, then key-only, per level. */
export function match(
  level: EnvoyLevel,
  entries: readonly WireEntry[],
  isSecret: IsSecret = () => false,
): Matched | undefined {
  let current = level
  let node: EnvoyNode | undefined
  let key = ''
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i]!
    node = nodeOf(current, entry.key, entry.value)
    if (node === undefined) return undefined
    const part =
      node.shareThreshold && node.wildcard !== undefined
        ? `${entry.key}=${node.value}`
        : entryKey(entry.key, entry.value, isSecret)
    key = i === 0 ? part : `${key}|${part}`
    current = node.children
  }
  return node === undefined ? undefined : { node, key }
}

/** The counter key of a descriptor no entry matches (`k=v|k=v`): only an override charges one. */
function unmatchedKey(entries: readonly WireEntry[], isSecret: IsSecret): string {
  let key = ''
  for (let i = 0; i < entries.length; i++) {
    const part = entryKey(entries[i]!.key, entries[i]!.value, isSecret)
    key = i === 0 ? part : `${key}|${part}`
  }
  return key
}

/** A long key is stored by its hash (keys are bounded in the store, not only here). */
function storeKey(domain: string, key: string): string {
  const full = `${domain}|${key}`
  return full.length <= 512 ? full : `sha256:${createHash('sha256').update(full).digest('hex')}`
}

const UNIT_OF_WIRE: Record<string, Unit> = {
  SECOND: 'second',
  MINUTE: 'minute',
  HOUR: 'hour',
  DAY: 'day',
  MONTH: 'month',
  YEAR: 'year',
}

/**
 * What one descriptor is checked against, before the store is asked. `over`: always over the limit
 * without asking the store (`requests_per_unit: 0`, or more than the limit can ever admit).
 */
type Plan = typeof NONE | { kind: 'over'; limit: EnvoyLimit; shadow: boolean } | CheckPlan
/** A descriptor with no limit that applies: one object for every such descriptor of every call. */
const NONE = { kind: 'none' } as const
/**
 * A descriptor the limiter decides, and its decision once made. `counter`: the stored state it
 * spends (storage id and key): two limits of one id, such as two per-request limits of one unit,
 * spend one counter.
 */
interface CheckPlan {
  kind: 'check'
  limit: EnvoyLimit
  check: Check
  shadow: boolean
  decision: Decision | undefined
}

/** The counter a check plan spends; a policy id holds no NUL, so the pair is unambiguous. */
const counterOf = (p: CheckPlan) => `${p.limit.policy?.id ?? p.limit.policyName}\u0000${p.check.key}`

function durationOf(ms: number): { seconds: number; nanos: number } {
  const whole = Math.max(0, Math.ceil(ms))
  return { seconds: Math.floor(whole / 1000), nanos: (whole % 1000) * 1_000_000 }
}

type CurrentLimit = NonNullable<WireStatus['current_limit']>
/** Each configured limit's `current_limit`, made once: answers share it and nothing changes it. */
const currentLimits = new WeakMap<EnvoyLimit, CurrentLimit>()
function currentLimit(limit: EnvoyLimit): CurrentLimit {
  let current = currentLimits.get(limit)
  if (current === undefined) {
    current = {
      name: limit.name,
      requests_per_unit: limit.requestsPerUnit,
      unit: limit.unit === undefined ? 'UNKNOWN' : limit.unit.toUpperCase(),
    }
    currentLimits.set(limit, current)
  }
  return current
}

const sha1Hex = (text: string, length: number) =>
  createHash('sha1').update(text).digest('hex').slice(0, length)

/**
 * The limit a per-request override asks for, as a policy of its own named `envoy.o.<shape>`. Its
 * storage id leaves `requests_per_unit` out (`envoy.o.<algorithm and window>`): one counter per
 * descriptor and unit whatever limit Envoy sends, as envoyproxy/ratelimit counts them, so the
 * counters are few and survive the policy being dropped (overrides.ts).
 */
function overrideLimit(
  override: NonNullable<WireDescriptor['limit']>,
  base: EnvoyLimit | undefined,
  index: number,
): { limit: EnvoyLimit; policy: Policy } {
  const unit = UNIT_OF_WIRE[override.unit]
  if (unit === undefined || override.requests_per_unit < 1)
    throw new EnvoyRequestError(
      GRPC.INVALID_ARGUMENT,
      `descriptors[${index}].limit needs requests_per_unit >= 1 and unit SECOND, MINUTE, HOUR, DAY, MONTH or YEAR`,
    )
  const algorithm = base?.algorithm ?? 'fixed-window'
  const windowMs = UNITS[unit]
  const policy = {
    id: `envoy.o.${sha1Hex(`${algorithm}|${windowMs}`, 6)}`,
    algorithm,
    limit: override.requests_per_unit,
    window: windowMs,
  } as Policy
  const policyName = `envoy.o.${sha1Hex(`${algorithm}|${policy.limit}|${windowMs}`, 10)}`
  let capacity: number
  try {
    capacity = resolvePolicy(policyName, policy).capacity
  } catch (error) {
    throw new EnvoyRequestError(
      GRPC.INVALID_ARGUMENT,
      `descriptors[${index}].limit cannot be used: ${(error as Error).message}`,
    )
  }
  return {
    policy,
    limit: {
      name: base?.name ?? 'override',
      policyName,
      policy,
      unlimited: false,
      requestsPerUnit: override.requests_per_unit,
      unit,
      algorithm,
      windowMs,
      capacity,
      replaces: [],
    },
  }
}

interface Planned {
  /** One per descriptor, in the request's order. */
  plans: Plan[]
  /** The policies of per-request overrides; undefined when no descriptor carries one. */
  extra: Record<string, Policy> | undefined
}

/**
 * Each descriptor's plan, in one pass. What it refuses comes in this order: an override that
 * cannot be used (any descriptor), then a hits_addend over a limit that applies (the first such).
 */
function plan(ctx: EnvoyContext, request: WireRequest, hits: number): Planned {
  const level = ctx.rules.domains.get(request.domain)
  if (level === undefined)
    throw new EnvoyRequestError(
      GRPC.NOT_FOUND,
      `unknown domain ${JSON.stringify(request.domain.slice(0, 64))}; configured: ${[...ctx.rules.domains.keys()].join(', ')}`,
    )
  // The policies of per-request overrides, made only when a descriptor carries one.
  let extra: Record<string, Policy> | undefined
  // Limits another applicable limit replaces (envoyproxy/ratelimit's `replaces`), when any does.
  let replaced: Set<string> | undefined
  let tooManyHits = false
  const isSecret = secretTest(ctx.settings.secretKeys)
  const { descriptors } = request
  // Made at its length: an array grown by push from empty takes room for 17.
  const plans = new Array<Plan>(descriptors.length)
  for (let i = 0; i < descriptors.length; i++) {
    const d = descriptors[i]!
    const m = match(level, d.entries, isSecret)
    let limit = m?.node.limit
    let key = m?.key
    if (d.limit != null) {
      const o = overrideLimit(d.limit, limit, i)
      extra ??= {}
      extra[o.limit.policyName!] = o.policy
      limit = o.limit
      key = `override|${key ?? unmatchedKey(d.entries, isSecret)}`
    }
    if (limit !== undefined && limit.replaces.length > 0) {
      replaced ??= new Set()
      for (const name of limit.replaces) replaced.add(name)
    }
    const shadow = m?.node.shadowMode ?? false
    if (limit === undefined || limit.unlimited) plans[i] = NONE
    else if (limit.policyName === undefined) plans[i] = { kind: 'over', limit, shadow }
    else {
      if (hits > limit.capacity) tooManyHits = true
      // A limit comes from a matched node or an override, either of which gave the key.
      const check = { policy: limit.policyName, key: storeKey(request.domain, key!), cost: hits }
      plans[i] = { kind: 'check', limit, check, shadow, decision: undefined }
    }
  }
  if (replaced !== undefined)
    for (let i = 0; i < plans.length; i++) {
      const p = plans[i]!
      if (p.kind !== 'none' && replaced.has(p.limit.name)) plans[i] = NONE
    }
  if (tooManyHits)
    for (let i = 0; i < plans.length; i++) {
      const p = plans[i]!
      if (p.kind === 'check' && hits > p.limit.capacity)
        throw new EnvoyRequestError(
          GRPC.INVALID_ARGUMENT,
          `hits_addend ${hits} can never be admitted by descriptors[${i}] (limit ${p.limit.name}: ${p.limit.capacity})`,
        )
    }
  // One descriptor cannot name a counter twice.
  const summed = ctx.settings.charge === 'all-or-nothing' && plans.length > 1
  return { plans: summed ? overIfSummedTooHigh(plans, hits) : plans, extra }
}

/**
 * All-or-nothing decides one layered check in which a counter named by several descriptors (the same
 * descriptor twice, or values sharing one share_threshold counter) is one step of their summed cost
 * against the strictest of their limits: each occurrence counts, as in envoyproxy/ratelimit. A sum
 * that limit can never admit is over whatever the counter holds: those descriptors answer
 * OVER_LIMIT and are not charged.
 */
function overIfSummedTooHigh(plans: Plan[], hits: number): Plan[] {
  const groups = new Map<string, { sum: number; capacity: number }>()
  let repeated = false
  for (const p of plans) {
    if (p.kind !== 'check' || p.shadow) continue
    const counter = counterOf(p)
    const group = groups.get(counter)
    if (group === undefined) groups.set(counter, { sum: hits, capacity: p.limit.capacity })
    else {
      repeated = true
      group.sum += hits
      group.capacity = Math.min(group.capacity, p.limit.capacity)
    }
  }
  if (!repeated) return plans
  return plans.map((p) => {
    if (p.kind !== 'check' || p.shadow) return p
    const { sum, capacity } = groups.get(counterOf(p))!
    return sum > capacity ? { kind: 'over', limit: p.limit, shadow: false } : p
  })
}

/** A limiter call's options for a cost of `hits`: none for 1, the limiter's default. */
const costOf = (hits: number): { cost: number } | undefined => (hits === 1 ? undefined : { cost: hits })

/**
 * Read checks without charging: all-or-nothing when another descriptor is over whatever the store
 * holds (a ban, or a sum that can never be admitted), so the request is refused before anything is spent.
 */
function peekEach(limiter: Limiter, plans: readonly CheckPlan[]): Promise<Decision[]> {
  return Promise.all(plans.map((p) => limiter.peek(p.check.policy, p.check.key, { cost: p.check.cost ?? 1 })))
}

type MaybePromise<T> = T | Promise<T>

/**
 * Decide checks one by one (shadowed ones, or `charge: every`): a repeated counter is charged per
 * occurrence. The decisions themselves when the store decided in-process, else a promise of them.
 */
function each(limiter: Limiter, checks: readonly Check[]): MaybePromise<Decision[]> {
  const decided: MaybePromise<Decision>[] = []
  let pending = false
  for (const c of checks) {
    const d = limiter.decide(c.policy, c.key, costOf(c.cost ?? 1))
    if (d instanceof Promise) pending = true
    decided.push(d)
  }
  return pending ? Promise.all(decided) : (decided as Decision[])
}

const checksOf = (plans: readonly CheckPlan[]) => plans.map((p) => p.check)

/**
 * Decide checks all-or-nothing: one layered check, a counter named more than once being one step of
 * the summed cost under the strictest of its limits (a layered check takes each counter once);
 * every occurrence gets that step's decision.
 */
function allOrNothing(limiter: Limiter, plans: readonly CheckPlan[]): MaybePromise<Decision[]> {
  const steps = new Map<string, { check: Check; capacity: number; occurrences: number[] }>()
  plans.forEach((p, i) => {
    const counter = counterOf(p)
    const step = steps.get(counter)
    if (step === undefined)
      steps.set(counter, { check: { ...p.check }, capacity: p.limit.capacity, occurrences: [i] })
    else {
      const cost = (step.check.cost ?? 1) + (p.check.cost ?? 1)
      if (p.limit.capacity < step.capacity) {
        step.check = { ...p.check }
        step.capacity = p.limit.capacity
      }
      step.check.cost = cost
      step.occurrences.push(i)
    }
  })
  const merged = [...steps.values()]
  const spread = (results: readonly Decision[]) => {
    const out = new Array<Decision>(plans.length)
    merged.forEach((m, n) => {
      for (const i of m.occurrences) out[i] = results[n]!
    })
    return out
  }
  const results: MaybePromise<readonly Decision[]> =
    merged.length === 1
      ? each(limiter, [merged[0]!.check])
      : resultsOf(limiter.decide(merged.map((m) => m.check)))
  return results instanceof Promise ? results.then(spread) : spread(results)
}

function resultsOf(layered: MaybePromise<LayeredDecision>): MaybePromise<readonly Decision[]> {
  return layered instanceof Promise ? layered.then((l) => l.results) : layered.results
}

/**
 * Answer a ShouldRateLimit request: the answer itself when the store decided in-process (the memory
 * store), else a promise of it. Throws (or rejects with) EnvoyRequestError for what it refuses.
 */
export function shouldRateLimit(ctx: EnvoyContext, request: WireRequest): MaybePromise<WireResponse> {
  const hits = validateRequest(request)
  const { plans, extra } = plan(ctx, request, hits)
  const limiter = extra === undefined ? ctx.limiter : ctx.limiterWith(extra)
  let enforced = 0
  let shadowed = 0
  let refused = false
  let only: CheckPlan | undefined
  for (const p of plans) {
    if (p.kind === 'check') {
      if (p.shadow) shadowed++
      else {
        enforced++
        only = p
      }
    } else if (p.kind === 'over' && !p.shadow) refused = true
  }
  const refusedAlready = refused && ctx.settings.charge !== 'every'
  // The usual call: one descriptor the limiter decides, and nothing else to ask it.
  if (enforced === 1 && shadowed === 0 && !refusedAlready) {
    const decided = only!
    const d = limiter.decide(decided.check.policy, decided.check.key, costOf(hits))
    if (d instanceof Promise)
      return d.then((decision) => {
        decided.decision = decision
        return answerOf(ctx, plans)
      })
    decided.decision = d
    return answerOf(ctx, plans)
  }

  const enforcedPlans: CheckPlan[] = []
  const shadowPlans: CheckPlan[] = []
  for (const p of plans) if (p.kind === 'check') (p.shadow ? shadowPlans : enforcedPlans).push(p)
  const main: MaybePromise<Decision[]> =
    enforced === 0
      ? []
      : refusedAlready
        ? peekEach(limiter, enforcedPlans)
        : enforced === 1 || ctx.settings.charge === 'every'
          ? each(limiter, checksOf(enforcedPlans))
          : allOrNothing(limiter, enforcedPlans)
  const shadow = shadowed === 0 ? [] : each(limiter, checksOf(shadowPlans))
  if (main instanceof Promise || shadow instanceof Promise)
    return Promise.all([main, shadow]).then(([m, s]) => {
      settle(enforcedPlans, m)
      settle(shadowPlans, s)
      return answerOf(ctx, plans)
    })
  settle(enforcedPlans, main)
  settle(shadowPlans, shadow)
  return answerOf(ctx, plans)
}

/** Each plan's decision, in order. */
function settle(plans: readonly CheckPlan[], decisions: readonly Decision[]): void {
  for (let n = 0; n < plans.length; n++) plans[n]!.decision = decisions[n]!
}

const NONE_STATUS: WireStatus = { code: 'OK', limit_remaining: 0 }
const NO_HEADERS: WireResponse['response_headers_to_add'] = []

/**
 * Envoy's answer from the plans and their decisions; UNAVAILABLE when the store did not answer one.
 */
function answerOf(ctx: EnvoyContext, plans: readonly Plan[]): WireResponse {
  for (const p of plans)
    if (p.kind === 'check' && p.decision!.reason === 'store_unavailable')
      throw new EnvoyRequestError(
        GRPC.UNAVAILABLE,
        "the store did not answer; Envoy's failure_mode_deny decides this request",
      )
  let over = false
  // The status with the fewest remaining, and its reset, for the RateLimit headers.
  let tightest: WireStatus | undefined
  let tightestResetMs = 0
  const statuses = new Array<WireStatus>(plans.length)
  for (let i = 0; i < plans.length; i++) {
    const p = plans[i]!
    if (p.kind === 'none') {
      statuses[i] = NONE_STATUS
      continue
    }
    if (p.kind === 'over') {
      if (!p.shadow) over = true
      statuses[i] = {
        code: p.shadow ? 'OK' : 'OVER_LIMIT',
        current_limit: currentLimit(p.limit),
        limit_remaining: 0,
      }
      continue
    }
    const d = p.decision!
    const denied = !d.allowed
    if (denied && !p.shadow) over = true
    const resetMs = denied ? d.retryAfterMs : d.resetMs
    const status: WireStatus = {
      code: denied && !p.shadow ? 'OVER_LIMIT' : 'OK',
      current_limit: currentLimit(p.limit),
      limit_remaining: d.remaining,
      duration_until_reset: durationOf(resetMs),
    }
    if (tightest === undefined || d.remaining < tightest.limit_remaining) {
      tightest = status
      tightestResetMs = resetMs
    }
    statuses[i] = status
  }
  const response_headers_to_add =
    ctx.settings.responseHeaders && tightest !== undefined
      ? [
          { key: 'RateLimit-Limit', value: String(tightest.current_limit!.requests_per_unit) },
          { key: 'RateLimit-Remaining', value: String(tightest.limit_remaining) },
          { key: 'RateLimit-Reset', value: String(Math.ceil(tightestResetMs / 1000)) },
        ]
      : NO_HEADERS
  return { overall_code: over ? 'OVER_LIMIT' : 'OK', statuses, response_headers_to_add }
}
