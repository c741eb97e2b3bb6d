// Sliding window log: exact. Remembers every admitted request of the last window as (time, units);
// requests admitted in the same ms share one entry. Only admitted units are recorded, so a client that
// keeps hammering while denied does not push its own lockout further out, and a key holds at most one
// entry per admitted request (and at most `limit`), whatever the requests cost.
import type { Algorithm } from './types.js'

/**
 * Running totals of units wrap here, so they stay small and exact on a key that never goes idle. A
 * difference of two totals is still right while a window holds fewer units than this, and it holds
 * at most `limit` <= 1,000,000 (MAX_LOG_LIMIT in src/policy.ts). 2^39 ms is in 1987, so in Redis a
 * stored total is never mistaken for a time: a list that starts with a number >= 2^39 is not a log
 * of this layout and reads as no state (see the Lua twin). Twin of TOTAL_MODULUS in the scripts.
 */
export const LOG_TOTAL_MODULUS = 2 ** 39

export interface SlidingWindowLogState {
  /** Admission times (ms), strictly increasing: one per admitted request, or per ms of them. */
  times: number[]
  /**
   * `ends[i]`: the running total of units admitted up to and including `times[i]` (modulo
   * LOG_TOTAL_MODULUS). The entry's own units are `ends[i]` minus the total before it.
   */
  ends: number[]
  /** The running total before `times[0]`. */
  start: number
}

/** Units admitted between running totals `from` and `to`. */
function between(from: number, to: number): number {
  return to >= from ? to - from : to - from + LOG_TOTAL_MODULUS
}

/** When an entry at `time` leaves: a window later, or when its log was written to end if sooner. */
function endOf(time: number, windowMs: number, untilMs: number | undefined): number {
  return untilMs !== undefined && untilMs < time + windowMs ? untilMs : time + windowMs
}

/** The live part of a log at `nowMs`: an entry at t counts while nowMs < t + windowMs. */
interface View {
  /** Index of the oldest live entry (times.length when none is). */
  first: number
  /** The running total before entry `first`. */
  start: number
  /** Live units. */
  count: number
}

const EMPTY: SlidingWindowLogState = Object.freeze({ times: [], ends: [], start: 0 }) as SlidingWindowLogState

/**
 * The live entries at `nowMs`. A log written to end at `untilMs` (its newest entry + the window it was
 * written under) holds nothing after that, whatever the window is now: a longer window never keeps
 * a log longer than it would have lasted, and a shorter one lets entries leave sooner.
 */
function view(
  state: SlidingWindowLogState,
  windowMs: number,
  nowMs: number,
  untilMs: number | undefined,
): View {
  const { times, ends } = state
  const n = times.length
  if (n === 0 || times[n - 1]! + windowMs <= nowMs || (untilMs !== undefined && untilMs <= nowMs))
    return { first: n, start: 0, count: 0 }
  // Times are ordered: when the oldest is still in the window all are (the usual case, no search);
  // otherwise binary search for the first that is.
  let first = 0
  if (times[0]! + windowMs <= nowMs) {
    let lo = 1
    let hi = n - 1
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (times[mid]! + windowMs <= nowMs) lo = mid + 1
      else hi = mid
    }
    first = lo
  }
  const start = first === 0 ? state.start : ends[first - 1]!
  return { first, start, count: between(start, ends[n - 1]!) }
}

/** Index of the live entry that holds the `units`-th oldest live unit (the newest when beyond). */
function holding(state: SlidingWindowLogState, live: View, units: number): number {
  // Often the oldest live entry alone is enough (always when every request costs 1).
  if (between(live.start, state.ends[live.first]!) >= units) return live.first
  let lo = live.first + 1
  let hi = state.ends.length - 1
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (between(live.start, state.ends[mid]!) >= units) hi = mid
    else lo = mid + 1
  }
  return Math.min(lo, hi)
}

/**
 * `source[from..]` with its last element replaced by `last` (`replace`) or with `last` appended, in
 * an array of exactly that length (push would leave up to half again as spare capacity).
 */
function copyWith(source: readonly number[], from: number, last: number, replace: boolean): number[] {
  const n = source.length - from - (replace ? 1 : 0)
  const out = new Array<number>(n + 1)
  for (let i = 0; i < n; i++) out[i] = source[from + i]!
  out[n] = last
  return out
}

/**
 * The live entries plus `cost` units at `at` (merged into the newest entry when it is at `at`).
 * States are never changed in place, so an unchanged array is shared with the previous state.
 */
function append(state: SlidingWindowLogState, live: View, at: number, cost: number): SlidingWindowLogState {
  if (live.count === 0) return { times: [at], ends: [cost], start: 0 }
  const { times, ends } = state
  const last = times.length - 1
  const total = (ends[last]! + cost) % LOG_TOTAL_MODULUS
  if (times[last] === at) {
    return {
      times: live.first === 0 ? times : times.slice(live.first),
      ends: copyWith(ends, live.first, total, true),
      start: live.start,
    }
  }
  return {
    times: copyWith(times, live.first, at, false),
    ends: copyWith(ends, live.first, total, false),
    start: live.start,
  }
}

export const slidingWindowLog: Algorithm<SlidingWindowLogState> = {
  consume(state = EMPTY, policy, nowMs, cost, peek, _leaseId, _into, endsInMs) {
    const windowMs = policy.windowMs
    const untilMs = endsInMs === undefined ? undefined : nowMs + endsInMs
    const live = view(state, windowMs, nowMs, untilMs)
    const newest = live.count > 0 ? state.times[state.times.length - 1]! : undefined
    // A clock that stepped backwards records at the newest time seen, keeping the log ordered.
    const at = newest === undefined ? nowMs : Math.max(nowMs, newest)
    const allowed = live.count + cost <= policy.limit
    const commit = allowed && !peek && cost > 0
    const after = commit ? live.count + cost : live.count
    const newestAfter = commit ? at : newest
    // Denied: wait until enough of the oldest units leave the window for `cost` to fit. An entry's
    // units all leave together, at its time + window.
    let retryAfterMs = 0
    if (!allowed && live.count > 0) {
      const entry = holding(state, live, live.count + cost - policy.limit)
      retryAfterMs = endOf(state.times[entry]!, windowMs, untilMs) - nowMs
    }
    // A commit writes a log that ends with its new entry; otherwise the log ends as it was written to.
    const endsAt =
      newestAfter === undefined ? nowMs : commit ? at + windowMs : endOf(newestAfter, windowMs, untilMs)
    return {
      allowed,
      state: commit ? append(state, live, at, cost) : state,
      remaining: Math.max(0, policy.limit - after),
      retryAfterMs,
      resetMs: endsAt - nowMs,
    }
  },
  charge(state = EMPTY, policy, nowMs, cost, endsInMs) {
    const live = view(state, policy.windowMs, nowMs, endsInMs === undefined ? undefined : nowMs + endsInMs)
    const newest = live.count > 0 ? state.times[state.times.length - 1]! : undefined
    const at = newest === undefined ? nowMs : Math.max(nowMs, newest)
    // The log may hold more than `limit` units: later requests wait until enough of them leave.
    return {
      allowed: true,
      state: append(state, live, at, cost),
      remaining: Math.max(0, policy.limit - live.count - cost),
      retryAfterMs: 0,
      resetMs: at + policy.windowMs - nowMs,
    }
  },
  refund(state = EMPTY, policy, nowMs, amount, _leaseId, endsInMs) {
    const live = view(state, policy.windowMs, nowMs, endsInMs === undefined ? undefined : nowMs + endsInMs)
    // Give back the newest units: a refund usually follows the consume it undoes. The entry holding
    // the last unit kept becomes the newest, shrunk to what is kept of it.
    const keep = live.count - amount
    if (keep <= 0) return undefined
    const last = holding(state, live, keep)
    const times = state.times.slice(live.first, last + 1)
    const ends = state.ends.slice(live.first, last + 1)
    ends[ends.length - 1] = (live.start + keep) % LOG_TOTAL_MODULUS
    return { times, ends, start: live.start }
  },
}
