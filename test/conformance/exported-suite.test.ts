// `sluice/store` as a store author runs it: checkStore and conformanceCases pass a store that keeps
// the contract, and name the vector, the step and the field when a store does not.
import { describe, expect, it } from 'vitest'
import type { Store } from '../../packages/sluice/src/store.js'
import {
  ConformanceError,
  checkStore,
  conformanceCases,
  unsupportedRecords,
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
  it('passes the memory store: every vector, both cases through a limiter and the four records cases', async () => {
    const { passed, failed } = await checkStore((now) => memoryStore({ now }))
    expect(failed).toEqual([])
    expect(passed).toBe(vectors.length + 2 + 4)
  })

  it('records: a store without them passes with records: false, and fails the records cases without it', async () => {
    const withoutRecords = (now: () => number): Store => ({
      ...memoryStore({ now }),
      records: unsupportedRecords('without-records'),
    })
    const refusing = await checkStore(withoutRecords, { vectors: [], throughLimiter: false, records: false })
    expect(refusing).toEqual({ passed: 1, failed: [] })
    const { failed } = await checkStore(withoutRecords, { vectors: [], throughLimiter: false })
    expect(failed.map((f) => f.name)).toHaveLength(4)
    expect(failed.every((f) => f.name.startsWith('records:'))).toBe(true)
    // And a store that keeps records claims no refusal it does not make.
    const memory = await checkStore((now) => memoryStore({ now }), {
      vectors: [],
      throughLimiter: false,
      records: false,
    })
    expect(memory.failed.map((f) => (f.error as Error).message)).toEqual([
      expect.stringMatching(/rejected with no error, expected SLUICE_UNSUPPORTED/),
    ])
  })

  it('records: a store whose version never changes fails, naming where', async () => {
    const stuck = (now: () => number): Store => {
      const inner = memoryStore({ now })
      return { ...inner, records: { ...inner.records, version: async () => 'same' } }
    }
    const { failed } = await checkStore(stuck, { vectors: [], throughLimiter: false })
    expect(failed.map((f) => f.name)).toEqual([
      'records: the version changes with every put and every delete that removed one, never with a read',
    ])
    expect(failed[0]!.error).toBeInstanceOf(ConformanceError)
    expect((failed[0]!.error as Error).message).toMatch(/after a put: version "same" did not change/)
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
    const vectorCases = cases.filter((c) => !c.name.startsWith('records:'))
    expect(vectorCases.map((c) => c.name)).toEqual(some.map((v) => v.name))
    for (const c of cases) await c.run()
  })
})
