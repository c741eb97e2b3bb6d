// The conformance suite: every vector runs against any store handed to it. Memory and Redis stores
// (standalone and Cluster) all call runConformance with their own factory.
import { describe, expect, it } from 'vitest'
import { resolvePolicy } from '../../src/policy.js'
import type { Step, StepResult, Store } from '../../src/store.js'
import { type Vector, vectors } from './vectors.js'

/** Builds a fresh, empty store whose clock is `now()` (ms). Called once per vector. */
export type StoreFactory = (now: () => number) => Store | Promise<Store>

/** What holds for every result of every store, whatever the vector expects. */
function checkInvariants(result: StepResult | undefined, capacity: number, where: string): void {
  expect(result, where).toBeDefined()
  const r = result!
  for (const field of ['remaining', 'retryAfterMs', 'resetMs'] as const) {
    expect(Number.isSafeInteger(r[field]) && r[field] >= 0, `${where}: ${field} = ${r[field]}`).toBe(true)
  }
  expect(r.remaining, `${where}: remaining <= capacity`).toBeLessThanOrEqual(capacity)
  if (r.allowed) expect(r.retryAfterMs, `${where}: allowed means no wait`).toBe(0)
  else expect(r.retryAfterMs, `${where}: denied means a wait`).toBeGreaterThan(0)
}

export function runConformance(
  label: string,
  makeStore: StoreFactory,
  only: readonly Vector[] = vectors,
): void {
  describe(`conformance: ${label}`, () => {
    for (const vector of only) {
      it(vector.name, async () => {
        let clock = vector.start ?? 1_700_000_000_000
        const store = await makeStore(() => clock)
        try {
          const policy = resolvePolicy('p', vector.policy)
          const key = vector.key ?? `k-${vector.name}`
          for (const [index, s] of vector.steps.entries()) {
            clock += s.after ?? 0
            const step: Step =
              s.lease === undefined
                ? { policy, key, cost: s.cost ?? 1 }
                : { policy, key, cost: s.cost ?? 1, leaseId: s.lease }
            const where = `${vector.name}, step ${index} (${s.op ?? 'consume'} at +${clock - (vector.start ?? 1_700_000_000_000)}ms)`
            switch (s.op ?? 'consume') {
              case 'consume':
              case 'peek': {
                const [result] = await store.apply([step], s.op === 'peek' ? 'peek' : 'consume')
                checkInvariants(result, policy.capacity, where)
                if (s.expect !== undefined) expect(result, where).toMatchObject(s.expect)
                break
              }
              case 'refund':
                await store.refund([step])
                break
              case 'reset':
                await store.reset([step])
                break
              case 'block':
                await store.block([step], s.blockMs ?? 1000)
                break
            }
          }
        } finally {
          await store.close()
        }
      })
    }
  })
}
