// A link of the chain in front of a remote store: the local deny cache (src/scale/deny-cache.ts)
// answers a key it knows to be denied without asking the store, and learns from the store's answers.
import { type Answer, APPLY_TO, answersTo, applyTo } from '../answer.js'
import type { LocalDenyCache } from '../scale/deny-cache.js'
import type { MaybePromise, Step, StepResult, Store } from '../store.js'
import { forwardStore, isPending } from '../store.js'

/**
 * `inner` behind the deny cache. The cache runs on `clock` (the store's own when it has one): a
 * test clock that passes a denial's retry time must find the key admitted, not a denial cached on
 * Date.now. Concurrency steps are never cached (a lease ends when released, not at a known time).
 */
export function denyCacheStore(inner: Store, cache: LocalDenyCache, clock: () => number): Store {
  function remember(steps: readonly Step[], results: StepResult[], sentAt: number, epoch: number) {
    for (let i = 0; i < steps.length; i++) {
      const s = steps[i]!
      const r = results[i]!
      // A penalised policy's denial for lack of units must reach the store again to be counted;
      // its blocks are cached like any other.
      if (s.policy.penalty !== undefined && !r.blocked) continue
      if (s.policy.algorithm !== 'concurrency') cache.remember(s, r, sentAt, epoch)
    }
    return results
  }
  /** Forget before (no new hit) and after (no answer from before the change gets cached). */
  async function changing(steps: readonly Step[], change: Promise<void>): Promise<void> {
    await change
    forget(steps)
  }
  function forget(steps: readonly Step[]): void {
    for (const s of steps) if (s.policy.algorithm !== 'concurrency') cache.forget(s)
  }
  /** A decision's answer on its way up: learnt from, then handed on. */
  class Learning implements Answer<StepResult[]> {
    constructor(
      private readonly steps: readonly Step[],
      private readonly sentAt: number,
      private readonly epoch: number,
      private readonly to: Answer<StepResult[]>,
    ) {}
    ok(results: StepResult[]): void {
      try {
        remember(this.steps, results, this.sentAt, this.epoch)
      } catch (error) {
        this.to.fail(error)
        return
      }
      this.to.ok(results)
    }
    fail(error: unknown): void {
      this.to.fail(error)
    }
  }
  function apply(steps: readonly Step[], mode: 'consume' | 'peek'): MaybePromise<StepResult[]> {
    const sentAt = clock()
    const hit = cachedResults(cache, steps, sentAt)
    if (hit !== undefined) return hit
    const epoch = cache.epoch
    const answer = inner.apply(steps, mode)
    if (!isPending(answer)) return remember(steps, answer, sentAt, epoch)
    return answer.then((results) => remember(steps, results, sentAt, epoch))
  }
  /** `apply` for a link below that hands its results up (the failover layer): no promise here. */
  function applyToAnswer(
    steps: readonly Step[],
    mode: 'consume' | 'peek',
    to: Answer<StepResult[]>,
  ): StepResult[] | undefined {
    const sentAt = clock()
    const hit = cachedResults(cache, steps, sentAt)
    if (hit !== undefined) return hit
    const epoch = cache.epoch
    const answer = applyTo(inner, steps, mode, new Learning(steps, sentAt, epoch, to))
    return answer === undefined ? undefined : remember(steps, answer, sentAt, epoch)
  }
  // A change of a key's units (refund, charge, block, reset) forgets its cached denial; the rest
  // goes straight down.
  return forwardStore(inner, {
    ...(answersTo(inner) ? { [APPLY_TO]: { apply, to: applyToAnswer } } : {}),
    apply,
    refund(steps) {
      forget(steps)
      return changing(steps, inner.refund(steps))
    },
    charge(steps) {
      forget(steps)
      return changing(steps, inner.charge(steps))
    },
    block(steps, durationMs) {
      forget(steps)
      return changing(steps, inner.block(steps, durationMs))
    },
    reset(steps) {
      forget(steps)
      return changing(steps, inner.reset(steps))
    },
  })
}

/**
 * Store-shaped results for a check the deny cache can answer, every one marked `cached`: the cached
 * denial for the first cached layer, and for the other layers (not evaluated, not committed) a full
 * allowance marked `notEvaluated`, so that nobody reads it as their state.
 */
function cachedResults(cache: LocalDenyCache, steps: readonly Step[], now: number): StepResult[] | undefined {
  for (let i = 0; i < steps.length; i++) {
    const s = steps[i]!
    if (s.policy.algorithm === 'concurrency') continue
    const denied = cache.lookup(s, now)
    if (denied === undefined) continue
    denied.cached = true
    if (steps.length === 1) return [denied]
    return steps.map((other, j) =>
      j === i
        ? denied
        : {
            allowed: true,
            remaining: other.policy.capacity,
            resetMs: 0,
            retryAfterMs: 0,
            blocked: false,
            notEvaluated: true,
            cached: true,
          },
    )
  }
  return undefined
}
