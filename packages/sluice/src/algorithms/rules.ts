// The rules every store applies around the algorithms, once for TypeScript: a block in force denies
// a step, a decision of several steps commits all of them or none, and a refunded state ends no
// later than it was written to. The TypeScript stores decide with these; their twins are the Lua
// pieces of src/stores/redis/scripts/shared/ and the plpgsql `step` and `apply` functions of
// src/stores/postgres/schema.ts.
import type { ResolvedPolicy } from '../policy.js'
import type { StepResult } from '../store.js'
import { algorithms } from './index.js'

/** One step decided: its result, and the state a commit stores. */
export interface StepDecision extends StepResult {
  /** The outcome's state; under a block, the state as it was read (a blocked step never commits). */
  state: unknown
}

/**
 * One step of `policy` decided at `at` on the state its store read: `state` (undefined: none or
 * expired), `endsInMs` (ms until the state was written to end, with a state; see Algorithm.consume)
 * and `blockedUntil` (ms, 0 when never blocked).
 *
 * While a block is in force the step is denied with `blocked`, nothing left, and the longer of the
 * block's wait and the one its units impose: a block adds a wait and never shortens one, since
 * nothing is committed while it is in force and the units' own wait still stands when it ends.
 */
export function decideStep(
  policy: ResolvedPolicy,
  cost: number,
  leaseId: string | undefined,
  state: unknown,
  endsInMs: number | undefined,
  blockedUntil: number,
  at: number,
  peek: boolean,
): StepDecision {
  const algorithm = algorithms[policy.algorithm]
  if (blockedUntil > at) {
    const left = blockedUntil - at
    const units = algorithm.consume(state, policy, at, cost, true, undefined, undefined, endsInMs)
    return {
      allowed: false,
      remaining: 0,
      resetMs: Math.max(left, units.resetMs),
      retryAfterMs: Math.max(left, units.retryAfterMs),
      blocked: true,
      state,
    }
  }
  const o = algorithm.consume(state, policy, at, cost, peek, leaseId, undefined, endsInMs)
  return {
    allowed: o.allowed,
    remaining: o.remaining,
    resetMs: o.resetMs,
    retryAfterMs: o.retryAfterMs,
    blocked: false,
    state: o.state,
  }
}

/** A decision's answer without the state: what a store hands back. */
export function resultOf(d: StepResult): StepResult {
  return {
    allowed: d.allowed,
    remaining: d.remaining,
    resetMs: d.resetMs,
    retryAfterMs: d.retryAfterMs,
    blocked: d.blocked,
  }
}

/** One decision of several steps, as `decideAll` leaves it. */
export interface AllOrNothing<D extends StepResult> {
  /** A consume in which every step admits: store every step's `decisions[i].state`. */
  commit: boolean
  /** Each step decided as the mode asks (consume or peek). */
  decisions: D[]
  /** What the decision answers, per step. */
  results: StepResult[]
}

/**
 * One decision of `count` steps, all or nothing: `decide(i, peek)` decides step i on what its store
 * read for it (decideStep). A peek answers every step as it is. A consume commits only when every
 * step admits; otherwise nothing is committed, a step that would admit reports its state as it is
 * (decided again, as a peek) and a step that denies reports its denial.
 */
export function decideAll<D extends StepResult>(
  count: number,
  mode: 'consume' | 'peek',
  decide: (index: number, peek: boolean) => D,
): AllOrNothing<D> {
  const peek = mode === 'peek'
  const decisions: D[] = []
  let admitted = true
  for (let i = 0; i < count; i++) {
    const d = decide(i, peek)
    decisions.push(d)
    admitted &&= d.allowed
  }
  const commit = admitted && !peek
  const results = decisions.map((d, i) =>
    commit || peek || !d.allowed ? resultOf(d) : resultOf(decide(i, true)),
  )
  return { commit, decisions, results }
}

/** A state after a refund, and when it ends. */
export interface Refunded {
  /** undefined: nothing is left to store. */
  state: unknown
  /** When the state ends (ms): `at` when nothing is left. */
  endsAt: number
  /** Units left after the refund (the policy's limit when nothing is left). */
  remaining: number
}

/**
 * Give back `cost` units of a step (concurrency: lease `leaseId`) on its stored `state`, which was
 * written to end at `endsAt` (undefined: a caller that keeps no expiry). The refunded state lasts
 * until it is back to full, and never later than it was written to end: giving units back never
 * makes a state last longer.
 */
export function refundStep(
  policy: ResolvedPolicy,
  cost: number,
  leaseId: string | undefined,
  state: unknown,
  endsAt: number | undefined,
  at: number,
): Refunded {
  const algorithm = algorithms[policy.algorithm]
  const endsInMs = endsAt === undefined ? undefined : endsAt - at
  const next = algorithm.refund(state, policy, at, cost, leaseId, endsInMs)
  if (next === undefined) return { state: undefined, endsAt: at, remaining: policy.limit }
  const probe = algorithm.consume(next, policy, at, 1, true)
  return {
    state: next,
    endsAt: Math.min(at + probe.resetMs, endsAt ?? Number.POSITIVE_INFINITY),
    remaining: probe.remaining,
  }
}
