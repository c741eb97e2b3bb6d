// A link of the chain, present when some policy has `penalty`: a consume that a step of such a policy
// lost for lack of units is counted in the store, and the denial that completes `after` of them
// within `within` blocks the key with the store's own `block`, for the block of the key's level.
//
// The counts are hidden policies of the same store, on the same subject (one Cluster slot), under
// ids no user policy can have (`~` is not allowed in an id):
// - `<id>~penalty`: the denials, a sliding-window-log of `after` per `within`. Each denial consumes
//   one unit; the one consume that fills the log (admitted with nothing left) is the after-th, and
//   exactly one instance sees it, whatever races it.
// - `<id>~penalty-guard`: blocked with the key for the penalty's block. A denial is counted in one
//   layered consume with it, so a count that reaches the store while a penalty is in force (a
//   denial decided just before the block, counted just after) counts nothing: it belongs to the
//   offence being punished. Between the after-th count and the block's write the log is full, so
//   those count nothing either; the log is emptied once the block is written.
// - `<id>~penalty-level`: the penalties, a sliding-window-log over `memoryMs` (2 x max). The count
//   before a penalty's own unit is its level; a key without a penalty for `memoryMs` is back at 0.
// The store's block keeps a longer block in force, so a racing lower level never shortens one.
import type { ResolvedPenalty } from '../penalty.js'
import { LEVEL_SLACK } from '../penalty.js'
import type { ResolvedPolicy } from '../policy.js'
import type { MaybePromise, Step, StepResult, Store } from '../store.js'
import { forwardStore, isPending } from '../store.js'

/** More counts in a second than any key makes: the guard never denies for lack of units. */
const GUARD_LIMIT = 2 ** 40

/** The hidden policies that keep one penalised policy's counts. */
interface Counts {
  readonly denials: ResolvedPolicy
  /** Never out of units (its state lasts a second); only its block matters. */
  readonly guard: ResolvedPolicy
  /** Undefined when every level blocks alike (`factor: 1`, or `block` equal to `max`). */
  readonly levels: ResolvedPolicy | undefined
}

function countsOf(policy: ResolvedPolicy, penalty: ResolvedPenalty): Counts {
  const hidden = (
    suffix: string,
    algorithm: 'sliding-window-log' | 'fixed-window',
    limit: number,
    windowMs: number,
  ): ResolvedPolicy =>
    Object.freeze({
      name: `${policy.name}~${suffix}`,
      id: `${policy.id}~${suffix}`,
      algorithm,
      limit,
      windowMs,
      capacity: limit,
    })
  const log = (suffix: string, limit: number, windowMs: number) =>
    hidden(suffix, 'sliding-window-log', limit, windowMs)
  const levels = penalty.blocksMs.length - 1
  return {
    denials: log('penalty', penalty.after, penalty.withinMs),
    guard: hidden('penalty-guard', 'fixed-window', GUARD_LIMIT, 1000),
    levels: levels === 0 ? undefined : log('penalty-level', levels + LEVEL_SLACK, penalty.memoryMs),
  }
}

/** A step the store itself denied for lack of units: an offence a penalty counts. */
function isOffence(s: Step, r: StepResult): boolean {
  return (
    s.policy.penalty !== undefined &&
    !r.allowed &&
    !r.blocked &&
    !r.unavailable &&
    !r.degraded &&
    !r.cached &&
    !r.notEvaluated
  )
}

/** An answer the store decided (not a fallback's). */
const decided = (r: StepResult | undefined): r is StepResult =>
  r !== undefined && !r.degraded && !r.unavailable

const then = <T, U>(value: MaybePromise<T>, next: (value: T) => MaybePromise<U>): MaybePromise<U> =>
  isPending(value) ? value.then(next) : next(value)

/**
 * `inner` with escalating penalties. `counter` is the store below the deny cache: counts must reach
 * the store every time (a cached denial of the log would hide another instance's reset).
 */
export function penaltyStore(inner: Store, counter: Store): Store {
  const counts = new WeakMap<ResolvedPolicy, Counts>()
  function countsFor(policy: ResolvedPolicy): Counts {
    let c = counts.get(policy)
    if (c === undefined) {
      c = countsOf(policy, policy.penalty!)
      counts.set(policy, c)
    }
    return c
  }
  /** Settled at once by an in-process store, which does its work when called. */
  const written = (write: Promise<void>): MaybePromise<boolean> => {
    if (!inner.inProcess)
      return write.then(
        () => true,
        () => false,
      )
    write.catch(() => {})
    return true
  }
  const safely = <T>(call: () => MaybePromise<T>, failed: T): MaybePromise<T> => {
    try {
      const answer = call()
      return isPending(answer) ? answer.catch(() => failed) : answer
    } catch {
      return failed
    }
  }

  /** The level of the key's penalty about to be written: its earlier penalties within memory. */
  function levelOf(s: Step, c: Counts): MaybePromise<number> {
    const levels = c.levels
    if (levels === undefined) return 0
    return then(
      safely(() => counter.apply([{ policy: levels, key: s.key, cost: 1 }], 'consume'), []),
      ([r]) => {
        if (!decided(r)) return 0
        return r.allowed ? levels.limit - r.remaining - 1 : levels.limit
      },
    )
  }

  /** One offence counted; its result blocked for the penalty when it completes `after` of them. */
  function punish(s: Step, r: StepResult): MaybePromise<StepResult> {
    const penalty = s.policy.penalty!
    const c = countsFor(s.policy)
    const denial: Step = { policy: c.denials, key: s.key, cost: 1 }
    const guard: Step = { policy: c.guard, key: s.key, cost: 1 }
    return then(
      safely(() => counter.apply([guard, denial], 'consume'), []),
      ([guarded, counted]) => {
        if (!decided(guarded) || !guarded.allowed) return r
        if (!decided(counted) || !counted.allowed || counted.remaining > 0) return r
        return then(levelOf(s, c), (level) => {
          const blockMs = penalty.blocksMs[Math.min(level, penalty.blocksMs.length - 1)]!
          // The block first (the guard's with it): until the log is emptied a racing count finds
          // it full, and after that the guard blocked, so one offence never earns two penalties.
          return then(written(inner.block([s, guard], blockMs)), (blocked) => {
            if (!blocked) return r
            return then(written(counter.reset([denial])), () => ({
              ...r,
              blocked: true,
              remaining: 0,
              retryAfterMs: Math.max(r.retryAfterMs, blockMs),
              resetMs: Math.max(r.resetMs, blockMs),
              penalty: { level, blockMs },
            }))
          })
        })
      },
    )
  }

  function penalise(steps: readonly Step[], results: StepResult[]): MaybePromise<StepResult[]> {
    if (!steps.some((s, i) => isOffence(s, results[i]!))) return results
    const answers = steps.map((s, i) => (isOffence(s, results[i]!) ? punish(s, results[i]!) : results[i]!))
    return answers.some(isPending) ? Promise.all(answers) : (answers as StepResult[])
  }

  return forwardStore(inner, {
    apply(steps, mode): MaybePromise<StepResult[]> {
      const answer = inner.apply(steps, mode)
      if (mode === 'peek') return answer
      return then(answer, (results) => penalise(steps, results))
    },
    // A reset forgets the key's denials and level with its state and block.
    reset(steps) {
      const all: Step[] = [...steps]
      for (const s of steps) {
        if (s.policy.penalty === undefined) continue
        const c = countsFor(s.policy)
        all.push({ policy: c.denials, key: s.key, cost: 1 }, { policy: c.guard, key: s.key, cost: 1 })
        if (c.levels !== undefined) all.push({ policy: c.levels, key: s.key, cost: 1 })
      }
      return inner.reset(all)
    },
  })
}
