// The answers of the limiter and what a check is: the types both the limiter's interface and
// waiting's (src/waiting/types.ts) are written with, so neither imports the other's.

/**
 * Why a request was denied: out of units, blocked, the store failed with `onStoreError: 'closed'`,
 * (wait) it could not fit within its longest wait, its cost is above the policy's capacity, so
 * it never fits (a policy with `costAboveCapacity: 'deny'`), or a deny list holds its key (`denied`).
 */
export type DenyReason =
  | 'limit'
  | 'blocked'
  | 'store_unavailable'
  | 'timeout'
  | 'cost_above_capacity'
  | 'denied'

/** The answer to one check. Times are whole milliseconds. */
export interface Decision {
  allowed: boolean
  /** The most the key can spend at once: `burst` for token bucket and GCRA, `limit` otherwise. */
  limit: number
  /** Units left after this decision; never negative. */
  remaining: number
  /** Wait until the key is back to full, in whole ms (a store's fraction is rounded up). */
  resetMs: number
  /** Wait until this request would pass, in whole ms (rounded up); 0 when allowed. */
  retryAfterMs: number
  policy: string
  key: string
  /** Present when denied. */
  reason?: DenyReason
  /** True when the store failed and the policy's `onStoreError` fallback decided. */
  degraded?: boolean
  /** True when the local deny cache answered without asking the store. */
  cached?: boolean
  /**
   * True on a layer of a layered decision that the local deny cache answered: another layer's
   * cached denial decided, this one was not evaluated (nor committed). Its numbers are placeholders
   * (full `remaining`), not its state; the rate-limit headers leave it out of `RateLimit`.
   */
  notEvaluated?: boolean
  /**
   * Set when a list of the policy decided without the store: `deny` (denied, `reason: 'denied'`,
   * nothing spent) or `allow` (allowed, full `remaining`, nothing spent).
   */
  listed?: 'allow' | 'deny'
  /** True when the key has a per-key override (limiter.setOverride): `limit` is the override's. */
  override?: boolean
  /**
   * Present on the denial that earned a penalty (a policy with `penalty`): the key's level (its
   * earlier penalties remembered) and the block it got, in ms. The decision says `reason: 'blocked'`.
   */
  penalty?: PenaltyApplied
  /** Allowed, leaving at most `limit - ceil(limit x nearLimit)` units (a policy with `nearLimit`). */
  nearLimit?: boolean
  /** The decision that took the key across that line (`remaining + cost` was above it). */
  nearLimitCrossed?: boolean
}

/** A penalty a decision applied: see `Decision.penalty`. */
export interface PenaltyApplied {
  /** The key's earlier penalties remembered (0 for a first offence). */
  readonly level: number
  /** The block this penalty wrote, in ms. */
  readonly blockMs: number
}

/** The answer to a layered check: the deciding layer's numbers, plus every layer's own. */
export interface LayeredDecision extends Decision {
  /** One decision per check, in the order given. */
  results: Decision[]
  /** The policy of the first layer that denied, when denied. */
  deniedBy?: string
}

/** A concurrency lease; call `release()` when the work is done. */
export interface Lease {
  readonly id: string
  readonly policy: string
  readonly key: string
  readonly cost: number
  release(): Promise<void>
}

export interface AcquireDecision extends Decision {
  /** Present when allowed. */
  lease?: Lease
}

export interface Check<Name extends string = string> {
  policy: Name
  key: string
  cost?: number
}

export interface ConsumeOptions {
  /** Units this request spends (weight). Default 1. */
  cost?: number
}
