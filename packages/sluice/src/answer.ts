// How the links of a remote decision's path (the limiter, the deny cache, the failover layer, the
// Redis store's coalescer) hand its results up: each link passes the one below an object to call
// with them, so the reply of a coalesced script call reaches every decision's Decision in one
// synchronous pass, with one promise per decision (the caller's) instead of a promise and a
// promise reaction per link. A link without this capability is reached through `apply`.
import type { Step, StepResult, Store } from './store.js'
import { isPending } from './store.js'

/**
 * Where a decision's answer goes: `ok` with its value or `fail` with why, at most one of them, once.
 * Neither throws (a link that can fail catches and calls `fail` of the answer above it).
 */
export interface Answer<T> {
  ok(value: T): void
  fail(error: unknown): void
}

/**
 * A link's `apply` with the results handed to `to`: it returns the results when it has them at
 * once (and then never calls `to`), else undefined, and `to` is called later (or already was).
 * It may throw, as `apply` may. Keyed by a registered symbol so that every bundle of the package
 * (index, redis) sees the same key; not part of the Store contract.
 */
export const APPLY_TO: unique symbol = Symbol.for('sluice.applyTo') as never

export type ApplyTo = (
  steps: readonly Step[],
  mode: 'consume' | 'peek',
  to: Answer<StepResult[]>,
) => StepResult[] | undefined

/**
 * What a link keeps under APPLY_TO: its ApplyTo and the `apply` it answers for. A store copied with
 * its `apply` replaced (`{ ...store, apply }`) keeps the slot, whose `apply` is then not the store's:
 * the replaced `apply` is what must run, so the slot is not used.
 */
export interface ApplyToSlot {
  readonly apply: Store['apply']
  readonly to: ApplyTo
}

/** The ApplyTo of `store`, when it has one for the `apply` it has now. */
function ownApplyTo(store: Store): ApplyTo | undefined {
  const slot = (store as { [APPLY_TO]?: ApplyToSlot })[APPLY_TO]
  return slot !== undefined && slot.apply === store.apply ? slot.to : undefined
}

/** Whether `store` hands results up through an Answer rather than a promise. */
export function answersTo(store: Store): boolean {
  return ownApplyTo(store) !== undefined
}

/**
 * `store.apply(steps, mode)` with the results handed to `to` when they are not there at once (the
 * ApplyTo contract), through the store's own ApplyTo when it has one, else through its promise.
 */
export function applyTo(
  store: Store,
  steps: readonly Step[],
  mode: 'consume' | 'peek',
  to: Answer<StepResult[]>,
): StepResult[] | undefined {
  const own = ownApplyTo(store)
  if (own !== undefined) return own(steps, mode, to)
  const answer = store.apply(steps, mode)
  if (!isPending(answer)) return answer
  answer.then(
    (results) => to.ok(results),
    (error: unknown) => to.fail(error),
  )
  return undefined
}
