// The vectors against the pure transitions alone: a store that keeps every state forever (no TTL).
// The memory store drops a state at exactly `resetMs`, which would hide an algorithm that gets its
// own window edge wrong; Redis keeps a key until just after its TTL, so the Lua twins rely on the
// algorithm's edge too. This harness makes every edge the algorithm's job.
//
// A second run hands each state's expiry (when it was written, `now + resetMs`) back to the
// transitions, as every store does: that is what a state written under other parameters is read
// with (the vectors that change a policy's parameters), and with unchanged parameters it must
// change nothing.
import { decideAll, decideStep, refundStep } from '../../packages/sluice/src/algorithms/rules.js'
import { vectors } from '../../packages/sluice/src/conformance/vectors.js'
import { UnsupportedError } from '../../packages/sluice/src/errors.js'
import { memoryRecords } from '../../packages/sluice/src/records.js'
import type { Step, Store } from '../../packages/sluice/src/store.js'
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
  // Every stored state goes to the transition, expired or not: the edge is the algorithm's.
  const decide = (s: Step, at: number, peek: boolean) => {
    const stored = states.get(id(s))
    const endsInMs = stored?.untilMs === undefined ? undefined : stored.untilMs - at
    const blockedUntil = blocks.get(id(s)) ?? 0
    return decideStep(s.policy, s.cost, s.leaseId, stored?.state, endsInMs, blockedUntil, at, peek)
  }
  return {
    name: withExpiry ? 'pure-expiry' : 'pure',
    inProcess: false,
    now,
    records: memoryRecords(now),
    async charge() {
      throw new UnsupportedError('pure store: the vectors make no forced charge')
    },
    async apply(steps, mode) {
      const at = now()
      const all = decideAll(steps.length, mode, (i, peek) => decide(steps[i]!, at, peek))
      if (all.commit) {
        for (const [i, s] of steps.entries()) {
          const d = all.decisions[i]!
          states.set(id(s), { state: d.state, untilMs: withExpiry ? at + d.resetMs : undefined })
        }
      }
      return all.results
    },
    async refund(steps) {
      const at = now()
      for (const s of steps) {
        const stored = states.get(id(s))
        const r = refundStep(s.policy, s.cost, s.leaseId, stored?.state, stored?.untilMs, at)
        if (r.state === undefined) states.delete(id(s))
        else states.set(id(s), { state: r.state, untilMs: withExpiry ? r.endsAt : undefined })
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
