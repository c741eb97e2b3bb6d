// The near-limit signal of a policy with `nearLimit`: which allowed decisions leave their key near
// its limit, and which one took it there. Computed from the decision alone (its remaining units and
// its cost), so it needs no state of its own and holds across instances sharing a store.
import type { Decision } from './decision-types.js'

/**
 * The most units a key may have left and be near its limit: the capacity less the units that are
 * `nearLimit` of it, rounded up to a whole unit (at least one). The product is nudged down by a
 * relative 1e-12 first, so that 0.7 x 10 (7.000000000000001 in doubles) counts as the 7 it means.
 */
export function nearLimitRemaining(capacity: number, nearLimit: number): number {
  const used = Math.max(1, Math.ceil(capacity * nearLimit * (1 - 1e-12)))
  return capacity - Math.min(used, capacity)
}

/**
 * Mark `d` (whose step spent `cost`, 0 for a peek) when it is allowed and leaves at most `near`
 * units: `nearLimit`; and `nearLimitCrossed` when the units before it were above that line.
 */
export function markNearLimit(d: Decision, near: number, cost: number): void {
  if (!d.allowed || d.remaining > near) return
  d.nearLimit = true
  if (d.remaining + cost > near) d.nearLimitCrossed = true
}

/** The layers of a decision that crossed their policy's near-limit line (none, one, or one per layer). */
export function nearLimitCrossings(
  decision: Decision & { readonly results?: readonly Decision[] },
): Decision[] {
  if (decision.results === undefined) return decision.nearLimitCrossed === true ? [decision] : []
  return decision.results.filter((d) => d.nearLimitCrossed === true)
}
