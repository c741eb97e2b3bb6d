// Fixed window: at most `limit` units per window; a window opens at a key's first request
// (not at wall-clock boundaries, so keys do not all reset in the same millisecond).
import type { Algorithm } from './types.js'

export interface FixedWindowState {
  /** When the current window opened (ms). */
  start: number
  /** Units admitted in it. */
  count: number
}

function current(state: FixedWindowState | undefined, windowMs: number, nowMs: number): FixedWindowState {
  // A clock that stepped backwards stays in the stored window: it never opens a fresh one.
  if (state === undefined || nowMs >= state.start + windowMs) return { start: nowMs, count: 0 }
  return state
}

export const fixedWindow: Algorithm<FixedWindowState> = {
  consume(state, policy, nowMs, cost, peek, _leaseId, into) {
    const window = current(state, policy.windowMs, nowMs)
    const end = window.start + policy.windowMs
    const allowed = window.count + cost <= policy.limit
    const count = allowed && !peek ? window.count + cost : window.count
    let next = window
    if (count !== window.count) {
      // Only a commit changes the count.
      if (into !== undefined) {
        into.start = window.start
        into.count = count
        next = into
      } else next = { start: window.start, count }
    }
    return {
      allowed,
      state: next,
      remaining: Math.max(0, policy.limit - count),
      retryAfterMs: allowed ? 0 : end - nowMs,
      resetMs: count > 0 ? end - nowMs : 0,
    }
  },
  charge(state, policy, nowMs, cost) {
    const window = current(state, policy.windowMs, nowMs)
    const count = window.count + cost
    return {
      allowed: true,
      state: { start: window.start, count },
      remaining: Math.max(0, policy.limit - count),
      retryAfterMs: 0,
      resetMs: window.start + policy.windowMs - nowMs,
    }
  },
  refund(state, policy, nowMs, amount) {
    const window = current(state, policy.windowMs, nowMs)
    const count = Math.max(0, window.count - amount)
    return count === 0 ? undefined : { start: window.start, count }
  },
}
