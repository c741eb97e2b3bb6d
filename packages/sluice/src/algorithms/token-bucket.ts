// Token bucket: holds up to `capacity` (burst) tokens and refills `limit` tokens per window,
// continuously (fractionally). The level is kept as tokens x windowMs, an integer, so refill is exact
// and the Lua twin computes the very same numbers.
import type { ResolvedPolicy } from '../policy.js'
import type { Algorithm } from './types.js'

export interface TokenBucketState {
  /** Tokens x windowMs at `at`. */
  level: number
  /** Time (ms) of the last update. */
  at: number
}

/**
 * The level a stored state holds at its own time, under the policy in force. A state written under
 * other parameters keeps its number (a level above the burst is cut by the refill's cap), but the
 * bucket is full no later than the state was written to end (`endsInMs` after `nowMs`): a slower
 * refill, a larger burst or a longer window never makes a key wait longer for what it spent before
 * the change. With unchanged parameters the floor is at or below the level, so nothing changes.
 */
function levelOf(
  state: TokenBucketState,
  policy: ResolvedPolicy,
  full: number,
  nowMs: number,
  endsInMs: number | undefined,
): number {
  if (endsInMs === undefined) return state.level
  const floor = full - (nowMs + endsInMs - state.at) * policy.limit
  return Math.max(floor, state.level)
}

function refill(
  state: TokenBucketState | undefined,
  policy: ResolvedPolicy,
  full: number,
  nowMs: number,
  endsInMs: number | undefined,
): TokenBucketState {
  if (state === undefined) return { level: full, at: nowMs }
  // A clock that stepped backwards refills nothing and keeps the newest time seen.
  const at = Math.max(nowMs, state.at)
  const level = levelOf(state, policy, full, nowMs, endsInMs)
  return { level: Math.min(full, level + (at - state.at) * policy.limit), at }
}

export const tokenBucket: Algorithm<TokenBucketState> = {
  consume(state, policy, nowMs, cost, peek, _leaseId, into, endsInMs) {
    const w = policy.windowMs
    const full = policy.capacity * w
    // refill(), inlined: this is the hottest path of the memory store.
    let before = full
    let at = nowMs
    if (state !== undefined) {
      at = Math.max(nowMs, state.at)
      let level = state.level
      if (endsInMs !== undefined) {
        const floor = full - (nowMs + endsInMs - state.at) * policy.limit
        if (floor > level) level = floor
      }
      before = Math.min(full, level + (at - state.at) * policy.limit)
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
  charge(state, policy, nowMs, cost, endsInMs) {
    const w = policy.windowMs
    const full = policy.capacity * w
    const now = refill(state, policy, full, nowMs, endsInMs)
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
  refund(state, policy, nowMs, amount, _leaseId, endsInMs) {
    const full = policy.capacity * policy.windowMs
    const now = refill(state, policy, full, nowMs, endsInMs)
    const level = Math.min(full, now.level + amount * policy.windowMs)
    return level >= full ? undefined : { level, at: now.at }
  },
}
