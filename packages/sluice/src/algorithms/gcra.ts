// GCRA (generic cell rate algorithm): one theoretical arrival time (TAT) per key. Each unit moves the
// TAT one emission interval (windowMs / limit) later; a request passes while the TAT stays within
// `capacity` intervals of now. Decides exactly like the token bucket, in a single stored number.
// The TAT is kept as whole ms plus a remainder in 1/limit ms so that no rounding ever accumulates.

import type { ResolvedPolicy } from '../policy.js'
import type { Algorithm } from './types.js'

export interface GcraState {
  /** Whole ms of the TAT. */
  tatMs: number
  /** Remainder of the TAT in units of 1/limit ms, 0 <= tatRem < limit. */
  tatRem: number
  /**
   * How many whole ms the TAT was ahead of the step that wrote it (of a forced charge's debt, the
   * part within one full refill): what a later change of parameters measures the TAT against. 0 or
   * absent when not known; the TAT is then read as it is.
   */
  leadMs?: number
}

/**
 * The stored TAT under the policy in force. The TAT is a time, so a change of limit, burst or window
 * keeps it (the key is full again when it would have been), with two cuts: a remainder counted in a
 * larger limit's units is cut below the new limit, and the TAT is at most a full refill of the new
 * burst after the step that wrote it (`leadMs`), so no key waits longer than the new parameters
 * allow for what it spent. With unchanged parameters neither cut changes anything.
 */
function arrival(state: GcraState, policy: ResolvedPolicy): GcraState {
  const limit = policy.limit
  const lead = state.leadMs
  let tatMs = state.tatMs
  let tatRem = state.tatRem < limit ? state.tatRem : limit - 1
  if (lead !== undefined && lead > 0) {
    const full = policy.capacity * policy.windowMs
    if (lead * limit + tatRem > full) {
      const whole = Math.floor(full / limit)
      tatMs = tatMs - lead + whole
      tatRem = full - whole * limit
    }
  }
  return tatMs === state.tatMs && tatRem === state.tatRem ? state : { tatMs, tatRem, leadMs: lead ?? 0 }
}

/** The TAT of a key that is at now: nothing spent that has not refilled. */
const atNow = (nowMs: number): GcraState => ({ tatMs: nowMs, tatRem: 0, leadMs: 0 })

/** The stored TAT under the policy in force when it is ahead of now; undefined when the TAT is now. */
function aheadOf(state: GcraState | undefined, policy: ResolvedPolicy, nowMs: number): GcraState | undefined {
  if (state === undefined) return undefined
  const tat = arrival(state, policy)
  return tat.tatMs < nowMs ? undefined : tat
}

/** The later of the stored TAT and now. */
function base(state: GcraState | undefined, policy: ResolvedPolicy, nowMs: number): GcraState {
  return aheadOf(state, policy, nowMs) ?? atNow(nowMs)
}

/** How far the TAT is ahead of now, in 1/limit ms (= units spent x windowMs). */
function debt(tat: GcraState, policy: ResolvedPolicy, nowMs: number): number {
  return (tat.tatMs - nowMs) * policy.limit + tat.tatRem
}

/**
 * The TAT `fromMs` + `fromRem` moved by `delta` (in 1/limit ms; negative for a refund), written at
 * `nowMs`: its lead is how far it is ahead of now, at most the part of it within one full refill of
 * the burst (a forced charge may take it further; that part is kept whatever the parameters become).
 * Taken as numbers, so that a caller holding no object of the TAT makes none.
 */
function shift(
  fromMs: number,
  fromRem: number,
  policy: ResolvedPolicy,
  delta: number,
  nowMs: number,
  into?: GcraState,
): GcraState {
  const total = fromRem + delta
  const wholeMs = Math.floor(total / policy.limit)
  const tatMs = fromMs + wholeMs
  const tatRem = total - wholeMs * policy.limit
  let leadMs = tatMs - nowMs
  if (leadMs * policy.limit + tatRem > policy.capacity * policy.windowMs) {
    leadMs = Math.floor((policy.capacity * policy.windowMs - tatRem) / policy.limit)
  }
  if (leadMs < 0) leadMs = 0
  if (into === undefined) return { tatMs, tatRem, leadMs }
  into.tatMs = tatMs
  into.tatRem = tatRem
  into.leadMs = leadMs
  return into
}

export const gcra: Algorithm<GcraState> = {
  consume(state, policy, nowMs, cost, peek, _leaseId, into) {
    const w = policy.windowMs
    const full = policy.capacity * w
    // A key not in debt (the common case) has no TAT ahead of now, and is decided without an object of it.
    const ahead = aheadOf(state, policy, nowMs)
    const before = ahead === undefined ? 0 : debt(ahead, policy, nowMs)
    const allowed = before + cost * w <= full
    const next =
      allowed && !peek
        ? shift(ahead?.tatMs ?? nowMs, ahead?.tatRem ?? 0, policy, cost * w, nowMs, into)
        : (ahead ?? atNow(nowMs))
    const after = allowed && !peek ? before + cost * w : before
    return {
      allowed,
      state: next,
      remaining: Math.max(0, Math.floor((full - after) / w)),
      retryAfterMs: allowed ? 0 : Math.ceil((before + cost * w - full) / policy.limit),
      resetMs: Math.ceil(after / policy.limit),
    }
  },
  charge(state, policy, nowMs, cost) {
    const w = policy.windowMs
    const tat = base(state, policy, nowMs)
    // The TAT may move past now + capacity intervals: later requests wait until it is back in range.
    const after = debt(tat, policy, nowMs) + cost * w
    return {
      allowed: true,
      state: shift(tat.tatMs, tat.tatRem, policy, cost * w, nowMs),
      remaining: Math.max(0, Math.floor((policy.capacity * w - after) / w)),
      retryAfterMs: 0,
      resetMs: Math.ceil(after / policy.limit),
    }
  },
  refund(state, policy, nowMs, amount) {
    const tat = base(state, policy, nowMs)
    const owed = debt(tat, policy, nowMs)
    const next = shift(tat.tatMs, tat.tatRem, policy, -Math.min(owed, amount * policy.windowMs), nowMs)
    return debt(next, policy, nowMs) <= 0 ? undefined : next
  },
}
