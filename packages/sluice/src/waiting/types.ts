// Public types of waiting for capacity (wait), charging late-known costs (reserve/settle) and
// throttling outbound calls (throttle). docs/waiting.md explains each and its bound.
import type { Duration } from '../duration.js'
import type { AcquireDecision, ConsumeOptions, Decision, LayeredDecision } from '../limiter/decision-types.js'

/** The limiter's bounds on waiters: `createLimiter({ waiting: { ... } })`. */
export interface WaitingOptions {
  /** Waiters queued at once on one (policy, key) in this process. Default 1,000. */
  maxWaitersPerKey?: number
  /** Waiters queued at once in this process, all keys together. Default 10,000. */
  maxWaiters?: number
  /**
   * Concurrency policies only: how often a waiter asks again when no lease of this process was
   * released (a release in another process is seen at the latest after this). Default `100ms`.
   */
  concurrencyRecheck?: Duration
}

export interface WaitOptions extends ConsumeOptions {
  /**
   * The longest this call waits, in ms. A waiter whose wait (the store's `retryAfterMs`, or the
   * queue ahead of it) would pass it is refused at once with `reason: 'timeout'`, without
   * sleeping. Default: the policy's window (layered: the shortest window).
   */
  maxWaitMs?: number
  /** Abort the wait: the promise rejects with `SLUICE_WAIT_ABORTED` and nothing stays charged. */
  signal?: AbortSignal
}

/** The answer to a wait: admitted, or denied (`reason: 'timeout'` when it could not fit in time). */
export type WaitDecision = AcquireDecision
export type LayeredWaitDecision = LayeredDecision

export interface ReserveOptions extends ConsumeOptions {
  /**
   * How long the reservation can be settled. After it, `settle` rejects with
   * `SLUICE_RESERVATION_EXPIRED` and the estimate stays charged. Default: the policy's window
   * (layered: the shortest window).
   */
  settleWithin?: Duration
}

/** What a reservation adds to its decision. */
export interface Settlement {
  /** The reservation's id (the service's `/v1/settle/{id}`). */
  readonly id: string
  /** Units charged up front (the `cost` given to reserve). */
  readonly estimate: number
  /** When `settle` stops being accepted (ms since the epoch, this process's clock). */
  readonly settleBy: number
  /**
   * Charge the true cost: `actual - estimate` more when positive (even past the limit: the work
   * is done, later requests pay), a refund of the difference when negative. Every layer of a
   * layered reservation is settled with the same `actual`. Rejects with
   * `SLUICE_RESERVATION_SETTLED` the second time, `SLUICE_RESERVATION_EXPIRED` after `settleWithin`,
   * `SLUICE_INVALID_OPTIONS` on a denied reservation.
   */
  settle(actual: number): Promise<void>
}

export type ReserveDecision = Decision & Settlement
export type LayeredReserveDecision = LayeredDecision & Settlement

export interface ThrottleOptions<A extends unknown[]> {
  /** The limiter key of a call (a string, or computed from its arguments). */
  key: string | ((...args: A) => string)
  /** Units of one call. Default 1. */
  cost?: number | ((...args: A) => number)
  /** The longest a call waits for the limit; past it the call rejects with `SLUICE_RATE_LIMITED`. Default: the policy's window. */
  maxWaitMs?: number
  /** Calls running at once through this throttle, in this process. Default: no cap. */
  concurrency?: number
}

/** A throttled function: call it like the original. */
export interface Throttled<A extends unknown[], R> {
  (...args: A): Promise<R>
  /** Reject every queued call (`SLUICE_THROTTLE_STOPPED`) and every later one; running calls finish. */
  stop(): void
  /** Calls queued (waiting for a slot or for the limit), not yet running. */
  readonly queued: number
  /** Calls running now. */
  readonly running: number
}
