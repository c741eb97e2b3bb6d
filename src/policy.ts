// Policies as users write them, and the resolved form (integers only) that algorithms and stores use.
import { z } from 'zod'
import type { Duration } from './duration.js'
import { parseDuration } from './duration.js'
import { InvalidPolicyError } from './errors.js'
import { checkKnownKeys, isOptionsObject, unknownOptionMessage } from './options.js'
import { HYBRID_ALGORITHMS } from './scale/hybrid-algorithms.js'

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

/** What a policy decides when its store cannot answer (see docs/reliability.md). */
export type StoreErrorMode = 'open' | 'closed' | 'memory'
export const STORE_ERROR_MODES = ['open', 'closed', 'memory'] as const

/** Where a policy's limit holds with `multiRegionStore`: per region (default) or across all regions. */
export type PolicyScope = 'region' | 'global'
/** The algorithms `scope: 'global'` can bound (their windows are aligned to the clock, so regions count the same windows). */
export const GLOBAL_ALGORITHMS = ['sliding-window-counter'] as const satisfies readonly AlgorithmName[]

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
}

// limit x window and capacity x window stay exact in doubles (JavaScript and Redis Lua alike).
const MAX_PRODUCT = 2 ** 50
const MAX_LOG_LIMIT = 1_000_000
const POLICY_NAME = /^[A-Za-z0-9_.-]{1,64}$/
// A name that is not also the id (the policy has an `id`) never reaches a store key: any text
// without control characters, so the service can name a policy as written (`envoy:edge.path_/v1`).
const DISPLAY_NAME = /^\P{Cc}{1,256}$/u

const positiveInt = (what: string) =>
  z.number({ error: `${what} must be a number` }).refine((n) => Number.isSafeInteger(n) && n > 0, {
    error: `${what} must be a positive whole number`,
  })

const durationSchema = z.union([z.number(), z.string()], { error: 'must be a duration like 10s or 5m' })

const storeErrorSchema = z.enum(STORE_ERROR_MODES, { error: "must be 'open', 'closed' or 'memory'" })

const idSchema = z.string({ error: 'must be a string' }).regex(POLICY_NAME, {
  error: "use 1-64 letters, digits, '_', '-' or '.'",
})

const rateSchema = z.strictObject({
  id: idSchema.optional(),
  algorithm: z.enum(['fixed-window', 'sliding-window-log', 'sliding-window-counter', 'token-bucket', 'gcra']),
  limit: positiveInt('limit'),
  window: durationSchema,
  burst: positiveInt('burst').optional(),
  onStoreError: storeErrorSchema.optional(),
  mode: z.enum(['exact', 'hybrid'], { error: "must be 'exact' or 'hybrid'" }).optional(),
  syncEvery: durationSchema.optional(),
  scope: z.enum(['region', 'global'], { error: "must be 'region' or 'global'" }).optional(),
  maxKeys: positiveInt('maxKeys').optional(),
})

const concurrencySchema = z.strictObject({
  id: idSchema.optional(),
  algorithm: z.literal('concurrency'),
  limit: positiveInt('limit'),
  timeout: durationSchema,
  onStoreError: storeErrorSchema.optional(),
  scope: z
    .literal('region', { error: "must be 'region': concurrency leases are held per region" })
    .optional(),
  maxKeys: positiveInt('maxKeys').optional(),
})

// The keys a policy may have, checked before its schema so a misspelling (`windw`) is named as such
// rather than reported as the key it left missing. `maxKeys` is a policy option (see its schema).
const RATE_KEYS = [
  'id',
  'algorithm',
  'limit',
  'window',
  'burst',
  'onStoreError',
  'mode',
  'syncEvery',
  'scope',
  'maxKeys',
] satisfies readonly (keyof RatePolicy | 'maxKeys')[]
const CONCURRENCY_KEYS = [
  'id',
  'algorithm',
  'limit',
  'timeout',
  'onStoreError',
  'scope',
  'maxKeys',
] satisfies readonly (keyof ConcurrencyPolicy | 'maxKeys')[]

function hybridRefused(name: string, algorithm: string): InvalidPolicyError {
  const why =
    algorithm === 'concurrency'
      ? 'concurrency holds leases that must be released where they were taken'
      : 'sliding-window-log keeps one timestamp per request, which instances cannot add up'
  return new InvalidPolicyError(
    `policies.${name}.mode: hybrid mode works for ${HYBRID_ALGORITHMS.join(', ')}; ${why}: use one of those algorithms or mode 'exact'`,
  )
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
  if (isOptionsObject(policy))
    checkKnownKeys(
      `policies.${name}`,
      policy,
      concurrency ? CONCURRENCY_KEYS : RATE_KEYS,
      (message) => new InvalidPolicyError(message),
    )
  const schema = concurrency ? concurrencySchema : rateSchema
  const parsed = schema.safeParse(policy)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!
    const path = issue.path.length > 0 ? `.${issue.path.join('.')}` : ''
    const detail =
      issue.code === 'unrecognized_keys'
        ? unknownOptionMessage(issue.keys[0]!, Object.keys(schema.shape))
        : issue.message
    throw new InvalidPolicyError(`policies.${name}${path}: ${detail}`)
  }
  const p = parsed.data
  const limit = p.limit
  const windowMs =
    'timeout' in p
      ? parseDuration(p.timeout, `policies.${name}.timeout`)
      : parseDuration(p.window, `policies.${name}.window`)
  const usesBurst = p.algorithm === 'token-bucket' || p.algorithm === 'gcra'
  if (!usesBurst && 'burst' in p && p.burst !== undefined) {
    throw new InvalidPolicyError(
      `policies.${name}.burst: only token-bucket and gcra take a burst; remove it or change the algorithm`,
    )
  }
  const capacity = usesBurst && 'burst' in p && p.burst !== undefined ? p.burst : limit
  if (limit * windowMs > MAX_PRODUCT || capacity * windowMs > MAX_PRODUCT) {
    throw new InvalidPolicyError(
      `policies.${name}: limit (or burst) x window is too large to count exactly; use a shorter window or a smaller limit`,
    )
  }
  if (p.algorithm === 'sliding-window-log' && limit > MAX_LOG_LIMIT) {
    throw new InvalidPolicyError(
      `policies.${name}.limit: sliding-window-log keeps one entry per request, so at most ${MAX_LOG_LIMIT}; use sliding-window-counter for larger limits`,
    )
  }
  const hybrid = 'mode' in p && p.mode === 'hybrid'
  if ('syncEvery' in p && p.syncEvery !== undefined && !hybrid) {
    throw new InvalidPolicyError(
      `policies.${name}.syncEvery: only hybrid policies sync; add mode: 'hybrid' or remove it`,
    )
  }
  const resolved: {
    -readonly [K in keyof ResolvedPolicy]: ResolvedPolicy[K]
  } = { name, id: p.id ?? name, algorithm: p.algorithm, limit, windowMs, capacity }
  if (hybrid) {
    if (!(HYBRID_ALGORITHMS as readonly string[]).includes(p.algorithm))
      throw hybridRefused(name, p.algorithm)
    const syncEveryMs = parseDuration(p.syncEvery ?? '100ms', `policies.${name}.syncEvery`)
    if (syncEveryMs < 1 || syncEveryMs > windowMs) {
      throw new InvalidPolicyError(
        `policies.${name}.syncEvery: must be between 1ms and the window (${windowMs}ms)`,
      )
    }
    resolved.syncEveryMs = syncEveryMs
  }
  if ('scope' in p && p.scope === 'global') {
    if (!(GLOBAL_ALGORITHMS as readonly string[]).includes(p.algorithm)) {
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
  if (p.onStoreError !== undefined) resolved.onStoreError = p.onStoreError
  if (p.maxKeys !== undefined) resolved.maxKeys = p.maxKeys
  return Object.freeze(resolved)
}
