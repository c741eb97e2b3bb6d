// Sliding window counter: two counters per key (this window and the previous one, aligned to
// multiples of the window) and a weighted estimate of the last window. Constant memory; assumes
// the previous window's requests were spread evenly. All arithmetic is in integers scaled by the window.
// A calendar policy's windows are the calendar periods, each of its own length (see `calendarView`).
import { periodAt } from '../calendar.js'
import type { ResolvedPolicy } from '../policy.js'
import type { Algorithm } from './types.js'

export interface SlidingWindowCounterState {
  /** Start (ms, a multiple of the window) of the current window. */
  start: number
  previous: number
  current: number
}

interface View {
  start: number
  previous: number
  current: number
  /** ms since `start` (0 when the clock stepped backwards). */
  elapsed: number
}

/**
 * The stored state when it was counted on this window's grid, else undefined (counts of another
 * window length mean nothing here: they start again). A state written under `windowMs` ends two
 * windows after its start while the current window counts, one while only the previous one does;
 * one written to end at another time (`endsInMs` from now) was counted on another grid.
 */
function onGrid(
  state: SlidingWindowCounterState | undefined,
  windowMs: number,
  nowMs: number,
  endsInMs: number | undefined,
): SlidingWindowCounterState | undefined {
  if (state === undefined || endsInMs === undefined) return state
  const end =
    state.current > 0 ? state.start + 2 * windowMs : state.previous > 0 ? state.start + windowMs : state.start
  return nowMs + endsInMs === end ? state : undefined
}

function view(state: SlidingWindowCounterState | undefined, windowMs: number, nowMs: number): View {
  const start = Math.floor(nowMs / windowMs) * windowMs
  if (state === undefined || start >= state.start + 2 * windowMs)
    return { start, previous: 0, current: 0, elapsed: nowMs - start }
  if (start < state.start) {
    // The clock stepped backwards: stay at the start of the stored window, the most conservative point.
    return { start: state.start, previous: state.previous, current: state.current, elapsed: 0 }
  }
  if (start === state.start)
    return { start, previous: state.previous, current: state.current, elapsed: nowMs - start }
  return { start, previous: state.current, current: 0, elapsed: nowMs - start }
}

/** The view of a key, the window's length and the next window's (equal but on a calendar). */
interface Windowed extends View {
  w: number
  following: number
}

/**
 * A calendar policy's view at `nowMs`: the period holding now (its own length `w`), the stored
 * counts when they were counted in it (or, the clock having gone back, in a later one), the stored current count as the previous one when it was counted in the period
 * before, else nothing. `following` is the next period's length, where the current count is the
 * previous one.
 */
function calendarView(
  state: SlidingWindowCounterState | undefined,
  policy: ResolvedPolicy,
  nowMs: number,
): Windowed {
  const period = periodAt(nowMs, policy.calendar!)
  const start = period.startMs
  const w = period.endMs - start
  const following = period.nextEndMs - period.endMs
  const elapsed = nowMs - start
  if (state === undefined) return { start, previous: 0, current: 0, elapsed, w, following }
  // Counted in a later period (the clock went back): kept as this one's counts.
  if (state.start >= start)
    return { start, previous: state.previous, current: state.current, elapsed, w, following }
  if (state.start === period.previousStartMs)
    return { start, previous: state.current, current: 0, elapsed, w, following }
  return { start, previous: 0, current: 0, elapsed, w, following }
}

function windowed(
  state: SlidingWindowCounterState | undefined,
  policy: ResolvedPolicy,
  nowMs: number,
  endsInMs: number | undefined,
): Windowed {
  if (policy.calendar !== undefined) return calendarView(state, policy, nowMs)
  const w = policy.windowMs
  const v = view(onGrid(state, w, nowMs, endsInMs), w, nowMs) as Windowed
  v.w = w
  v.following = w
  return v
}

export const slidingWindowCounter: Algorithm<SlidingWindowCounterState> = {
  consume(state, policy, nowMs, cost, peek, _leaseId, into, endsInMs) {
    if (policy.calendar !== undefined) return calendarConsume(state, policy, nowMs, cost, peek, into)
    const w = policy.windowMs
    // view()'s figures as locals: the one path of every decision allocates no view object (its
    // four object literals meet in one value, which V8 cannot keep out of the heap).
    const stored = onGrid(state, w, nowMs, endsInMs)
    let start = Math.floor(nowMs / w) * w
    let elapsed = nowMs - start
    let previous = 0
    let counted = 0
    if (stored !== undefined && start < stored.start + 2 * w) {
      if (start < stored.start) {
        // The clock stepped backwards: stay at the start of the stored window, the most conservative point.
        start = stored.start
        elapsed = 0
        previous = stored.previous
        counted = stored.current
      } else if (start === stored.start) {
        previous = stored.previous
        counted = stored.current
      } else previous = stored.current
    }
    // used x w = previous x (w - elapsed) + current x w
    const used = previous * (w - elapsed) + counted * w
    const allowed = used + cost * w <= policy.limit * w
    const current = allowed && !peek ? counted + cost : counted
    const usedAfter = previous * (w - elapsed) + current * w
    let retryAfterMs = 0
    if (!allowed) {
      // Non-zero only when the clock stepped backwards behind the stored window.
      retryAfterMs = start + elapsed - nowMs
      const room = policy.limit - counted - cost
      if (room >= 0) {
        // Still in this window: wait until the previous window's weight has decayed enough.
        retryAfterMs += w - elapsed - Math.floor((room * w) / previous)
      } else {
        // Only the next window can fit it, once this window's weight has decayed enough.
        retryAfterMs += w - elapsed + (w - Math.floor(((policy.limit - cost) * w) / counted))
      }
    }
    const base = start - nowMs
    const resetMs = current > 0 ? base + 2 * w : previous > 0 ? base + w : 0
    let next: SlidingWindowCounterState
    if (into !== undefined && allowed && !peek) {
      into.start = start
      into.previous = previous
      into.current = current
      next = into
    } else next = { start, previous, current }
    return {
      allowed,
      state: next,
      remaining: Math.max(0, Math.floor((policy.limit * w - usedAfter) / w)),
      retryAfterMs,
      resetMs,
    }
  },
  charge(state, policy, nowMs, cost, endsInMs) {
    const v = windowed(state, policy, nowMs, endsInMs)
    const w = v.w
    const current = v.current + cost
    const usedAfter = v.previous * (w - v.elapsed) + current * w
    return {
      allowed: true,
      state: { start: v.start, previous: v.previous, current },
      remaining: Math.max(0, Math.floor((policy.limit * w - usedAfter) / w)),
      retryAfterMs: 0,
      resetMs: v.start - nowMs + w + v.following,
    }
  },
  refund(state, policy, nowMs, amount, _leaseId, endsInMs) {
    const v = windowed(state, policy, nowMs, endsInMs)
    const current = Math.max(0, v.current - amount)
    const previous = Math.max(0, v.previous - Math.max(0, amount - v.current))
    return current === 0 && previous === 0 ? undefined : { start: v.start, previous, current }
  },
}

/**
 * A calendar policy's consume. The previous period's count weighs what is left of the current
 * period, (w - elapsed) / w of it: in full at the period's start, nothing at its end, whatever the
 * previous period's own length (the previous period is read as if its requests had come evenly,
 * and the window looked back over is the same share of it as of the current one).
 */
function calendarConsume(
  state: SlidingWindowCounterState | undefined,
  policy: ResolvedPolicy,
  nowMs: number,
  cost: number,
  peek: boolean,
  into: SlidingWindowCounterState | undefined,
) {
  const v = calendarView(state, policy, nowMs)
  const w = v.w
  const used = v.previous * (w - v.elapsed) + v.current * w
  const allowed = used + cost * w <= policy.limit * w
  const current = allowed && !peek ? v.current + cost : v.current
  const usedAfter = v.previous * (w - v.elapsed) + current * w
  let retryAfterMs = 0
  if (!allowed) {
    const room = policy.limit - v.current - cost
    if (room >= 0) retryAfterMs += w - v.elapsed - Math.floor((room * w) / v.previous)
    else {
      // In the next period this one's count weighs (following - elapsed) / following.
      const f = v.following
      retryAfterMs += w - v.elapsed + (f - Math.floor(((policy.limit - cost) * f) / v.current))
    }
  }
  const base = v.start - nowMs
  const resetMs = current > 0 ? base + w + v.following : v.previous > 0 ? base + w : 0
  let next: SlidingWindowCounterState
  if (into !== undefined && allowed && !peek) {
    into.start = v.start
    into.previous = v.previous
    into.current = current
    next = into
  } else next = { start: v.start, previous: v.previous, current }
  return {
    allowed,
    state: next,
    remaining: Math.max(0, Math.floor((policy.limit * w - usedAfter) / w)),
    retryAfterMs,
    resetMs,
  }
}
