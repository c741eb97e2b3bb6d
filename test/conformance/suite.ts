// The conformance suite in vitest: the cases `sluice/store` exports (conformanceCases), one `it` each,
// for a store factory. Memory, Redis (standalone and Cluster), PostgreSQL and memcached stores all
// call runConformance with their own factory.
import { describe, it } from 'vitest'
import {
  type ConformanceOptions,
  conformanceCases,
  type StoreFactory,
} from '../../packages/sluice/src/conformance/run.js'
import { type Vector, vectors } from '../../packages/sluice/src/conformance/vectors.js'

export { longestWaitMs } from '../../packages/sluice/src/conformance/run.js'
export type { StoreFactory }

export function runConformance(
  label: string,
  makeStore: StoreFactory,
  only: readonly Vector[] = vectors,
  options: Omit<ConformanceOptions, 'vectors'> = {},
): void {
  describe(`conformance: ${label}`, () => {
    for (const c of conformanceCases(makeStore, { ...options, vectors: only })) it(c.name, c.run)
  })
}
