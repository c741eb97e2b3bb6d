// What hybrid mode needs to know of each algorithm it leases (see hybrid.ts): the kind of shared
// state its Redis script keeps, and when a lease taken now must end. The decisions themselves are
// made on the shared state by scripts/hybrid/lease.lua, with the transitions of src/algorithms/.
import {
  type AlgorithmName,
  HYBRID_ALGORITHMS,
  type HybridAlgorithmName,
  type ResolvedPolicy,
} from '../policy.js'

/** The shared state's kind on the wire: `w` fixed window, `s` sliding window counter, `b` bucket. */
export type LeaseKind = 'w' | 's' | 'b'

export interface HybridAlgorithm {
  kind: LeaseKind
  /**
   * When a lease taken at `nowMs` ends: `leaseMs` later, and for the windows no later than the end
   * of the window it was charged to (spent in the next one, its units would be counted in the wrong window).
   */
  leaseEndsAt(policy: ResolvedPolicy, nowMs: number, leaseMs: number): number
}

const windowEnd = (policy: ResolvedPolicy, nowMs: number): number =>
  (Math.floor(nowMs / policy.windowMs) + 1) * policy.windowMs

const windows = (kind: LeaseKind): HybridAlgorithm => ({
  kind,
  leaseEndsAt: (policy, nowMs, leaseMs) => Math.min(nowMs + leaseMs, windowEnd(policy, nowMs)),
})

// Token bucket and GCRA decide alike (src/algorithms/gcra.ts): one bucket state serves both.
const bucket: HybridAlgorithm = { kind: 'b', leaseEndsAt: (_policy, nowMs, leaseMs) => nowMs + leaseMs }

const TABLE: Readonly<Record<HybridAlgorithmName, HybridAlgorithm>> = {
  'fixed-window': windows('w'),
  'sliding-window-counter': windows('s'),
  'token-bucket': bucket,
  gcra: bucket,
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
