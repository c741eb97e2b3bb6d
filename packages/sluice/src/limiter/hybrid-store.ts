// A link of the chain, present when some policy has `mode: 'hybrid'`: a single step of a hybrid
// policy is decided in this process on its HybridPolicy's counters (src/scale/hybrid.ts); every
// other call goes on down the chain.
import { InvalidOptionsError } from '../errors.js'
import type { HybridPolicy } from '../scale/hybrid.js'
import type { Step, Store } from '../store.js'
import { forwardStore, isPending } from '../store.js'

/** `inner` with the hybrid policies in front, by policy name. */
export function hybridStore(inner: Store, hybrids: ReadonlyMap<string, HybridPolicy>): Store {
  // Layered checks never hold a hybrid policy (refused at validation): one step or none.
  const hybridOf = (steps: readonly Step[]): HybridPolicy | undefined =>
    steps.length === 1 ? hybrids.get(steps[0]!.policy.name) : undefined
  // charge, now and anything else go straight down: reserve refuses hybrid policies.
  return forwardStore(inner, {
    apply(steps, mode) {
      const hybrid = hybridOf(steps)
      if (hybrid === undefined) return inner.apply(steps, mode)
      // From a lease: an answer now; in Redis (no lease, or used up): a promise.
      const result = hybrid.apply(steps[0]!, mode)
      return isPending(result) ? result.then((r) => [r]) : [result]
    },
    async refund(steps) {
      const hybrid = hybridOf(steps)
      if (hybrid === undefined) return inner.refund(steps)
      hybrid.refund(steps[0]!)
    },
    async block(steps, durationMs) {
      if (hybridOf(steps) !== undefined)
        throw new InvalidOptionsError(
          `block: policy ${steps[0]!.policy.name} is hybrid; block is not supported in hybrid mode yet`,
        )
      return inner.block(steps, durationMs)
    },
    async reset(steps) {
      const hybrid = hybridOf(steps)
      if (hybrid === undefined) return inner.reset(steps)
      return hybrid.reset(steps[0]!)
    },
    async close() {
      await Promise.all([...hybrids.values()].map((h) => h.close()))
      await inner.close()
    },
  })
}
