// `sluice/store` as a store author runs it: checkStore and conformanceCases pass a store that keeps
// the contract, and name the vector, the step and the field when a store does not.
import { describe, expect, it } from 'vitest'
import type { Store } from '../../packages/sluice/src/store.js'
import {
  ConformanceError,
  checkStore,
  conformanceCases,
  vectors,
} from '../../packages/sluice/src/store-contract.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'

/** The memory store with one thing wrong: a consume never denies. */
function neverDenies(now: () => number): Store {
  const inner = memoryStore({ now })
  return {
    ...inner,
    name: 'never-denies',
    inProcess: true,
    apply: async (steps, mode) =>
      (await inner.apply(steps, mode)).map((r) => ({ ...r, allowed: true, retryAfterMs: 0 })),
  } as Store
}

describe('the conformance suite sluice/store exports', () => {
  it('passes the memory store: every vector and both cases through a limiter', async () => {
    const { passed, failed } = await checkStore((now) => memoryStore({ now }))
    expect(failed).toEqual([])
    expect(passed).toBe(vectors.length + 2)
  })

  it('fails a store that never denies, naming the vector, the step and the field', async () => {
    const { failed } = await checkStore(neverDenies, { throughLimiter: false })
    expect(failed.length).toBeGreaterThan(vectors.length / 4)
    const first = failed[0]!
    expect(first.error).toBeInstanceOf(ConformanceError)
    expect((first.error as Error).message).toMatch(
      new RegExp(`^${first.name.replace(/[()[\]*+?.]/g, '\\$&')}, step \\d+ `),
    )
    expect((first.error as Error).message).toMatch(/allowed is true, expected false|retryAfterMs/)
  })

  it('gives cases any runner can run: a subset of vectors, one case each', async () => {
    const some = vectors.slice(0, 3)
    const cases = conformanceCases((now) => memoryStore({ now }), { vectors: some, throughLimiter: false })
    expect(cases.map((c) => c.name)).toEqual(some.map((v) => v.name))
    for (const c of cases) await c.run()
  })
})
