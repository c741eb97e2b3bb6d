// A link of the chain, present when some policy has `costAboveCapacity: 'deny'`: a step whose cost
// is above its policy's capacity can never be admitted, so the check is denied without committing
// anything; the store is asked only to peek, for the key's numbers as they are.
import type { Step, StepResult, Store } from '../store.js'
import { forwardStore, isPending } from '../store.js'

const oversized = (s: Step): boolean => s.cost > s.policy.capacity

/**
 * The peek's results with each oversized step denied. Its wait is at least a window: the request
 * never fits, and a client told to retry at once would only be denied again.
 */
function denied(steps: readonly Step[], results: StepResult[]): StepResult[] {
  return results.map((r, i) => {
    const s = steps[i]!
    if (!oversized(s)) return r
    return { ...r, allowed: false, retryAfterMs: Math.max(r.resetMs, s.policy.windowMs, 1) }
  })
}

/** `inner` with checks that hold a cost above capacity answered as denials (decisions.ts names the reason). */
export function oversizedCostStore(inner: Store): Store {
  return forwardStore(inner, {
    apply(steps, mode) {
      if (!steps.some(oversized)) return inner.apply(steps, mode)
      // A peek of one unit reads the key as it is; the other layers are peeked as asked, since the
      // check as a whole is denied and commits nothing.
      const peeked = steps.map((s) => (oversized(s) ? { ...s, cost: 1 } : s))
      const answer = inner.apply(peeked, 'peek')
      return isPending(answer) ? answer.then((results) => denied(steps, results)) : denied(steps, answer)
    },
  })
}
