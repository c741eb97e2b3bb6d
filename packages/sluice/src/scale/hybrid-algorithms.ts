// What hybrid mode needs to know of each algorithm it leases (see hybrid.ts), and how big a lease
// it asks for. The decisions themselves, and when a lease must end, are made on the shared state by
// scripts/hybrid/lease.lua, with the transitions of src/algorithms/.
import { type AlgorithmName, HYBRID_ALGORITHMS, type HybridAlgorithmName } from '../policy.js'

/** The shared state's kind on the wire: `w` fixed window, `s` sliding window counter, `b` bucket. */
export type LeaseKind = 'w' | 's' | 'b'

export interface HybridAlgorithm {
  kind: LeaseKind
}

// Token bucket and GCRA decide alike (src/algorithms/gcra.ts): one bucket state serves both.
const TABLE: Readonly<Record<HybridAlgorithmName, HybridAlgorithm>> = {
  'fixed-window': { kind: 'w' },
  'sliding-window-counter': { kind: 's' },
  'token-bucket': { kind: 'b' },
  gcra: { kind: 'b' },
}

function isHybridAlgorithm(name: AlgorithmName): name is HybridAlgorithmName {
  return (HYBRID_ALGORITHMS as readonly string[]).includes(name)
}

/** The hybrid form of a policy's algorithm (validation has refused the others). */
export function hybridAlgorithm(name: AlgorithmName): HybridAlgorithm {
  if (!isHybridAlgorithm(name)) throw new TypeError(`hybrid mode does not lease ${name}`)
  return TABLE[name]
}

/** A key's demand on this instance: units asked in the current lease period and the one before. */
export interface Demand {
  periodStartMs: number
  current: number
  previous: number
}

/** Below this many units asked in a period a key is cold: its requests are plain Redis decisions. */
export const COLD_UNITS = 2

/**
 * Units of lease to ask for: twice the recent demand (the larger of this period's so far and the
 * last whole one's), so a key that keeps its pace renews about once a period; none for a cold key.
 * Redis caps the grant further by what is left (lease.lua).
 * @example leaseWant({ periodStartMs: 0, current: 30, previous: 50 }) // 100
 */
export function leaseWant(demand: Demand): number {
  const recent = Math.max(demand.current, demand.previous)
  return recent < COLD_UNITS ? 0 : 2 * recent
}

/** Move `demand` on to the period holding `nowMs` (periods of `periodMs`, from the first request). */
export function rollDemand(demand: Demand, nowMs: number, periodMs: number): void {
  const elapsed = nowMs - demand.periodStartMs
  if (elapsed < periodMs) return
  demand.previous = elapsed < 2 * periodMs ? demand.current : 0
  demand.current = 0
  demand.periodStartMs = nowMs - (elapsed % periodMs)
}
