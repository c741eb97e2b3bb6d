// The vectors against the pure transitions alone: a store that keeps every state forever (no TTL).
// The memory store drops a state at exactly `resetMs`, which would hide an algorithm that gets its
// own window edge wrong; Redis keeps a key until just after its TTL, so the Lua twins rely on the
// algorithm's edge too. This harness makes every edge the algorithm's job.
import { algorithms } from '../../packages/sluice/src/algorithms/index.js'
import type { Step, StepResult, Store } from '../../packages/sluice/src/store.js'
import { runConformance } from './suite.js'

function pureStore(now: () => number): Store {
  const states = new Map<string, unknown>()
  const blocks = new Map<string, number>()
  const id = (s: Step) => `${s.policy.name}\u0000${s.key}`
  const evaluate = (s: Step, at: number, peek: boolean) => {
    const algorithm = algorithms[s.policy.algorithm]
    const state = states.get(id(s))
    const blockedUntil = blocks.get(id(s)) ?? 0
    if (blockedUntil > at) {
      const units = algorithm.consume(state, s.policy, at, s.cost, true)
      const result: StepResult = {
        allowed: false,
        remaining: 0,
        resetMs: Math.max(blockedUntil - at, units.resetMs),
        retryAfterMs: Math.max(blockedUntil - at, units.retryAfterMs),
        blocked: true,
      }
      return { result, state }
    }
    const o = algorithm.consume(state, s.policy, at, s.cost, peek, s.leaseId)
    const result: StepResult = {
      allowed: o.allowed,
      remaining: o.remaining,
      resetMs: o.resetMs,
      retryAfterMs: o.retryAfterMs,
      blocked: false,
    }
    return { result, state: o.state }
  }
  return {
    name: 'pure',
    now,
    async apply(steps, mode) {
      const at = now()
      const evaluated = steps.map((s) => evaluate(s, at, mode === 'peek'))
      if (mode === 'peek') return evaluated.map((e) => e.result)
      if (evaluated.every((e) => e.result.allowed)) {
        for (const [i, s] of steps.entries()) states.set(id(s), evaluated[i]!.state)
        return evaluated.map((e) => e.result)
      }
      // Nothing is charged: a layer that would admit reports its state as it is.
      return evaluated.map((e, i) => (e.result.allowed ? evaluate(steps[i]!, at, true).result : e.result))
    },
    async refund(steps) {
      for (const s of steps) {
        const next = algorithms[s.policy.algorithm].refund(
          states.get(id(s)),
          s.policy,
          now(),
          s.cost,
          s.leaseId,
        )
        if (next === undefined) states.delete(id(s))
        else states.set(id(s), next)
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

runConformance('pure transitions, no TTL', pureStore)
