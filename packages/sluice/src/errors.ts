// Every error Sluice throws on purpose: one class per kind, each with a stable `code`.
// docs/errors.md lists the codes; tests assert on `code`, never on message text.

export type SluiceErrorCode =
  | 'SLUICE_INVALID_POLICY'
  | 'SLUICE_INVALID_DURATION'
  | 'SLUICE_INVALID_COST'
  | 'SLUICE_INVALID_KEY'
  | 'SLUICE_UNKNOWN_POLICY'
  | 'SLUICE_INVALID_OPTIONS'
  | 'SLUICE_STORE_ERROR'
  | 'SLUICE_STORE_TIMEOUT'
  | 'SLUICE_STORE_CLOSED'
  | 'SLUICE_INVALID_CONFIG'
  | 'SLUICE_STORE_UNAVAILABLE'
  | 'SLUICE_WRONG_ADAPTER'
  | 'SLUICE_UNSUPPORTED'
  | 'SLUICE_TOO_MANY_WAITERS'
  | 'SLUICE_WAIT_ABORTED'
  | 'SLUICE_RATE_LIMITED'
  | 'SLUICE_THROTTLE_STOPPED'
  | 'SLUICE_RESERVATION_SETTLED'
  | 'SLUICE_RESERVATION_EXPIRED'
  | 'SLUICE_INVALID_LIST'
  | 'SLUICE_TOO_MANY_RECORDS'

/** Base class of every error Sluice throws on purpose. `code` is stable across versions. */
export class SluiceError extends Error {
  readonly code: SluiceErrorCode
  constructor(code: SluiceErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = new.target.name
    this.code = code
  }
}

/** A policy that cannot work: bad limit, unknown algorithm, burst below 1, ... */
export class InvalidPolicyError extends SluiceError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('SLUICE_INVALID_POLICY', message, options)
  }
}

/** A duration that is neither a positive integer of milliseconds nor a string like `10s`, `5m`, `1h`, `1d`. */
export class InvalidDurationError extends SluiceError {
  constructor(message: string) {
    super('SLUICE_INVALID_DURATION', message)
  }
}

/** A cost that is not a positive integer, or larger than the policy can ever admit. */
export class InvalidCostError extends SluiceError {
  constructor(message: string) {
    super('SLUICE_INVALID_COST', message)
  }
}

/** A key that is not a non-empty string. */
export class InvalidKeyError extends SluiceError {
  constructor(message: string) {
    super('SLUICE_INVALID_KEY', message)
  }
}

/** A policy name the limiter was not configured with. */
export class UnknownPolicyError extends SluiceError {
  constructor(message: string) {
    super('SLUICE_UNKNOWN_POLICY', message)
  }
}

/** Options of a limiter or store that do not fit (bad maxKeys, bad clock, ...). */
export class InvalidOptionsError extends SluiceError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('SLUICE_INVALID_OPTIONS', message, options)
  }
}

/** The store failed to answer (connection lost, script error). `cause` holds the client's error. */
export class StoreError extends SluiceError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('SLUICE_STORE_ERROR', message, options)
  }
}

/** A call on a store after `close()`. */
export class StoreClosedError extends SluiceError {
  constructor(message: string) {
    super('SLUICE_STORE_CLOSED', message)
  }
}

/** A service config file that cannot be used; the message names the file, line and path. */
export class InvalidConfigError extends SluiceError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('SLUICE_INVALID_CONFIG', message, options)
  }
}

/** The store did not answer within the limiter's `storeTimeout`. */
export class StoreTimeoutError extends SluiceError {
  constructor(message: string) {
    super('SLUICE_STORE_TIMEOUT', message)
  }
}

/** The store was not called: its circuit breaker is open or too many calls are already in flight. */
export class StoreUnavailableError extends SluiceError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('SLUICE_STORE_UNAVAILABLE', message, options)
  }
}

/**
 * An adapter used with another framework: Express middleware given to Fastify's `register`, the
 * Fastify plugin mounted with Express's `app.use`, ... The message names the import to use instead.
 */
export class WrongAdapterError extends SluiceError {
  constructor(message: string) {
    super('SLUICE_WRONG_ADAPTER', message)
  }
}

/** The store cannot do what was asked (a custom store without the optional `charge`, ...). */
export class UnsupportedError extends SluiceError {
  constructor(message: string) {
    super('SLUICE_UNSUPPORTED', message)
  }
}

/** `wait` (or `throttle`, or a queued HTTP request) past `maxWaitersPerKey` or `maxWaiters`. */
export class TooManyWaitersError extends SluiceError {
  constructor(message: string) {
    super('SLUICE_TOO_MANY_WAITERS', message)
  }
}

/** A `wait` whose `signal` aborted; `cause` is the signal's reason. */
export class WaitAbortedError extends SluiceError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('SLUICE_WAIT_ABORTED', message, options)
  }
}

/**
 * A throttled call that could not fit: its wait would pass `maxWaitMs` (`decision.reason`
 * `'timeout'`), the key is blocked, or the store is unavailable. `decision` is the last answer.
 */
export class RateLimitedError extends SluiceError {
  readonly decision: { readonly reason?: string; readonly retryAfterMs: number; readonly policy: string }
  constructor(
    message: string,
    decision: { readonly reason?: string; readonly retryAfterMs: number; readonly policy: string },
  ) {
    super('SLUICE_RATE_LIMITED', message)
    this.decision = decision
  }
}

/** A call queued in a throttle when its `stop()` ran. */
export class ThrottleStoppedError extends SluiceError {
  constructor(message: string) {
    super('SLUICE_THROTTLE_STOPPED', message)
  }
}

/** `settle` on a reservation already settled (or being settled). */
export class ReservationSettledError extends SluiceError {
  constructor(message: string) {
    super('SLUICE_RESERVATION_SETTLED', message)
  }
}

/** `settle` after the reservation's `settleWithin`: it keeps the estimate. */
export class ReservationExpiredError extends SluiceError {
  constructor(message: string) {
    super('SLUICE_RESERVATION_EXPIRED', message)
  }
}

/**
 * An allow or deny list that cannot work: not `{ keys?, ips? }`, an entry that is not a non-empty
 * string, an address or CIDR that does not parse (prefix length out of range included), or more
 * entries than a list holds.
 */
export class InvalidListError extends SluiceError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('SLUICE_INVALID_LIST', message, options)
  }
}

/** A record put past the most a (kind, policy) may hold (MAX_RECORDS_PER_POLICY). Nothing was written. */
export class TooManyRecordsError extends SluiceError {
  constructor(message: string) {
    super('SLUICE_TOO_MANY_RECORDS', message)
  }
}
