// Token bucket: holds up to `capacity` (burst) tokens and refills `limit` tokens per window,
// continuously (fractionally). The level is kept as tokens x windowMs, an integer, so refill is exact
// and the Lua twin computes the very same numbers.
import type { Algorithm } from './types.js'

export interface TokenBucketState {
  /** Tokens x windowMs at `at`. */
  level: number
  /** Time (ms) of the last update. */
  at: number
}

function refill(
  state: TokenBucketState | undefined,
  limit: number,
  full: number,
  nowMs: number,
): TokenBucketState {
  if (state === undefined) return { level: full, at: nowMs }
  // A clock that stepped backwards refills nothing and keeps the newest time seen.
  const at = Math.max(nowMs, state.at)
  return { level: Math.min(full, state.level + (at - state.at) * limit), at }
}

export const tokenBucket: Algorithm<TokenBucketState> = {
  consume(state, policy, nowMs, cost, peek, _leaseId, into) {
    const w = policy.windowMs
    const full = policy.capacity * w
    // refill(), inlined: this is the hottest path of the memory store.
    let before = full
    let at = nowMs
    if (state !== undefined) {
      at = Math.max(nowMs, state.at)
      before = Math.min(full, state.level + (at - state.at) * policy.limit)
    }
    const need = cost * w
    const allowed = before >= need
    const level = allowed && !peek ? before - need : before
    const lag = at - nowMs
    let next: TokenBucketState
    if (into !== undefined && allowed && !peek) {
      into.level = level
      into.at = at
      next = into
    } else next = { level, at }
    return {
      allowed,
      state: next,
      // A forced charge (charge below) can leave the level negative: nothing is left then.
      remaining: Math.max(0, Math.floor(level / w)),
      retryAfterMs: allowed ? 0 : lag + Math.ceil((need - before) / policy.limit),
      resetMs: level >= full ? 0 : lag + Math.ceil((full - level) / policy.limit),
    }
  },
  charge(state, policy, nowMs, cost) {
    const w = policy.windowMs
    const full = policy.capacity * w
    const now = refill(state, policy.limit, full, nowMs)
    // The level may go below zero: the debt refills like any other deficit.
    const level = now.level - cost * w
    const lag = now.at - nowMs
    return {
      allowed: true,
      state: { level, at: now.at },
      remaining: Math.max(0, Math.floor(level / w)),
      retryAfterMs: 0,
      resetMs: lag + Math.ceil((full - level) / policy.limit),
    }
  },
  refund(state, policy, nowMs, amount) {
    const full = policy.capacity * policy.windowMs
    const now = refill(state, policy.limit, full, nowMs)
    const level = Math.min(full, now.level + amount * policy.windowMs)
    return level >= full ? undefined : { level, at: now.at }
  },
}
