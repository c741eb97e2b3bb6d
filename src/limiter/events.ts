// Decision events: the listeners (onDecision, subscribe) and the one wrapper that times a decision
// and tells them. The limiter swaps the wrapper in while anyone listens and out when nobody does,
// so the decision code itself never asks whether someone is listening.
import type { MaybePromise, Step } from '../store.js'
import type { Decision, DecisionEvent, DecisionListener } from './types.js'

/** One decision down the chain and back: the steps, and whether they are a layered check. */
export type Decide = (
  operation: DecisionEvent['operation'],
  steps: readonly Step[],
  mode: 'consume' | 'peek',
  layered: boolean,
) => MaybePromise<Decision>

export interface DecisionEvents {
  /** How the limiter decides right now: plainly, or timed and told to the listeners. */
  readonly decide: Decide
  subscribe(listener: DecisionListener): () => void
}

/** `plain` decides; while anyone listens, `decide` is `plain` timed and told to the listeners. */
export function decisionEvents(
  plain: Decide,
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

  const observed: Decide = (operation, steps, mode, layered) => {
    const started = performance.now()
    const d = plain(operation, steps, mode, layered)
    return d instanceof Promise
      ? d.then((value) => emit(operation, value, started))
      : emit(operation, d, started)
  }

  const events: DecisionEvents = {
    decide: listeners.length > 0 ? observed : plain,
    subscribe(listener) {
      listeners = [...listeners, listener]
      ;(events as { decide: Decide }).decide = observed
      return () => {
        listeners = listeners.filter((l) => l !== listener)
        if (listeners.length === 0) (events as { decide: Decide }).decide = plain
      }
    },
  }
  return events
}
