// The conformance suite: every vector runs against any store handed to it. Memory and Redis stores
// (standalone and Cluster) all call runConformance with their own factory.
import { describe, expect, it } from 'vitest'
import { resolvePolicy } from '../../src/policy.js'
import type { Step, StepResult, Store } from '../../src/store.js'
import { type Vector, type VectorStep, vectors } from './vectors.js'

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
          const named = new Map([['p', policy]])
          for (const [name, extra] of Object.entries(vector.policies ?? {}))
            named.set(name, resolvePolicy(name, extra))
          const key = vector.key ?? `k-${vector.name}`
          for (const [index, s] of vector.steps.entries()) {
            clock += s.after ?? 0
            // One step, or several applied as one atomic unit (a layered check).
            const layers: NonNullable<VectorStep['layers']> = s.layers ?? [
              s.lease === undefined
                ? { policy: 'p', cost: s.cost ?? 1 }
                : { policy: 'p', cost: s.cost ?? 1, lease: s.lease },
            ]
            const steps: Step[] = layers.map((layer) => {
              const p = named.get(layer.policy)
              if (p === undefined) throw new Error(`${vector.name}: no policy ${layer.policy}`)
              const base = { policy: p, key: layer.key ?? key, cost: layer.cost ?? 1 }
              return layer.lease === undefined ? base : { ...base, leaseId: layer.lease }
            })
            const where = `${vector.name}, step ${index} (${s.op ?? 'consume'} at +${clock - (vector.start ?? 1_700_000_000_000)}ms)`
            switch (s.op ?? 'consume') {
              case 'consume':
              case 'peek': {
                const results = await store.apply(steps, s.op === 'peek' ? 'peek' : 'consume')
                expect(results, where).toHaveLength(steps.length)
                for (const [i, result] of results.entries())
                  checkInvariants(result, steps[i]!.policy.capacity, `${where}, layer ${i}`)
                if (s.expect !== undefined) expect(results[0], where).toMatchObject(s.expect)
                if (s.expectLayers !== undefined) expect(results, where).toMatchObject(s.expectLayers)
                break
              }
              case 'refund':
                await store.refund(steps)
                break
              case 'reset':
                await store.reset(steps)
                break
              case 'block':
                await store.block(steps, s.blockMs ?? 1000)
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
