// The vectors against the pure transitions alone: a store that keeps every state forever (no TTL).
// The memory store drops a state at exactly `resetMs`, which would hide an algorithm that gets its
// own window edge wrong; Redis keeps a key until just after its TTL, so the Lua twins rely on the
// algorithm's edge too. This harness makes every edge the algorithm's job.
//
// A second run hands each state's expiry (when it was written, `now + resetMs`) back to the
// transitions, as every store does: that is what a state written under other parameters is read
// with (the vectors that change a policy's parameters), and with unchanged parameters it must
// change nothing.
import { algorithms } from '../../packages/sluice/src/algorithms/index.js'
import { vectors } from '../../packages/sluice/src/conformance/vectors.js'
import { UnsupportedError } from '../../packages/sluice/src/errors.js'
import type { Step, StepResult, Store } from '../../packages/sluice/src/store.js'
import { runConformance } from './suite.js'

interface Stored {
  state: unknown
  /** When the state was written to end (ms), or undefined when the harness keeps no expiry. */
  untilMs: number | undefined
}

function pureStore(now: () => number, withExpiry: boolean): Store {
  const states = new Map<string, Stored>()
  const blocks = new Map<string, number>()
  const id = (s: Step) => `${s.policy.name}\u0000${s.key}`
  const evaluate = (s: Step, at: number, peek: boolean) => {
    const algorithm = algorithms[s.policy.algorithm]
    const stored = states.get(id(s))
    const state = stored?.state
    const endsInMs = stored?.untilMs === undefined ? undefined : stored.untilMs - at
    const blockedUntil = blocks.get(id(s)) ?? 0
    if (blockedUntil > at) {
      const units = algorithm.consume(state, s.policy, at, s.cost, true, undefined, undefined, endsInMs)
      const result: StepResult = {
        allowed: false,
        remaining: 0,
        resetMs: Math.max(blockedUntil - at, units.resetMs),
        retryAfterMs: Math.max(blockedUntil - at, units.retryAfterMs),
        blocked: true,
      }
      return { result, state: stored }
    }
    const o = algorithm.consume(state, s.policy, at, s.cost, peek, s.leaseId, undefined, endsInMs)
    const result: StepResult = {
      allowed: o.allowed,
      remaining: o.remaining,
      resetMs: o.resetMs,
      retryAfterMs: o.retryAfterMs,
      blocked: false,
    }
    return { result, state: { state: o.state, untilMs: withExpiry ? at + o.resetMs : undefined } }
  }
  return {
    name: withExpiry ? 'pure-expiry' : 'pure',
    inProcess: false,
    now,
    async charge() {
      throw new UnsupportedError('pure store: the vectors make no forced charge')
    },
    async apply(steps, mode) {
      const at = now()
      const evaluated = steps.map((s) => evaluate(s, at, mode === 'peek'))
      if (mode === 'peek') return evaluated.map((e) => e.result)
      if (evaluated.every((e) => e.result.allowed)) {
        for (const [i, s] of steps.entries()) {
          const next = evaluated[i]!.state
          if (next !== undefined) states.set(id(s), next)
        }
        return evaluated.map((e) => e.result)
      }
      // Nothing is charged: a layer that would admit reports its state as it is.
      return evaluated.map((e, i) => (e.result.allowed ? evaluate(steps[i]!, at, true).result : e.result))
    },
    async refund(steps) {
      const at = now()
      for (const s of steps) {
        const algorithm = algorithms[s.policy.algorithm]
        const stored = states.get(id(s))
        const untilMs = stored?.untilMs
        const next = algorithm.refund(
          stored?.state,
          s.policy,
          at,
          s.cost,
          s.leaseId,
          untilMs === undefined ? undefined : untilMs - at,
        )
        if (next === undefined) {
          states.delete(id(s))
          continue
        }
        // As the memory store: the refunded state lasts until it is back to full, never longer than
        // it was written to.
        const probe = algorithm.consume(next, s.policy, at, 1, true)
        const ends = untilMs === undefined ? undefined : Math.min(at + probe.resetMs, untilMs)
        states.set(id(s), { state: next, untilMs: withExpiry ? ends : undefined })
      }
    },
    async block(steps, ms) {
      for (const s of steps) blocks.set(id(s), Math.max(blocks.get(id(s)) ?? 0, now() + ms))
    },
    async reset(steps) {
      for (const s of steps) {
        states.delete(id(s))
        blocks.delete(id(s))
      }
    },
    async close() {},
  }
}

// Without expiries, a state written under other parameters would be read as if it lasted forever:
// the vectors that change a policy's parameters run only with them.
runConformance(
  'pure transitions, no TTL',
  (now) => pureStore(now, false),
  vectors.filter((v) => !v.steps.some((s) => s.policy !== undefined)),
)
runConformance('pure transitions, each state with its expiry', (now) => pureStore(now, true))
