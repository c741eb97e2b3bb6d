// Decision events: the listeners (onDecision, subscribe) and the one wrapper that times a decision
// and tells them. The limiter swaps the wrapper in while anyone listens and out when nobody does,
// so the decision code itself never asks whether someone is listening.
import type { ResolvedPolicy } from '../policy.js'
import { isPending, type MaybePromise, type Step } from '../store.js'
import type { Decision, DecisionEvent, DecisionListener } from './types.js'

/** One decision down the chain and back: the steps, and whether they are a layered check. */
export type Run = (
  operation: DecisionEvent['operation'],
  steps: readonly Step[],
  mode: 'consume' | 'peek',
  layered: boolean,
) => MaybePromise<Decision>

/** One single check down the chain and back: `Run` for one validated step, given as its parts. */
export type RunOne = (
  operation: DecisionEvent['operation'],
  policy: ResolvedPolicy,
  key: string,
  cost: number,
  mode: 'consume' | 'peek',
) => MaybePromise<Decision>

export interface DecisionEvents {
  /** How the limiter runs a decision right now: plainly, or timed and told to the listeners. */
  readonly run: Run
  /** The same for a single check. */
  readonly runOne: RunOne
  subscribe(listener: DecisionListener): () => void
}

/**
 * `plain` and `plainOne` run a decision; while anyone listens, `run` and `runOne` are them timed and
 * told to the listeners.
 */
export function decisionEvents(
  plain: Run,
  plainOne: RunOne,
  storeName: string,
  first: DecisionListener | undefined,
): DecisionEvents {
  let listeners: DecisionListener[] = first === undefined ? [] : [first]

  function emit(operation: DecisionEvent['operation'], decision: Decision, started: number): Decision {
    const event: DecisionEvent = decision.cached
      ? { operation, decision, store: storeName, storeSeconds: 0, cached: true }
      : { operation, decision, store: storeName, storeSeconds: (performance.now() - started) / 1000 }
    for (const listener of listeners) {
      try {
        listener(event)
      } catch {
        // A broken listener must never break a decision.
      }
    }
    return decision
  }

  /** Tell the listeners of `d` (now, or once it settles), timed from `started`. */
  function told(
    operation: DecisionEvent['operation'],
    d: MaybePromise<Decision>,
    started: number,
  ): MaybePromise<Decision> {
    return isPending(d) ? d.then((value) => emit(operation, value, started)) : emit(operation, d, started)
  }
  const observed: Run = (operation, steps, mode, layered) => {
    const started = performance.now()
    return told(operation, plain(operation, steps, mode, layered), started)
  }
  const observedOne: RunOne = (operation, policy, key, cost, mode) => {
    const started = performance.now()
    return told(operation, plainOne(operation, policy, key, cost, mode), started)
  }

  type Swapped = { run: Run; runOne: RunOne }
  function swap(to: Swapped): void {
    ;(events as Swapped).run = to.run
    ;(events as Swapped).runOne = to.runOne
  }
  const quiet: Swapped = { run: plain, runOne: plainOne }
  const timed: Swapped = { run: observed, runOne: observedOne }
  const events: DecisionEvents = {
    ...(listeners.length > 0 ? timed : quiet),
    subscribe(listener) {
      listeners = [...listeners, listener]
      swap(timed)
      return () => {
        listeners = listeners.filter((l) => l !== listener)
        if (listeners.length === 0) swap(quiet)
      }
    },
  }
  return events
}
