// A link of the chain, present when some policy has `blockDuration`: a consume that a step of such a
// policy denied for lack of units blocks that step's key with the store's own `block`, and the
// denial reports the block as its wait, as the store will answer every request until it ends.
import type { MaybePromise, Step, StepResult, Store } from '../store.js'
import { forwardStore, isPending } from '../store.js'

/** The steps to block, by block length: denied for lack of units by the store itself, on a policy that blocks. */
function blocksOf(steps: readonly Step[], results: readonly StepResult[]): Map<number, Step[]> {
  const byDuration = new Map<number, Step[]>()
  for (let i = 0; i < steps.length; i++) {
    const s = steps[i]!
    const r = results[i]!
    const blockMs = s.policy.blockDurationMs
    // Blocked already (its own block stands), answered by a fallback or the deny cache (the store
    // did not decide: a cached denial was blocked when it was first answered), or admitted.
    if (blockMs === undefined || r.allowed || r.blocked || r.unavailable || r.degraded || r.cached) continue
    const same = byDuration.get(blockMs)
    if (same === undefined) byDuration.set(blockMs, [s])
    else same.push(s)
  }
  return byDuration
}

/** `results` with each blocked step reporting the block: nothing left, and at least the block to wait. */
function withBlocks(steps: readonly Step[], results: StepResult[], blocked: ReadonlySet<Step>): StepResult[] {
  return results.map((r, i) => {
    const s = steps[i]!
    if (!blocked.has(s)) return r
    const blockMs = s.policy.blockDurationMs!
    return {
      ...r,
      remaining: 0,
      retryAfterMs: Math.max(r.retryAfterMs, blockMs),
      resetMs: Math.max(r.resetMs, blockMs),
    }
  })
}

/** `inner` with the blocks of `blockDuration` policies written after the denials that call for them. */
export function blockOnDenyStore(inner: Store): Store {
  function blockAfter(steps: readonly Step[], results: StepResult[]): MaybePromise<StepResult[]> {
    const blocks = blocksOf(steps, results)
    if (blocks.size === 0) return results
    const blocked = new Set<Step>()
    const writes: Promise<void>[] = []
    for (const [durationMs, group] of blocks) {
      writes.push(inner.block(group, durationMs))
      for (const s of group) blocked.add(s)
    }
    if (inner.inProcess) {
      // An in-process store writes a block when it is called (the memory store's block does its
      // work before its first await), so the answer goes back at once and consumeSync keeps
      // working; the promises only say it is done.
      for (const write of writes) write.catch(() => {})
      return withBlocks(steps, results, blocked)
    }
    // A block the store could not write leaves the denial as the store gave it: the key is not
    // blocked, and its own wait is the truth. The failover link counts the failure.
    return Promise.all(writes).then(
      () => withBlocks(steps, results, blocked),
      () => results,
    )
  }
  return forwardStore(inner, {
    apply(steps, mode): MaybePromise<StepResult[]> {
      const answer = inner.apply(steps, mode)
      if (mode === 'peek') return answer
      return isPending(answer)
        ? answer.then((results) => blockAfter(steps, results))
        : blockAfter(steps, answer)
    },
  })
}
