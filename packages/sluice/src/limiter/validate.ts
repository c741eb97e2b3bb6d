// The first link of the chain: a caller's (policy, key, cost) or layered checks become validated
// Steps, or a typed error before anything reaches a store.
import { InvalidCostError, InvalidKeyError, InvalidOptionsError, UnknownPolicyError } from '../errors.js'
import type { ResolvedPolicy } from '../policy.js'
import type { Step } from '../store.js'
import type { Check } from './types.js'

export interface Validator {
  /**
   * The policy of one check whose key and cost are valid (the single-check path, which needs no
   * Step); throws UnknownPolicyError, InvalidKeyError or InvalidCostError. With `decision` (a
   * consume, peek or acquire), a cost above the capacity of a policy with `costAboveCapacity: 'deny'`
   * passes: the chain answers it as a denial (oversized-cost-store.ts).
   */
  single(name: unknown, key: unknown, cost: unknown, decision?: boolean): ResolvedPolicy
  /** One step; throws what `single` throws. */
  step(name: unknown, key: unknown, cost?: unknown, leaseId?: string, decision?: boolean): Step
  /** The steps of a layered check; throws InvalidOptionsError for a malformed list. */
  steps(checks: unknown): Step[]
}

export function validator(policies: ReadonlyMap<string, ResolvedPolicy>): Validator {
  // The last policy looked up: most traffic names the same policy again, and comparing the same
  // string is cheaper than hashing it.
  let lastName: unknown
  let lastPolicy: ResolvedPolicy | undefined
  function policyOf(name: unknown): ResolvedPolicy {
    const policy = typeof name === 'string' ? policies.get(name) : undefined
    if (policy === undefined) {
      throw new UnknownPolicyError(
        `unknown policy ${JSON.stringify(name)}; configured: ${[...policies.keys()].join(', ')}`,
      )
    }
    lastName = name
    lastPolicy = policy
    return policy
  }

  // Every decision runs `single`, and V8 inlines a caller's callees only up to a budget of bytecode
  // per compiled function: the checks stay short, and what builds an error lives in `refused`, so
  // the rest of a decision's path fits in the same budget.
  function single(name: unknown, key: unknown, cost: unknown, decision = false): ResolvedPolicy {
    const policy = name === lastName && lastPolicy !== undefined ? lastPolicy : policyOf(name)
    if (
      typeof key === 'string' &&
      key.length > 0 &&
      Number.isSafeInteger(cost) &&
      ((cost as number) <= policy.capacity || (decision && policy.costAboveCapacity === 'deny')) &&
      (cost as number) > 0
    )
      return policy
    return refused(policy, key, cost)
  }

  /** Throws the error of a check `single` refused, the key's before the cost's. */
  function refused(policy: ResolvedPolicy, key: unknown, cost: unknown): never {
    if (typeof key !== 'string' || key.length === 0) {
      throw new InvalidKeyError(
        `policy ${policy.name}: key must be a non-empty string, got ${key === '' ? 'an empty string' : typeof key}`,
      )
    }
    if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost <= 0) {
      throw new InvalidCostError(
        `policy ${policy.name}: cost must be a positive whole number, got ${String(cost)}`,
      )
    }
    throw new InvalidCostError(
      `policy ${policy.name}: cost ${cost} can never be admitted (capacity ${policy.capacity}); lower the cost or raise ${policy.algorithm === 'token-bucket' || policy.algorithm === 'gcra' ? 'burst' : 'limit'}`,
    )
  }

  function step(name: unknown, key: unknown, cost: unknown = 1, leaseId?: string, decision = false): Step {
    const policy = single(name, key, cost, decision)
    const k = key as string
    const c = cost as number
    return leaseId === undefined ? { policy, key: k, cost: c } : { policy, key: k, cost: c, leaseId }
  }

  function steps(checks: unknown): Step[] {
    if (!Array.isArray(checks) || checks.length === 0) {
      throw new InvalidOptionsError('layered consume: pass a non-empty array of { policy, key, cost? }')
    }
    // A loop, not map: map skips the holes of a sparse array, which then reach find() as undefined.
    const out: Step[] = []
    for (let i = 0; i < checks.length; i++) {
      const c: unknown = checks[i]
      if (typeof c !== 'object' || c === null)
        throw new InvalidOptionsError(
          `layered consume: checks[${i}] is ${c === null ? 'null' : typeof c}; pass { policy, key, cost? }`,
        )
      const check = c as Check
      out.push(step(check.policy, check.key, check.cost, undefined, true))
    }
    // A hybrid policy (syncEveryMs) decides in this process on its own counters: it cannot take
    // part in the store's all-or-nothing commit.
    const hybridStep = out.find((s) => s.policy.syncEveryMs !== undefined)
    if (hybridStep !== undefined)
      throw new InvalidOptionsError(
        `layered consume: policy ${hybridStep.policy.name} is hybrid; hybrid policies cannot be layered yet, check it on its own`,
      )
    const seen = new Set<string>()
    for (const s of out) {
      const id = `${s.policy.name}:${s.key}`
      if (seen.has(id))
        throw new InvalidOptionsError(
          `layered consume: policy ${s.policy.name} and key ${JSON.stringify(s.key)} appear twice; merge them into one check with the summed cost`,
        )
      seen.add(id)
    }
    return out
  }

  return { single, step, steps }
}
