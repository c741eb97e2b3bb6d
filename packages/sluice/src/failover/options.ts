// The limiter's options for a failing store, validated once at construction, with defaults.
import type { Duration } from '../duration.js'
import { parseDuration } from '../duration.js'
import { InvalidOptionsError, SluiceError } from '../errors.js'
import { count, duration, must, object, oneOf, optional } from '../option-checks.js'
import { checkKnownKeys, isOptionsObject, keysOf } from '../options.js'
import type { StoreErrorMode } from '../policy.js'
import { STORE_ERROR_MODES } from '../policy.js'
import type { CircuitState } from './breaker.js'

/** Where failover messages go. A pino logger fits; so does `{ warn: (d, m) => console.warn(m, d) }`. */
export interface FailoverLogger {
  warn(details: Record<string, unknown>, message: string): void
  info?(details: Record<string, unknown>, message: string): void
}

/**
 * What the protection layer reports about the store, for metrics and alerts:
 * - `error`: one call failed or timed out (calls not made because the circuit is open are not errors);
 * - `state`: whether the store answers (`up`: the last call succeeded) or the circuit state changed.
 *   The first call after the store is wrapped always reports a state.
 */
export type StoreHealthEvent =
  | { readonly type: 'error'; readonly store: string; readonly error: SluiceError }
  | { readonly type: 'state'; readonly store: string; readonly up: boolean; readonly circuit: CircuitState }

/** What `createLimiter` accepts about store failures (see docs/reliability.md). */
export interface FailoverLimiterOptions {
  /** What policies without their own `onStoreError` do when the store fails. Default `'open'`. */
  onStoreError?: StoreErrorMode
  /** Longest wait for one store call before it counts as failed. Default `100ms`. */
  storeTimeout?: Duration
  /**
   * Open the circuit after `failures` consecutive failures (default 5) spread over at least
   * `storeTimeout`; probe again after `cooldown` (default `1s`).
   */
  breaker?: { failures?: number; cooldown?: Duration }
  /** Store calls allowed in flight at once; past it calls fail fast to the fallback. Default 1000. */
  maxInFlight?: number
  /** How many processes share the store: `onStoreError: 'memory'` divides limits by it. Default 1. */
  instances?: number
  /** Failover messages; at most one per `logInterval` (default `10s`). Default: console.warn. */
  logger?: FailoverLogger
  logInterval?: Duration
  /** Called on store errors and on store up/down and circuit changes; thrown errors are ignored. */
  onStoreHealth?: (event: StoreHealthEvent) => void
}

/** The keys of FailoverLimiterOptions: `createLimiter` accepts these besides its own. */
export const FAILOVER_OPTION_KEYS = keysOf<FailoverLimiterOptions>({
  onStoreError: true,
  storeTimeout: true,
  breaker: true,
  maxInFlight: true,
  instances: true,
  logger: true,
  logInterval: true,
  onStoreHealth: true,
})
const BREAKER_KEYS = keysOf<NonNullable<FailoverLimiterOptions['breaker']>>({
  failures: true,
  cooldown: true,
})

/** The same options, resolved to numbers. What `protectStore` takes. */
export interface FailoverSettings {
  onStoreError: StoreErrorMode
  timeoutMs: number
  failures: number
  cooldownMs: number
  maxInFlight: number
  instances: number
  logger: FailoverLogger
  logIntervalMs: number
  /** Keys the in-memory fallback holds at most. */
  fallbackMaxKeys: number
  onStoreHealth?: (event: StoreHealthEvent) => void
}

export const DEFAULT_FAILOVER: Omit<FailoverSettings, 'logger'> = {
  onStoreError: 'open',
  timeoutMs: 100,
  failures: 5,
  cooldownMs: 1000,
  maxInFlight: 1000,
  instances: 1,
  logIntervalMs: 10_000,
  fallbackMaxKeys: 100_000,
}

const consoleLogger: FailoverLogger = {
  warn(details, message) {
    console.warn(`sluice: ${message}`, details)
  },
  info(details, message) {
    console.info(`sluice: ${message}`, details)
  },
}

const durationCheck = optional(duration('must be a duration like 100ms or 2s'))

// Not strict: the other keys of createLimiter's options are the limiter's to check.
const validateOptions = object({
  onStoreError: optional(oneOf(STORE_ERROR_MODES, "must be 'open', 'closed' or 'memory'")),
  storeTimeout: durationCheck,
  breaker: optional(object({ failures: optional(count('breaker.failures')), cooldown: durationCheck })),
  maxInFlight: optional(count('maxInFlight')),
  instances: optional(count('instances')),
  logger: optional(
    must(
      (v) => typeof v === 'object' && v !== null && typeof (v as FailoverLogger).warn === 'function',
      'must have a warn(details, message) method (a pino logger works)',
    ),
  ),
  logInterval: durationCheck,
  onStoreHealth: optional(must((v) => typeof v === 'function', 'must be a function')),
} satisfies Record<keyof FailoverLimiterOptions, unknown>)

/**
 * Validate the failover options of `createLimiter` (its other keys are the limiter's to check).
 * Throws `InvalidOptionsError` / `InvalidDurationError`.
 */
export function resolveFailover(options: FailoverLimiterOptions): FailoverSettings {
  if (isOptionsObject(options.breaker))
    checkKnownKeys('createLimiter: breaker', options.breaker, BREAKER_KEYS)
  const problem = validateOptions(options)
  if (problem !== undefined)
    throw new InvalidOptionsError(`createLimiter: ${problem.path.join('.')}: ${problem.message}`)
  try {
    return {
      onStoreError: options.onStoreError ?? DEFAULT_FAILOVER.onStoreError,
      timeoutMs:
        options.storeTimeout === undefined
          ? DEFAULT_FAILOVER.timeoutMs
          : parseDuration(options.storeTimeout, 'storeTimeout'),
      failures: options.breaker?.failures ?? DEFAULT_FAILOVER.failures,
      cooldownMs:
        options.breaker?.cooldown === undefined
          ? DEFAULT_FAILOVER.cooldownMs
          : parseDuration(options.breaker.cooldown, 'breaker.cooldown'),
      maxInFlight: options.maxInFlight ?? DEFAULT_FAILOVER.maxInFlight,
      instances: options.instances ?? DEFAULT_FAILOVER.instances,
      logger: options.logger ?? consoleLogger,
      logIntervalMs:
        options.logInterval === undefined
          ? DEFAULT_FAILOVER.logIntervalMs
          : parseDuration(options.logInterval, 'logInterval'),
      fallbackMaxKeys: DEFAULT_FAILOVER.fallbackMaxKeys,
      ...(options.onStoreHealth === undefined ? {} : { onStoreHealth: options.onStoreHealth }),
    }
  } catch (error) {
    if (error instanceof SluiceError) throw error
    throw new InvalidOptionsError('createLimiter: invalid failover options', { cause: error })
  }
}
