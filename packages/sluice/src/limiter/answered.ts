// The remote decision's last link: a single check sent down a chain whose links hand results up
// (src/answer.ts), its Decision made where the store's results arrive and handed to the one promise
// the caller awaits.
import { type Answer, applyTo } from '../answer.js'
import { promiseWith, takenReject, takenResolve } from '../resolvers.js'
import type { MaybePromise, Step, StepResult, Store } from '../store.js'
import { singleDecision } from './decisions.js'
import type { Decision } from './types.js'

/** Where a single check's results become its Decision, settling the caller's promise. */
class DecisionAnswer implements Answer<StepResult[]> {
  constructor(
    private readonly steps: readonly Step[],
    private readonly consumed: boolean,
    private readonly resolve: (decision: Decision) => void,
    private readonly reject: (error: unknown) => void,
  ) {}
  ok(results: StepResult[]): void {
    let decision: Decision
    try {
      decision = singleDecision(this.steps, results, this.consumed)
    } catch (error) {
      this.reject(error)
      return
    }
    this.resolve(decision)
  }
  fail(error: unknown): void {
    this.reject(error)
  }
}

/**
 * A single check's Decision from `store` (a chain that answers through ApplyTo): at once when the
 * store has its results at once (a cached denial, a fallback), else the promise its answer settles.
 */
export function singleDecisionFrom(
  store: Store,
  steps: readonly Step[],
  mode: 'consume' | 'peek',
): MaybePromise<Decision> {
  const consumed = mode === 'consume'
  // Made first: the answer may come before applyTo returns (a failure the store sees at once).
  const promise = promiseWith<Decision>()
  const to = new DecisionAnswer(steps, consumed, takenResolve(), takenReject())
  const results = applyTo(store, steps, mode, to)
  return results === undefined ? promise : singleDecision(steps, results, consumed)
}
