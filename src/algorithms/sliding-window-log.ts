// Sliding window log: exact. Remembers the time of every admitted unit within the last window.
// Only admitted units are recorded, so a key holds at most `limit` entries and a client that keeps
// hammering while denied does not push its own lockout further out.
import type { Algorithm } from './types.js'

export interface SlidingWindowLogState {
  /** Times (ms) of admitted units, oldest first; one entry per unit of cost. */
  entries: number[]
}

/** Entries still inside the window at `nowMs`; an entry at t counts while nowMs < t + windowMs. */
function live(state: SlidingWindowLogState | undefined, windowMs: number, nowMs: number): number[] {
  if (state === undefined) return []
  const entries = state.entries
  let first = 0
  while (first < entries.length && entries[first]! + windowMs <= nowMs) first++
  return first === 0 ? entries : entries.slice(first)
}

export const slidingWindowLog: Algorithm<SlidingWindowLogState> = {
  consume(state, policy, nowMs, cost, peek) {
    const entries = live(state, policy.windowMs, nowMs)
    // A clock that stepped backwards records at the newest time seen, keeping the log ordered.
    const at = entries.length > 0 ? Math.max(nowMs, entries[entries.length - 1]!) : nowMs
    const allowed = entries.length + cost <= policy.limit
    let next = entries
    if (allowed && !peek) {
      next = entries.slice()
      for (let i = 0; i < cost; i++) next.push(at)
    }
    const newest = next[next.length - 1]
    return {
      allowed,
      state: { entries: next },
      remaining: Math.max(0, policy.limit - next.length),
      // Denied: wait until enough of the oldest entries leave the window for `cost` to fit.
      retryAfterMs: allowed
        ? 0
        : entries[entries.length + cost - policy.limit - 1]! + policy.windowMs - nowMs,
      resetMs: newest === undefined ? 0 : newest + policy.windowMs - nowMs,
    }
  },
  refund(state, policy, nowMs, amount) {
    const entries = live(state, policy.windowMs, nowMs)
    // Give back the newest units: a refund usually follows the consume it undoes.
    const kept = entries.slice(0, Math.max(0, entries.length - amount))
    return kept.length === 0 ? undefined : { entries: kept }
  },
}
