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
}

/** The later of the stored TAT and now. */
function base(state: GcraState | undefined, nowMs: number): GcraState {
  if (state === undefined || state.tatMs < nowMs) return { tatMs: nowMs, tatRem: 0 }
  return state
}

/** How far the TAT is ahead of now, in 1/limit ms (= units spent x windowMs). */
function debt(tat: GcraState, policy: ResolvedPolicy, nowMs: number): number {
  return (tat.tatMs - nowMs) * policy.limit + tat.tatRem
}

function shift(tat: GcraState, policy: ResolvedPolicy, delta: number, into?: GcraState): GcraState {
  // delta is in 1/limit ms and may be negative (refund).
  const total = tat.tatRem + delta
  const wholeMs = Math.floor(total / policy.limit)
  const tatMs = tat.tatMs + wholeMs
  const tatRem = total - wholeMs * policy.limit
  if (into === undefined) return { tatMs, tatRem }
  into.tatMs = tatMs
  into.tatRem = tatRem
  return into
}

export const gcra: Algorithm<GcraState> = {
  consume(state, policy, nowMs, cost, peek, _leaseId, into) {
    const w = policy.windowMs
    const full = policy.capacity * w
    const tat = base(state, nowMs)
    const before = debt(tat, policy, nowMs)
    const allowed = before + cost * w <= full
    const next = allowed && !peek ? shift(tat, policy, cost * w, into) : tat
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
    const tat = base(state, nowMs)
    // The TAT may move past now + capacity intervals: later requests wait until it is back in range.
    const after = debt(tat, policy, nowMs) + cost * w
    return {
      allowed: true,
      state: shift(tat, policy, cost * w),
      remaining: Math.max(0, Math.floor((policy.capacity * w - after) / w)),
      retryAfterMs: 0,
      resetMs: Math.ceil(after / policy.limit),
    }
  },
  refund(state, policy, nowMs, amount) {
    const tat = base(state, nowMs)
    const owed = debt(tat, policy, nowMs)
    const next = shift(tat, policy, -Math.min(owed, amount * policy.windowMs))
    return debt(next, policy, nowMs) <= 0 ? undefined : next
  },
}
