// Fixed window: at most `limit` units per window; a window opens at a key's first request
// (not at wall-clock boundaries, so keys do not all reset in the same millisecond).
import type { Algorithm } from './types.js'

export interface FixedWindowState {
  /** When the current window opened (ms). */
  start: number
  /** Units admitted in it. */
  count: number
}

/**
 * The window in force at `nowMs`: the stored one until it ends, else a fresh one. The stored window
 * ends at `start + windowMs`, or sooner when its state was written to end sooner (`endsInMs` from
 * now: it was opened under a shorter window; a longer window applies from the next one).
 */
function current(
  state: FixedWindowState | undefined,
  windowMs: number,
  nowMs: number,
  endsInMs: number | undefined,
): { start: number; count: number; end: number } {
  if (state !== undefined) {
    const stored = state.start + windowMs
    const end = endsInMs !== undefined && endsInMs < stored - nowMs ? nowMs + endsInMs : stored
    // A clock that stepped backwards stays in the stored window: it never opens a fresh one.
    if (nowMs < end) return { start: state.start, count: state.count, end }
  }
  return { start: nowMs, count: 0, end: nowMs + windowMs }
}

export const fixedWindow: Algorithm<FixedWindowState> = {
  consume(state, policy, nowMs, cost, peek, _leaseId, into, endsInMs) {
    let start = nowMs
    let count = 0
    let end = nowMs + policy.windowMs
    let next: FixedWindowState | undefined
    // current(), inlined: this is the memory store's hot path.
    if (state !== undefined) {
      const stored = state.start + policy.windowMs
      const stateEnd = endsInMs !== undefined && endsInMs < stored - nowMs ? nowMs + endsInMs : stored
      if (nowMs < stateEnd) {
        start = state.start
        count = state.count
        end = stateEnd
        next = state
      }
    }
    const allowed = count + cost <= policy.limit
    const after = allowed && !peek ? count + cost : count
    if (next === undefined || after !== count) {
      // Only a commit changes the count; a fresh window is a new state either way.
      if (into !== undefined && after !== count) {
        into.start = start
        into.count = after
        next = into
      } else next = { start, count: after }
    }
    return {
      allowed,
      state: next,
      remaining: Math.max(0, policy.limit - after),
      retryAfterMs: allowed ? 0 : end - nowMs,
      resetMs: after > 0 ? end - nowMs : 0,
    }
  },
  charge(state, policy, nowMs, cost, endsInMs) {
    const window = current(state, policy.windowMs, nowMs, endsInMs)
    const count = window.count + cost
    return {
      allowed: true,
      state: { start: window.start, count },
      remaining: Math.max(0, policy.limit - count),
      retryAfterMs: 0,
      resetMs: window.end - nowMs,
    }
  },
  refund(state, policy, nowMs, amount, _leaseId, endsInMs) {
    const window = current(state, policy.windowMs, nowMs, endsInMs)
    const count = Math.max(0, window.count - amount)
    return count === 0 ? undefined : { start: window.start, count }
  },
}
