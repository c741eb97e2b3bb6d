// The local decision of each hybrid algorithm (see hybrid.ts): how a key's per-slice counts (the
// global total last pulled plus this instance's unsynced admissions) and, for the bucket algorithms,
// its own state become a decision, and how the other instances' admissions learned at a sync are
// merged in. The transitions are those of src/algorithms/, never a second copy.
import { fixedWindow } from '../algorithms/fixed-window.js'
import { type GcraState, gcra } from '../algorithms/gcra.js'
import { slidingWindowCounter } from '../algorithms/sliding-window-counter.js'
import { type TokenBucketState, tokenBucket } from '../algorithms/token-bucket.js'
import type { Outcome } from '../algorithms/types.js'
import {
  type AlgorithmName,
  HYBRID_ALGORITHMS,
  type HybridAlgorithmName,
  type ResolvedPolicy,
} from '../policy.js'

/** One clock-aligned slice of a key's counts (its Redis counter is `keyOf(policy.id, key, index)`). */
export interface SliceCounts {
  /** floor(now / sliceMs): all instances agree on it. */
  index: number
  /** Global total of the slice as last pulled (this instance's flushed counts included). */
  global: number
  /** Admitted here and not yet flushed. */
  pending: number
  /** Part of `pending` in a flush that has not answered yet. */
  inFlight: number
  /** Pulled at least once: `global` is known (else the other instances' counts are still unknown). */
  pulled: boolean
}

export interface HybridEntry {
  current: SliceCounts
  /** The slice before `current` (index - 1); undefined for fixed-window, which never looks back. */
  previous: SliceCounts | undefined
  /** The bucket algorithms' own state (token bucket level, GCRA TAT) as this instance sees it. */
  state: unknown
  /** Decided on since the last flush: only these are pulled (an idle key costs Redis nothing). */
  touched: boolean
}

export interface HybridAlgorithm {
  /** Length of one counted slice (ms). */
  sliceMs(policy: ResolvedPolicy, syncEveryMs: number): number
  /** 1: only the current slice matters; 2: the previous one too. */
  slices: 1 | 2
  /** Decide `cost` at `nowMs` on what this instance knows. The caller adds admitted units to `pending`. */
  decide(e: HybridEntry, policy: ResolvedPolicy, nowMs: number, cost: number, peek: boolean): Outcome<unknown>
  /** Bucket algorithms: the others admitted `count` units (negative: refunded) since the last pull. */
  merge?(state: unknown, policy: ResolvedPolicy, nowMs: number, count: number): unknown
  /** Bucket algorithms: give `amount` units back to the local state. */
  refund?(state: unknown, policy: ResolvedPolicy, nowMs: number, amount: number): unknown
}

const total = (s: SliceCounts | undefined): number => (s === undefined ? 0 : s.global + s.pending)

const fixedWindowHybrid: HybridAlgorithm = {
  sliceMs: (policy) => policy.windowMs,
  slices: 1,
  decide(e, policy, nowMs, cost, peek) {
    // The exact fixed-window transition on a clock-aligned window holding the global count.
    return fixedWindow.consume(
      { start: e.current.index * policy.windowMs, count: total(e.current) },
      policy,
      nowMs,
      cost,
      peek,
    )
  },
}

const slidingWindowCounterHybrid: HybridAlgorithm = {
  sliceMs: (policy) => policy.windowMs,
  slices: 2,
  decide(e, policy, nowMs, cost, peek) {
    // The exact sliding-window-counter transition on the two global window counts.
    const state = {
      start: e.current.index * policy.windowMs,
      previous: total(e.previous),
      current: total(e.current),
    }
    return slidingWindowCounter.consume(state, policy, nowMs, cost, peek)
  },
}

/**
 * A bucket's slice is at least the time it takes to refill from empty (capacity / rate), and at
 * least 10 syncs: the two slices an instance reads for a key it starts to count hold every
 * admission that still weighs on the bucket, and the previous slice is final well before it is dropped.
 */
const bucketSliceMs = (policy: ResolvedPolicy, syncEveryMs: number): number =>
  Math.max(Math.ceil((policy.capacity * policy.windowMs) / policy.limit), 10 * syncEveryMs)

const tokenBucketHybrid: HybridAlgorithm = {
  sliceMs: bucketSliceMs,
  slices: 2,
  decide(e, policy, nowMs, cost, peek) {
    const out = tokenBucket.consume(e.state as TokenBucketState | undefined, policy, nowMs, cost, peek)
    // The level may be below zero after a merge (the others overdrew it): never report less than 0 left.
    return out.remaining < 0 ? { ...out, remaining: 0 } : out
  },
  merge(state, policy, nowMs, count) {
    if (count < 0) return tokenBucket.refund(state as TokenBucketState | undefined, policy, nowMs, -count)
    // Refill to now, then take the others' units as if spent now (they were spent earlier, so the
    // level seen here is never above the global one once merged). It may go below zero: a debt.
    const now = tokenBucket.consume(state as TokenBucketState | undefined, policy, nowMs, 0, true).state
    return { level: now.level - count * policy.windowMs, at: now.at }
  },
  refund: (state, policy, nowMs, amount) =>
    tokenBucket.refund(state as TokenBucketState | undefined, policy, nowMs, amount),
}

const gcraHybrid: HybridAlgorithm = {
  sliceMs: bucketSliceMs,
  slices: 2,
  decide: (e, policy, nowMs, cost, peek) =>
    gcra.consume(e.state as GcraState | undefined, policy, nowMs, cost, peek),
  merge(state, policy, nowMs, count) {
    if (count < 0) return gcra.refund(state as GcraState | undefined, policy, nowMs, -count)
    // The TAT (at least now) moves one emission interval per unit the others admitted.
    const tat = gcra.consume(state as GcraState | undefined, policy, nowMs, 0, true).state
    const rem = tat.tatRem + count * policy.windowMs
    const wholeMs = Math.floor(rem / policy.limit)
    return { tatMs: tat.tatMs + wholeMs, tatRem: rem - wholeMs * policy.limit }
  },
  refund: (state, policy, nowMs, amount) =>
    gcra.refund(state as GcraState | undefined, policy, nowMs, amount),
}

const TABLE: Readonly<Record<HybridAlgorithmName, HybridAlgorithm>> = {
  'fixed-window': fixedWindowHybrid,
  'sliding-window-counter': slidingWindowCounterHybrid,
  'token-bucket': tokenBucketHybrid,
  gcra: gcraHybrid,
}

function isHybridAlgorithm(name: AlgorithmName): name is HybridAlgorithmName {
  return (HYBRID_ALGORITHMS as readonly string[]).includes(name)
}

/** The hybrid form of a policy's algorithm (validation has refused the others). */
export function hybridAlgorithm(name: AlgorithmName): HybridAlgorithm {
  if (!isHybridAlgorithm(name)) throw new TypeError(`hybrid mode does not count ${name}`)
  return TABLE[name]
}
