// After an admission, how long until the next request of `cost` on the same key fits, read from the
// admitted decision's own numbers: exact for the algorithms whose `resetMs` says it (fixed window:
// the window's end; token bucket and GCRA: the refill, within 1 ms), unknown for the others. It
// saves the waiter behind an admitted one the store call that would only be denied. Another
// process taking units meanwhile is fine: the waiter then asks, is denied and sleeps again.
import type { Decision } from '../limiter/types.js'
import type { ResolvedPolicy } from '../policy.js'

/** Ms from `admitted` until `cost` units fit: 0 when they fit now, undefined when the numbers do not say. */
export function nextFitMs(policy: ResolvedPolicy, admitted: Decision, cost: number): number | undefined {
  if (admitted.remaining >= cost) return 0
  switch (policy.algorithm) {
    case 'fixed-window':
      // Out of units in this window: the next one opens when this one resets.
      return admitted.resetMs
    case 'token-bucket':
    case 'gcra':
      // resetMs is the time to refill all `capacity` units; `cost` of them come that much sooner
      // than the rest (rounded up, so never early by more than the store's own rounding).
      return Math.max(
        0,
        Math.ceil(admitted.resetMs - ((policy.capacity - cost) * policy.windowMs) / policy.limit),
      )
    default:
      return undefined
  }
}
