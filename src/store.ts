// The store contract: a few methods that every store (memory, Redis, Redis Cluster) implements.
// A store owns the clock and the physical keys; the limiter above it owns policies and validation.
import type { ResolvedPolicy } from './policy.js'

/** One (policy, key, cost) unit of work. Layered decisions pass several steps at once. */
export interface Step {
  readonly policy: ResolvedPolicy
  /** The caller's key (user id, IP, ...), any string. The store derives its own physical key. */
  readonly key: string
  readonly cost: number
  /** Concurrency only: the lease being acquired or released. */
  readonly leaseId?: string
}

/** The store's answer for one step. Times are whole ms from the store's now. */
export interface StepResult {
  allowed: boolean
  remaining: number
  resetMs: number
  retryAfterMs: number
  /** True when the key is under a `block` (penalty) rather than out of units. */
  blocked: boolean
  /** Set by the failover layer: the store failed and this result comes from the policy's fallback. */
  degraded?: boolean
  /** Set by the failover layer with `onStoreError: 'closed'`: denied because the store failed. */
  unavailable?: boolean
  /** Set by the limiter's local deny cache, never by a store: a placeholder for a layer not evaluated. */
  notEvaluated?: boolean
}

export interface Store {
  /** A short name for logs and metrics: `memory`, `redis`, `redis-cluster`. */
  readonly name: string
  /**
   * Evaluate every step; with `consume`, commit all of them only if every step admits.
   * One atomic unit: no other decision on these keys interleaves.
   */
  apply(steps: readonly Step[], mode: 'consume' | 'peek'): Promise<StepResult[]>
  /** Give back `cost` units of each step (concurrency: release `leaseId`). */
  refund(steps: readonly Step[]): Promise<void>
  /**
   * Optional: commit `cost` units of each step without the admit check, even past the limit (a
   * forced charge: `reserve(...).settle(actual)` charging the part of the true cost above the
   * estimate). A store without it cannot serve `settle` above the estimate
   * (`SLUICE_UNSUPPORTED`). Blocks are left as they are.
   */
  charge?(steps: readonly Step[]): Promise<void>
  /** Deny every request for these keys for `durationMs`, whatever their units. */
  block(steps: readonly Step[], durationMs: number): Promise<void>
  /** Forget everything stored for these keys, blocks included. */
  reset(steps: readonly Step[]): Promise<void>
  close(): Promise<void>
  /**
   * The store's clock (ms), for a store that decides on this process's clock (the memory store,
   * Redis with `clock: 'client'`). The limiter's local deny cache times its denials with it, so a
   * cached denial ends when the store's would; without it the cache uses `Date.now`.
   */
  now?(): number
}

/** A store that can also decide synchronously (in-process). The limiter uses it for `consumeSync`. */
export interface SyncStore extends Store {
  applySync(steps: readonly Step[], mode: 'consume' | 'peek'): StepResult[]
}

export function isSyncStore(store: Store): store is SyncStore {
  return typeof (store as Partial<SyncStore>).applySync === 'function'
}
