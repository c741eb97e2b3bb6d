// The link at the head of the chain that applies allow and deny lists, the policies' own and the
// run-time entries (src/runtime-lists.ts): a step whose key a deny list holds denies the whole check
// without a store call (nothing committed); a step an allow list holds is answered here, not
// limited, and the other steps go down to the store.
import { type ListName, listOfKey } from '../lists.js'
import type { RuntimeLists } from '../runtime-lists.js'
import type { Step, StepResult, Store } from '../store.js'
import { forwardStore, isPending } from '../store.js'

/** A step's answer from its list: full units, nothing spent. */
function listedResult(s: Step, listed: 'allow' | 'deny'): StepResult {
  const deny = listed === 'deny'
  return {
    allowed: !deny,
    remaining: deny ? 0 : s.policy.capacity,
    resetMs: 0,
    retryAfterMs: 0,
    blocked: false,
    listed,
  }
}

/** Another layer of a check a deny list refused: not evaluated (the deny cache's placeholder). */
function notEvaluated(s: Step): StepResult {
  return {
    allowed: true,
    remaining: s.policy.capacity,
    resetMs: 0,
    retryAfterMs: 0,
    blocked: false,
    notEvaluated: true,
  }
}

/** The store's results for the unlisted steps, put back between the listed ones. */
function merged(
  steps: readonly Step[],
  verdicts: readonly ('allow' | 'deny' | undefined)[],
  rest: readonly StepResult[],
): StepResult[] {
  let next = 0
  return steps.map((s, i) => {
    const listed = verdicts[i]
    return listed === undefined ? rest[next++]! : listedResult(s, listed)
  })
}

/** Which list holds the step's key: the policy's own lists, then the run-time ones; a deny wins. */
function listOfStep(s: Step, runtime: RuntimeLists): ListName | undefined {
  const own = s.policy.lists === undefined ? undefined : listOfKey(s.policy.lists, s.key)
  if (own === 'deny' || runtime.size === 0) return own
  return runtime.listOfKey(s.policy.id, s.key) ?? own
}

/** `inner` with the lists of each step's policy applied before any other link sees the step. */
export function listsStore(inner: Store, runtime: RuntimeLists): Store {
  return forwardStore(inner, {
    apply(steps, mode) {
      let verdicts: ('allow' | 'deny' | undefined)[] | undefined
      let denied = false
      for (let i = 0; i < steps.length; i++) {
        const s = steps[i]!
        if (s.policy.lists === undefined && runtime.size === 0) continue
        const listed = listOfStep(s, runtime)
        if (listed === undefined) continue
        verdicts ??= new Array<'allow' | 'deny' | undefined>(steps.length)
        verdicts[i] = listed
        if (listed === 'deny') denied = true
      }
      if (verdicts === undefined) return inner.apply(steps, mode)
      const v = verdicts
      if (denied) return steps.map((s, i) => (v[i] === 'deny' ? listedResult(s, 'deny') : notEvaluated(s)))
      const rest = steps.filter((_, i) => v[i] === undefined)
      if (rest.length === 0) return merged(steps, v, [])
      const answer = inner.apply(rest, mode)
      return isPending(answer)
        ? answer.then((results) => merged(steps, v, results))
        : merged(steps, v, answer)
    },
  })
}
