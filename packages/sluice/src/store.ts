// The store contract: a few methods that every store (memory, Redis, Redis Cluster) implements.
// A store owns the clock and the physical keys; the limiter above it owns policies and validation.
import type { PenaltyApplied } from './limiter/decision-types.js'
import type { ResolvedPolicy } from './policy.js'
import type { StoreRecords } from './records.js'

/**
 * A value, or a promise of it. In-process stores answer `apply` with the value itself, so a decision
 * on them is synchronous through the whole chain; network stores answer with a promise.
 */
export type MaybePromise<T> = T | Promise<T>

/**
 * Whether an answer of the decision path is still to come: the one test of "is this answer
 * synchronous?" everywhere. A promise of any library counts (anything with a `then`); the values
 * themselves never have one (results are arrays, decisions and outcomes plain objects).
 */
export function isPending<T>(answer: MaybePromise<T>): answer is Promise<T> {
  return typeof (answer as { then?: unknown } | null | undefined)?.then === 'function'
}

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
  /** Set by the limiter's local deny cache, never by a store: answered without asking the store. */
  cached?: boolean
  /** Set by the limiter's lists, never by a store: an allow or deny list decided this step. */
  listed?: 'allow' | 'deny'
  /** Set by the limiter's override link, never by a store: the key has a per-key override. */
  override?: boolean
  /** Set by the limiter's override link with `override`: the capacity the key was decided under. */
  capacity?: number
  /** Set by the limiter's penalty link, never by a store: this denial earned a penalty (its level and block). */
  penalty?: PenaltyApplied
}

export interface Store {
  /** A short name for logs and metrics: `memory`, `redis`, `redis-cluster`. */
  readonly name: string
  /**
   * True for a store that decides in this process and cannot fail the way a network store does
   * (the memory store): the limiter calls it directly, without the failover layer's timeouts and
   * breaker, and puts no deny cache in front of it. False for anything that does I/O.
   */
  readonly inProcess: boolean
  /**
   * Evaluate every step; with `consume`, commit all of them only if every step admits (`peek`
   * commits nothing). One atomic unit: no other decision on these keys interleaves. Answer with the
   * results themselves when they are known at once (an in-process store), or with a promise of them.
   */
  apply(steps: readonly Step[], mode: 'consume' | 'peek'): MaybePromise<StepResult[]>
  /** Give back `cost` units of each step (concurrency: release `leaseId`). */
  refund(steps: readonly Step[]): Promise<void>
  /**
   * Commit `cost` units of each step whether it fits or not, even past the limit (a forced
   * charge: `reserve(...).settle(actual)` charging the part of the true cost above the estimate).
   * Blocks are left as they are. A store that cannot rejects with `UnsupportedError`
   * (`SLUICE_UNSUPPORTED`) and changes nothing.
   */
  charge(steps: readonly Step[]): Promise<void>
  /** Deny every request for these keys for `durationMs`, whatever their units. */
  block(steps: readonly Step[], durationMs: number): Promise<void>
  /** Forget everything stored for these keys, blocks included. */
  reset(steps: readonly Step[]): Promise<void>
  /**
   * The clock the store's answers are measured on, in whole ms, as this process sees it: its own
   * clock when it decides on one (the memory store, Redis with `clock: 'client'`), `Date.now()`
   * when the server's clock decides. The limiter's local deny cache times its denials with it, so a
   * cached denial ends when the store's would.
   */
  now(): number
  /**
   * Small records kept for the limiter (per-key overrides, run-time allow and deny lists), shared by
   * every instance on this store. A store that cannot keep them answers with `unsupportedRecords`
   * (every method rejects with `UnsupportedError`).
   */
  readonly records: StoreRecords
  close(): Promise<void>
}

/** What a link of the chain may change of the store it wraps: any member of the contract. */
export type StoreChanges = Partial<Store>

/**
 * A store that forwards every capability of the contract to `inner`, except those `changes`
 * replaces (`changes` may also add members of its own, getters included). Every link of the
 * decision chain and every wrapper is made with it: a capability added to the contract is then
 * forwarded by every link, or the typecheck fails here.
 * @example
 * const counted = forwardStore(store, { apply: (steps, mode) => (calls++, store.apply(steps, mode)) })
 */
export function forwardStore<const C extends StoreChanges>(inner: Store, changes: C): Store & C {
  const link: Store = {
    name: inner.name,
    inProcess: inner.inProcess,
    apply: (steps, mode) => inner.apply(steps, mode),
    refund: (steps) => inner.refund(steps),
    charge: (steps) => inner.charge(steps),
    block: (steps, durationMs) => inner.block(steps, durationMs),
    reset: (steps) => inner.reset(steps),
    now: () => inner.now(),
    records: inner.records,
    close: () => inner.close(),
  }
  return Object.defineProperties(link, Object.getOwnPropertyDescriptors(changes)) as Store & C
}
