// The near-limit signal of a policy with `nearLimit`: which allowed decisions leave their key near
// its limit, and which one took it there. Computed from the decision alone (its remaining units and
// its cost), so it needs no state of its own and holds across instances sharing a store.
import type { Decision } from './decision-types.js'

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
