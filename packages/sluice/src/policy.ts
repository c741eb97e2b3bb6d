// Policies as users write them, and the resolved form (integers only) that algorithms and stores use.
import { type CalendarSpec, calendarSpec } from './calendar-policy.js'
import type { Duration } from './duration.js'
import { parseDuration } from './duration.js'
import { InvalidPolicyError } from './errors.js'
import { type CompiledLists, compileLists, type ListEntries } from './lists.js'
import {
  count,
  duration,
  must,
  object,
  oneOf,
  optional,
  type Shape,
  text,
  type Validator,
} from './option-checks.js'
import { checkKnownKeys, isOptionsObject, unknownOptionMessage } from './options.js'
import { type PenaltyOptions, type ResolvedPenalty, resolvePenalty } from './penalty.js'

export const ALGORITHMS = [
  'fixed-window',
  'sliding-window-log',
  'sliding-window-counter',
  'token-bucket',
  'gcra',
  'concurrency',
] as const
export type AlgorithmName = (typeof ALGORITHMS)[number]
export type RateAlgorithmName = Exclude<AlgorithmName, 'concurrency'>
/** The algorithms hybrid mode can count: their state is a sum of admissions, which instances can add up. */
export const HYBRID_ALGORITHMS = ['fixed-window', 'sliding-window-counter', 'token-bucket', 'gcra'] as const
export type HybridAlgorithmName = (typeof HYBRID_ALGORITHMS)[number]

/** What a policy decides when its store cannot answer (see docs/reliability.md). */
export type StoreErrorMode = 'open' | 'closed' | 'memory'
export const STORE_ERROR_MODES = ['open', 'closed', 'memory'] as const

/** What a cost above a policy's capacity gets: `SLUICE_INVALID_COST` (`error`) or a denial (`deny`). */
export type CostAboveCapacity = 'error' | 'deny'

/** Where a policy's limit holds with `multiRegionStore`: per region (default) or across all regions. */
export type PolicyScope = 'region' | 'global'
/** The algorithms `scope: 'global'` can bound (their windows are aligned to the clock, so regions count the same windows). */
const GLOBAL_ALGORITHMS = ['sliding-window-counter'] as const satisfies readonly AlgorithmName[]

/** `limit` requests per `window`. For token bucket and GCRA, `burst` is the capacity (default `limit`). */
export interface RatePolicy {
  algorithm: RateAlgorithmName
  /**
   * The name the store keeps this policy's counters under. Default: the policy's name. Two policies
   * with one id share counters; a new id starts fresh ones (the service gives each policy shape its
   * own). 1-64 letters, digits, '_', '-' or '.'; with an id the name may be any text (no control
   * characters, at most 256), since only the id reaches a store key.
   */
  id?: string
  limit: number
  window: Duration
  burst?: number
  /** When the store fails: admit (`open`, the limiter's default), deny (`closed`) or decide in memory. */
  onStoreError?: StoreErrorMode
  /**
   * `exact` (default): every decision is one store call. `hybrid` (fixed-window,
   * sliding-window-counter, token-bucket and gcra; not sliding-window-log): each
   * instance decides locally and syncs its counts with Redis every `syncEvery`; see docs/scale.md
   * for the over-admission bound.
   */
  mode?: 'exact' | 'hybrid'
  /** Hybrid mode: how often counts are flushed to Redis and the global total pulled back. Default `100ms`. */
  syncEvery?: Duration
  /**
   * With `multiRegionStore` (from `sluice/redis`): `region` (default) decides exactly on the local
   * region's Redis; `global` (sliding-window-counter only) shares the limit across regions, each
   * decision still local, counts exchanged every `syncEvery` of the store. docs/topologies.md has
   * the over-admission bound. Other stores have one place of truth: both scopes are exact there.
   */
  scope?: PolicyScope
  /**
   * Memory store: the most keys of this policy held at once. When they are all held, a new key of
   * this policy evicts one of this policy's own (keys that would admit first, denying or blocked
   * keys last), so a flood of one policy never evicts another's. Default: only the store's `maxKeys`.
   */
  maxKeys?: number
  /**
   * A consume denied for lack of units blocks the key for this long (rate-limiter-flexible's
   * `blockDuration`): that denial reports `retryAfterMs` = the block, and every request of the key is
   * denied with `reason: 'blocked'` until it ends. Peek never blocks. Default: no block.
   * @example { algorithm: 'fixed-window', limit: 5, window: '1m', blockDuration: '5m' }
   */
  blockDuration?: Duration
  /**
   * A cost this policy can never admit (above its capacity): `error` (default) throws
   * `SLUICE_INVALID_COST`; `deny` answers a denial with `reason: 'cost_above_capacity'` and the key's
   * numbers as they are, committing nothing (for costs taken from user input).
   */
  costAboveCapacity?: CostAboveCapacity
  /**
   * Keys and addresses this policy never limits (`allow`: allowed with full `remaining`, no store
   * call) or always refuses (`deny`: `reason: 'denied'`, no store call, nothing spent; a deny wins).
   * `keys` match the key exactly; `ips` (addresses, CIDRs) match a key that is an address, bare or
   * in the HTTP core's `ip:<address>` form. See docs/policies.md#allow-and-deny-lists.
   * @example { algorithm: 'fixed-window', limit: 5, window: '1m', deny: { ips: ['203.0.113.0/24'] } }
   */
  allow?: ListEntries
  /** See `allow`. */
  deny?: ListEntries
  /**
   * Escalating penalties: after `after` denials for lack of units within `within`, the key is
   * blocked for `block`, multiplied by `factor` (default 2) at each repeat up to `max` (default 24h).
   * Not with `blockDuration` nor `mode: 'hybrid'`. docs/policies.md#escalating-penalties.
   * @example { algorithm: 'fixed-window', limit: 5, window: '1m', penalty: { after: 3, within: '1m', block: '5m' } }
   */
  penalty?: PenaltyOptions
  /**
   * A fraction in (0, 1): an allowed decision that leaves the key at most `limit - ceil(limit x
   * nearLimit)` units (burst for token bucket and GCRA) carries `nearLimit: true`, and the one that
   * crosses that line `nearLimitCrossed: true` (docs/policies.md, "Near-limit signal"). Default: none.
   * @example { algorithm: 'fixed-window', limit: 100, window: '1m', nearLimit: 0.8 }
   */
  nearLimit?: number
  /**
   * `calendar`: windows start at the calendar boundaries of `timeZone` (fixed-window and
   * sliding-window-counter; a `window` of exactly `1d`, `1w` (ISO weeks, from Monday), `1mo` or
   * `1y`). Default: a window of its own length (`1mo` is 30 days), as the algorithm draws it.
   * @example { algorithm: 'fixed-window', limit: 10_000, window: '1mo', align: 'calendar', timeZone: 'Europe/Berlin' }
   */
  align?: 'calendar'
  /** With `align: 'calendar'`: the IANA zone whose midnights start the windows. Default `UTC`. */
  timeZone?: string
}

/** At most `limit` leases held at once; a lease never released expires after `timeout`. */
export interface ConcurrencyPolicy {
  algorithm: 'concurrency'
  /**
   * The name the store keeps this policy's counters under. Default: the policy's name. Two policies
   * with one id share counters; a new id starts fresh ones (the service gives each policy shape its
   * own). 1-64 letters, digits, '_', '-' or '.'; with an id the name may be any text (no control
   * characters, at most 256), since only the id reaches a store key.
   */
  id?: string
  limit: number
  timeout: Duration
  /** When the store fails: admit (`open`, the limiter's default), deny (`closed`) or decide in memory. */
  onStoreError?: StoreErrorMode
  /** Leases are held per region only: `region` is the one scope concurrency has. */
  scope?: 'region'
  /**
   * Memory store: the most keys of this policy held at once. When they are all held, a new key of
   * this policy evicts one of this policy's own (keys that would admit first, denying or blocked
   * keys last), so a flood of one policy never evicts another's. Default: only the store's `maxKeys`.
   */
  maxKeys?: number
  /**
   * A cost this policy can never admit (above its capacity): `error` (default) throws
   * `SLUICE_INVALID_COST`; `deny` answers a denial with `reason: 'cost_above_capacity'` and the key's
   * numbers as they are, committing nothing (for costs taken from user input).
   */
  costAboveCapacity?: CostAboveCapacity
  /**
   * Keys and addresses this policy never limits (`allow`: allowed with full `remaining`, no store
   * call) or always refuses (`deny`: `reason: 'denied'`, no store call, nothing spent; a deny wins).
   * `keys` match the key exactly; `ips` (addresses, CIDRs) match a key that is an address, bare or
   * in the HTTP core's `ip:<address>` form. See docs/policies.md#allow-and-deny-lists.
   * @example { algorithm: 'fixed-window', limit: 5, window: '1m', deny: { ips: ['203.0.113.0/24'] } }
   */
  allow?: ListEntries
  /** See `allow`. */
  deny?: ListEntries
  /** As on a rate policy: a fraction in (0, 1) of the leases held (docs/policies.md). */
  nearLimit?: number
}

export type Policy = RatePolicy | ConcurrencyPolicy

/** A policy after validation: integers only, durations in ms. What algorithms and stores see. */
export interface ResolvedPolicy {
  /** What callers name it (`consume('api', ...)`), and what decisions, events and headers show. */
  readonly name: string
  /** What stores and caches key its state on: the policy's `id`, else its name. */
  readonly id: string
  readonly algorithm: AlgorithmName
  /** Requests per window (rate algorithms) or simultaneous leases (concurrency). */
  readonly limit: number
  /** The window; for concurrency, the lease timeout. */
  readonly windowMs: number
  /** The most a key can spend at once: `burst` for token bucket and GCRA, `limit` otherwise. */
  readonly capacity: number
  /** Set only when the policy chose its own; otherwise the limiter's `onStoreError` applies. */
  readonly onStoreError?: StoreErrorMode
  /** Set only for hybrid policies: the sync interval in ms (see src/scale/hybrid.ts). */
  readonly syncEveryMs?: number
  /** Set only for `scope: 'global'` policies (multiRegionStore shares them across regions). */
  readonly scope?: 'global'
  /** Set only when the policy bounds its own keys in the memory store (see src/stores/memory.ts). */
  readonly maxKeys?: number
  /** Set only when the policy blocks a key denied for lack of units: the block's length in ms. */
  readonly blockDurationMs?: number
  /** Set only when a cost above the capacity is answered as a denial rather than an error. */
  readonly costAboveCapacity?: 'deny'
  /** Set only when the policy has an allow or a deny list (src/lists.ts). */
  readonly lists?: CompiledLists
  /** Set only for a policy with escalating penalties. */
  readonly penalty?: ResolvedPenalty
  /** Set only for a policy with `nearLimit`: the fraction as written. */
  readonly nearLimit?: number
  /** Set only for a policy with `nearLimit`: the most units a key may have left and be near its limit. */
  readonly nearLimitRemaining?: number
  /** Set only for `align: 'calendar'` policies: the calendar unit and zone of their windows. */
  readonly calendar?: CalendarSpec
}

// limit x window and capacity x window stay exact in doubles (JavaScript and Redis Lua alike).
const MAX_PRODUCT = 2 ** 50
const MAX_LOG_LIMIT = 1_000_000
const POLICY_NAME = /^[A-Za-z0-9_.-]{1,64}$/
// A name that is not also the id (the policy has an `id`) never reaches a store key: any text
// without control characters, so the service can name a policy as written (`envoy:edge.path_/v1`).
const DISPLAY_NAME = /^\P{Cc}{1,256}$/u

const durationCheck = duration('must be a duration like 10s or 5m')
const storeErrorCheck = optional(oneOf(STORE_ERROR_MODES, "must be 'open', 'closed' or 'memory'"))
const idCheck = optional(
  text(POLICY_NAME, { notText: 'must be a string', mismatch: "use 1-64 letters, digits, '_', '-' or '.'" }),
)
const maxKeysCheck = optional(count('maxKeys'))
const costAboveCapacityCheck = optional(oneOf(['error', 'deny'], "must be 'error' or 'deny'"))
// Lists are checked by compileLists after the shape, with their own error (SLUICE_INVALID_LIST).
const listsChecked: Validator = () => undefined
const nearLimitCheck = optional(
  must(
    (v) => typeof v === 'number' && v > 0 && v < 1,
    'must be a fraction between 0 and 1 (exclusive), such as 0.8 for 80% of the limit',
  ),
)

const RATE_SHAPE = {
  id: idCheck,
  algorithm: oneOf(['fixed-window', 'sliding-window-log', 'sliding-window-counter', 'token-bucket', 'gcra']),
  limit: count('limit'),
  window: durationCheck,
  burst: optional(count('burst')),
  onStoreError: storeErrorCheck,
  mode: optional(oneOf(['exact', 'hybrid'], "must be 'exact' or 'hybrid'")),
  syncEvery: optional(durationCheck),
  scope: optional(oneOf(['region', 'global'], "must be 'region' or 'global'")),
  maxKeys: maxKeysCheck,
  blockDuration: optional(durationCheck),
  costAboveCapacity: costAboveCapacityCheck,
  allow: listsChecked,
  deny: listsChecked,
  // Checked in full by resolvePenalty, which names the key inside it.
  penalty: optional(() => undefined),
  nearLimit: nearLimitCheck,
  align: optional(oneOf(['calendar'], "must be 'calendar'")),
  timeZone: optional(
    text(/^[^\p{Cc}]{1,64}$/u, {
      notText: 'must be a string',
      mismatch: "must be an IANA time zone name such as 'Europe/Berlin'",
    }),
  ),
} satisfies Record<keyof RatePolicy, Validator>

const CONCURRENCY_SHAPE = {
  id: idCheck,
  algorithm: oneOf(['concurrency']),
  limit: count('limit'),
  timeout: durationCheck,
  onStoreError: storeErrorCheck,
  scope: optional(oneOf(['region'], "must be 'region': concurrency leases are held per region")),
  maxKeys: maxKeysCheck,
  costAboveCapacity: costAboveCapacityCheck,
  allow: listsChecked,
  deny: listsChecked,
  nearLimit: nearLimitCheck,
} satisfies Record<keyof ConcurrencyPolicy, Validator>

// The keys a policy may have, checked before its shape so a misspelling (`windw`) is named as such
// rather than reported as the key it left missing.
const RATE_KEYS = Object.keys(RATE_SHAPE)
const CONCURRENCY_KEYS = Object.keys(CONCURRENCY_SHAPE)

function hybridRefused(name: string, algorithm: string): InvalidPolicyError {
  const why =
    algorithm === 'concurrency'
      ? 'concurrency holds leases that must be released where they were taken'
      : 'sliding-window-log keeps one timestamp per request, which instances cannot add up'
  return new InvalidPolicyError(
    `policies.${name}.mode: hybrid mode works for ${HYBRID_ALGORITHMS.join(', ')}; ${why}: use one of those algorithms or mode 'exact'`,
  )
}

/**
 * The most units a key may have left and be near its limit: the capacity less the units that are
 * `nearLimit` of it, rounded up to a whole unit (at least one). The product is nudged down by a
 * relative 1e-12 first, so that 100 x 0.07 (7.000000000000001 in doubles) counts as the 7 it means.
 */
export function nearLimitRemaining(capacity: number, nearLimit: number): number {
  const used = Math.max(1, Math.ceil(capacity * nearLimit * (1 - 1e-12)))
  return capacity - Math.min(used, capacity)
}

/** Validate one policy and resolve it to integers. Throws `InvalidPolicyError` / `InvalidDurationError`. */
export function resolvePolicy(name: string, policy: unknown): ResolvedPolicy {
  const ownId = isOptionsObject(policy) && (policy as { id?: unknown }).id !== undefined
  if (ownId ? !DISPLAY_NAME.test(name) : !POLICY_NAME.test(name)) {
    throw new InvalidPolicyError(
      ownId
        ? `policy name ${JSON.stringify(name)}: use 1-256 characters, none of them control characters`
        : `policy name ${JSON.stringify(name)}: use 1-64 letters, digits, '_', '-' or '.' (or give the policy an id of those characters, and the name may be any text)`,
    )
  }
  const algorithm = (policy as { algorithm?: unknown } | null)?.algorithm
  if (typeof algorithm !== 'string' || !(ALGORITHMS as readonly string[]).includes(algorithm)) {
    throw new InvalidPolicyError(
      `policies.${name}.algorithm: ${JSON.stringify(algorithm)} is not an algorithm; use one of ${ALGORITHMS.join(', ')}`,
    )
  }
  const concurrency = algorithm === 'concurrency'
  // Concurrency has no `mode` key at all: name the algorithms that do take hybrid, not the key.
  if (concurrency && isOptionsObject(policy) && (policy as { mode?: unknown }).mode === 'hybrid')
    throw hybridRefused(name, algorithm)
  // Nor calendar windows: it counts leases held, not requests per window.
  if (concurrency && isOptionsObject(policy) && (policy as { align?: unknown }).align !== undefined)
    throw new InvalidPolicyError(
      `policies.${name}.align: a concurrency policy has no window to align, only leases held at once; use fixed-window or sliding-window-counter for a calendar quota`,
    )
  // Concurrency has no blockDuration either: name why rather than report an unknown key.
  if (
    concurrency &&
    isOptionsObject(policy) &&
    (policy as { blockDuration?: unknown }).blockDuration !== undefined
  )
    throw new InvalidPolicyError(
      `policies.${name}.blockDuration: a concurrency policy is never out of units for a time, only until a lease is released, so a block after its denial means nothing; remove it, or use limiter.block(policy, key, duration) for a penalty`,
    )
  if (concurrency && isOptionsObject(policy) && (policy as { penalty?: unknown }).penalty !== undefined)
    throw new InvalidPolicyError(
      `policies.${name}.penalty: a concurrency policy is denied only until a lease is released, so denials of it are no offence to count; remove it, or use limiter.block(policy, key, duration)`,
    )
  if (isOptionsObject(policy))
    checkKnownKeys(
      `policies.${name}`,
      policy,
      concurrency ? CONCURRENCY_KEYS : RATE_KEYS,
      (message) => new InvalidPolicyError(message),
    )
  const shape: Shape = concurrency ? CONCURRENCY_SHAPE : RATE_SHAPE
  const problem = object(shape, true)(policy)
  if (problem !== undefined) {
    const path = problem.path.length > 0 ? `.${problem.path.join('.')}` : ''
    const detail =
      problem.unknownKeys === undefined
        ? problem.message
        : unknownOptionMessage(problem.unknownKeys[0]!, Object.keys(shape))
    throw new InvalidPolicyError(`policies.${name}${path}: ${detail}`)
  }
  // The values as given. A concurrency policy has no window, burst, mode or syncEvery: what it
  // inherits under those names is not read.
  const { id, limit, onStoreError, scope, maxKeys, costAboveCapacity, allow, deny, nearLimit } =
    policy as Policy
  const { window, burst, mode, syncEvery, blockDuration, penalty, align, timeZone }: Partial<RatePolicy> =
    concurrency ? {} : (policy as RatePolicy)
  const kind = algorithm as AlgorithmName
  const windowMs = concurrency
    ? parseDuration((policy as ConcurrencyPolicy).timeout, `policies.${name}.timeout`)
    : parseDuration(window, `policies.${name}.window`)
  const usesBurst = kind === 'token-bucket' || kind === 'gcra'
  if (!usesBurst && burst !== undefined) {
    throw new InvalidPolicyError(
      `policies.${name}.burst: only token-bucket and gcra take a burst; remove it or change the algorithm`,
    )
  }
  const capacity = usesBurst && burst !== undefined ? burst : limit
  const calendar =
    align === undefined && timeZone === undefined
      ? undefined
      : calendarSpec(name, { algorithm: kind, windowMs, align, timeZone, mode, scope })
  // A calendar window is as long as its longest period (a 31-day month, a 25-hour day).
  const longestMs = calendar?.longestMs ?? windowMs
  if (limit * longestMs > MAX_PRODUCT || capacity * longestMs > MAX_PRODUCT) {
    throw new InvalidPolicyError(
      `policies.${name}: limit (or burst) x window is too large to count exactly; use a shorter window or a smaller limit`,
    )
  }
  if (kind === 'sliding-window-log' && limit > MAX_LOG_LIMIT) {
    throw new InvalidPolicyError(
      `policies.${name}.limit: sliding-window-log keeps one entry per request, so at most ${MAX_LOG_LIMIT}; use sliding-window-counter for larger limits`,
    )
  }
  const hybrid = mode === 'hybrid'
  if (syncEvery !== undefined && !hybrid) {
    throw new InvalidPolicyError(
      `policies.${name}.syncEvery: only hybrid policies sync; add mode: 'hybrid' or remove it`,
    )
  }
  const resolved: {
    -readonly [K in keyof ResolvedPolicy]: ResolvedPolicy[K]
  } = { name, id: id ?? name, algorithm: kind, limit, windowMs, capacity }
  if (hybrid) {
    if (!(HYBRID_ALGORITHMS as readonly string[]).includes(kind)) throw hybridRefused(name, kind)
    if (blockDuration !== undefined)
      throw new InvalidPolicyError(
        `policies.${name}.blockDuration: a hybrid policy decides on its own counters, which hold no block; use mode 'exact' with blockDuration`,
      )
    if (penalty !== undefined)
      throw new InvalidPolicyError(
        `policies.${name}.penalty: a hybrid policy decides on its own counters, so its denials are not counted in the store; use mode 'exact' with penalty`,
      )
    const syncEveryMs = parseDuration(syncEvery ?? '100ms', `policies.${name}.syncEvery`)
    if (syncEveryMs < 1 || syncEveryMs > windowMs) {
      throw new InvalidPolicyError(
        `policies.${name}.syncEvery: must be between 1ms and the window (${windowMs}ms)`,
      )
    }
    resolved.syncEveryMs = syncEveryMs
  }
  if (scope === 'global') {
    if (!(GLOBAL_ALGORITHMS as readonly string[]).includes(kind)) {
      throw new InvalidPolicyError(
        `policies.${name}.scope: a global limit needs windows every region counts alike; use algorithm 'sliding-window-counter' (its windows are aligned to the clock), or scope 'region'`,
      )
    }
    if (hybrid) {
      throw new InvalidPolicyError(
        `policies.${name}.scope: a hybrid policy is decided by its own counters, not by multiRegionStore; use mode 'exact' with scope 'global'`,
      )
    }
    resolved.scope = 'global'
  }
  // Optional fields only when given: a resolved policy holds exactly what was chosen.
  if (onStoreError !== undefined) resolved.onStoreError = onStoreError
  if (maxKeys !== undefined) resolved.maxKeys = maxKeys
  if (costAboveCapacity === 'deny') resolved.costAboveCapacity = 'deny'
  if (nearLimit !== undefined) {
    resolved.nearLimit = nearLimit
    resolved.nearLimitRemaining = nearLimitRemaining(capacity, nearLimit)
  }
  if (blockDuration !== undefined)
    resolved.blockDurationMs = parseDuration(blockDuration, `policies.${name}.blockDuration`)
  const lists = compileLists(`policies.${name}`, allow, deny)
  if (lists !== undefined) resolved.lists = lists
  if (penalty !== undefined) {
    if (blockDuration !== undefined)
      throw new InvalidPolicyError(
        `policies.${name}: blockDuration blocks at the first denial and penalty after several; use one of them`,
      )
    resolved.penalty = resolvePenalty(name, penalty)
  }
  if (calendar !== undefined) resolved.calendar = calendar.spec
  return Object.freeze(resolved)
}
