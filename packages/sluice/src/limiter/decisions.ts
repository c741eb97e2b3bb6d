// The last link back up the chain: step results become the Decisions callers see.
import { nearLimitRemaining, type ResolvedPolicy } from '../policy.js'
import type { Step, StepResult } from '../store.js'
import { markNearLimit } from './near-limit.js'
import type { Decision, LayeredDecision } from './types.js'

/**
 * The numbers every Decision carries, in the order every Decision lists them. The times are whole
 * ms: a store's are by contract, and one that answers a fraction is rounded up, so no caller is
 * told to come back early. Math.ceil also hands V8 a small integer: a difference of two timestamps
 * computed before the code is optimised is a heap number even when whole, and one such value stored
 * here would turn the field into a boxed double, one more allocation in every Decision after it.
 */
function numbers(policy: ResolvedPolicy, key: string, r: StepResult, limit: number): Decision {
  return {
    allowed: r.allowed,
    limit,
    remaining: r.remaining,
    resetMs: Math.ceil(r.resetMs),
    retryAfterMs: Math.ceil(r.retryAfterMs),
    policy: policy.name,
    key,
  }
}

/**
 * The decision for one step (one layer). A step whose cost is above its policy's capacity reached
 * the store only as a peek (oversized-cost-store.ts) and is denied for that reason.
 */
function decisionOf(s: Step, r: StepResult, consumed: boolean): Decision {
  const policy = s.policy
  const d = numbers(policy, s.key, r, r.capacity ?? policy.capacity)
  if (!r.allowed)
    d.reason =
      r.listed === 'deny' ? 'denied' : r.unavailable ? 'store_unavailable' : r.blocked ? 'blocked' : 'limit'
  if (r.degraded) d.degraded = true
  if (r.notEvaluated) d.notEvaluated = true
  if (r.listed !== undefined) d.listed = r.listed
  if (r.override) d.override = true
  if (r.penalty !== undefined) d.penalty = r.penalty
  const near = policy.nearLimitRemaining
  // A key with an override (r.capacity) has its line drawn on the override's capacity.
  if (near !== undefined)
    markNearLimit(
      d,
      r.capacity === undefined ? near : nearLimitRemaining(r.capacity, policy.nearLimit!),
      consumed ? s.cost : 0,
    )
  if (s.cost > policy.capacity) d.reason = 'cost_above_capacity'
  return d
}

/**
 * The decision of a single check (policy, key, `cost` spent: 0 for a peek) whose result carries
 * nothing but its numbers and `blocked`, as the memory store's single-step path answers: what
 * `decisionOf` makes of it, without reading the marks such a result never has. It runs inlined into
 * the caller of every such decision, where V8 inlines only up to a budget of bytecode.
 */
export function plainDecisionFor(policy: ResolvedPolicy, key: string, r: StepResult, cost: number): Decision {
  const d = numbers(policy, key, r, policy.capacity)
  if (!r.allowed) d.reason = r.blocked ? 'blocked' : 'limit'
  const near = policy.nearLimitRemaining
  if (near !== undefined) markNearLimit(d, near, cost)
  return d
}

/** A single check's decision; `cached` when the deny cache answered. */
export function singleDecision(
  steps: readonly Step[],
  results: readonly StepResult[],
  consumed: boolean,
): Decision {
  const r = results[0]!
  const d = decisionOf(steps[0]!, r, consumed)
  if (r.cached) d.cached = true
  return d
}

/** A layered check's decision: the deciding layer's numbers, plus every layer's own. */
export function layeredDecision(
  steps: readonly Step[],
  results: readonly StepResult[],
  consumed: boolean,
): LayeredDecision {
  const decisions = steps.map((s, i) => decisionOf(s, results[i]!, consumed))
  const denied = decisions.find((d) => !d.allowed)
  // Allowed: headline the layer closest to its limit (smallest share left).
  const headline =
    denied ??
    decisions.reduce((closest, d) =>
      d.remaining * closest.limit < closest.remaining * d.limit ? d : closest,
    )
  const out: LayeredDecision = { ...headline, results: decisions }
  if (denied !== undefined) out.deniedBy = denied.policy
  if (decisions.some((d) => d.degraded)) out.degraded = true
  // The deny cache marks every result of a check it answered; the layers themselves carry no flag.
  if (results[0]?.cached) out.cached = true
  return out
}
