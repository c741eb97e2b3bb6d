// Fixed window: at most `limit` units per window; a window opens at a key's first request
// (not at wall-clock boundaries, so keys do not all reset in the same millisecond), or, for a
// calendar policy, at the start of the calendar period holding now, and ends with it.
import { periodAt } from '../calendar.js'
import type { ResolvedPolicy } from '../policy.js'
import type { Algorithm } from './types.js'

export interface FixedWindowState {
  /** When the current window opened (ms). */
  start: number
  /** Units admitted in it. */
  count: number
}

/**
 * Where a fresh window opens at `nowMs` and how long it lasts: at now for the policy's window, or
 * the calendar period holding now. A calendar window is read as a window of its period's length; a
 * state opened before the period began belongs to an earlier one, and counts nothing now.
 */
function freshWindow(policy: ResolvedPolicy, nowMs: number): { start: number; windowMs: number } {
  if (policy.calendar === undefined) return { start: nowMs, windowMs: policy.windowMs }
  const period = periodAt(nowMs, policy.calendar)
  return { start: period.startMs, windowMs: period.endMs - period.startMs }
}

/**
 * The window in force at `nowMs`: the stored one until it ends, else a fresh one. The stored window
 * ends at `start + windowMs`, or sooner when its state was written to end sooner (`endsInMs` from
 * now: it was opened under a shorter window; a longer window applies from the next one).
 */
function current(
  state: FixedWindowState | undefined,
  policy: ResolvedPolicy,
  nowMs: number,
  endsInMs: number | undefined,
): { start: number; count: number; end: number } {
  const fresh = freshWindow(policy, nowMs)
  if (state !== undefined && (policy.calendar === undefined || state.start >= fresh.start)) {
    const stored = state.start + fresh.windowMs
    const end = endsInMs !== undefined && endsInMs < stored - nowMs ? nowMs + endsInMs : stored
    // A clock that stepped backwards stays in the stored window: it never opens a fresh one.
    if (nowMs < end) return { start: state.start, count: state.count, end }
  }
  return { start: fresh.start, count: 0, end: fresh.start + fresh.windowMs }
}

export const fixedWindow: Algorithm<FixedWindowState> = {
  consume(state, policy, nowMs, cost, peek, _leaseId, into, endsInMs) {
    if (policy.calendar !== undefined)
      return calendarConsume(state, policy, nowMs, cost, peek, into, endsInMs)
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
    const window = current(state, policy, nowMs, endsInMs)
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
    const window = current(state, policy, nowMs, endsInMs)
    const count = Math.max(0, window.count - amount)
    return count === 0 ? undefined : { start: window.start, count }
  },
}

/** A calendar policy's consume: `current()` on its period, off the hot path of the others. */
function calendarConsume(
  state: FixedWindowState | undefined,
  policy: ResolvedPolicy,
  nowMs: number,
  cost: number,
  peek: boolean,
  into: FixedWindowState | undefined,
  endsInMs: number | undefined,
) {
  const window = current(state, policy, nowMs, endsInMs)
  const allowed = window.count + cost <= policy.limit
  const after = allowed && !peek ? window.count + cost : window.count
  let next: FixedWindowState
  if (state !== undefined && state.start === window.start && after === state.count) next = state
  else if (into !== undefined && after !== window.count) {
    into.start = window.start
    into.count = after
    next = into
  } else next = { start: window.start, count: after }
  return {
    allowed,
    state: next,
    remaining: Math.max(0, policy.limit - after),
    retryAfterMs: allowed ? 0 : window.end - nowMs,
    resetMs: after > 0 ? window.end - nowMs : 0,
  }
}
