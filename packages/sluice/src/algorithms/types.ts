// The contract every algorithm meets: a pure state transition with no I/O and no clock of its own.
import type { ResolvedPolicy } from '../policy.js'

/** What one step decides. All times are whole milliseconds relative to `nowMs`. */
export interface Outcome<S> {
  allowed: boolean
  /** The state to store when the step commits (only when allowed and consuming). */
  state: S
  /** Units left after this step (before it, when denied or peeking). Never negative. */
  remaining: number
  /** Wait until a request of this cost would pass; 0 when allowed. */
  retryAfterMs: number
  /** Wait until the key is back to full; also the time-to-live of the stored state (0 = delete it). */
  resetMs: number
}

export interface Algorithm<S> {
  /**
   * Evaluate a request of `cost` at `nowMs`. With `peek`, `remaining` and `resetMs` describe the
   * state as it is, and `state` is the state before the step.
   *
   * `into`: an object of the caller's that it replaces with the outcome's `state` whenever the step
   * commits (allowed and not a peek): the state it passed in, or an expired one it holds. On a
   * commit the transition may write the new state into it and return it instead of a new object
   * (the memory store's hot path: a state rewritten in place is not copied by the garbage collector
   * on every decision). Never written when the step does not commit; `state` itself is only written
   * when it is `into`.
   *
   * `endsInMs`: how long after `nowMs` the state was written to end (the step that wrote it ended
   * it at its own `nowMs + resetMs`), as its store keeps it. A store passes it with every state it
   * read, because the policy's parameters may have changed since: the state is then read under the
   * new ones, clamped to them, and never lasts past that end (a store forgets it then, so every
   * store must read it the same way until then). With unchanged parameters it changes nothing;
   * without it (a caller that keeps no expiry) the state is read as written. Relative, so it is a
   * small integer: an absolute time would be a boxed number on every call of the hot path.
   */
  consume(
    state: S | undefined,
    policy: ResolvedPolicy,
    nowMs: number,
    cost: number,
    peek: boolean,
    leaseId?: string,
    into?: S,
    endsInMs?: number,
  ): Outcome<S>
  /**
   * Commit `cost` units whether they fit or not: a forced charge that may take the key past its
   * limit (reserve/settle charges the true cost of work already done). `allowed` is always true;
   * later requests wait until the overshoot has drained. `endsInMs` as for consume.
   */
  charge(
    state: S | undefined,
    policy: ResolvedPolicy,
    nowMs: number,
    cost: number,
    endsInMs?: number,
  ): Outcome<S>
  /**
   * Give back `amount` units (or release lease `leaseId`); `undefined` means the key is empty again.
   * `endsInMs` as for consume.
   */
  refund(
    state: S | undefined,
    policy: ResolvedPolicy,
    nowMs: number,
    amount: number,
    leaseId?: string,
    endsInMs?: number,
  ): S | undefined
}
