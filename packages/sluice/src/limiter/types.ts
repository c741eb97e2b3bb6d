// The limiter's public types: decisions, events, options and the Limiter interface itself.
import type { Duration } from '../duration.js'
import type { FailoverLimiterOptions, StoreHealth } from '../failover/index.js'
import type { ListName } from '../lists.js'
import type { Policy, ResolvedPolicy } from '../policy.js'
import type { ListEntry } from '../runtime-lists.js'
import type { LocalDenyCacheOptions } from '../scale/deny-cache.js'
import type { HybridBackend } from '../scale/hybrid.js'
import type { MaybePromise, Store } from '../store.js'
import type {
  LayeredReserveDecision,
  LayeredWaitDecision,
  ReserveDecision,
  ReserveOptions,
  Throttled,
  ThrottleOptions,
  WaitDecision,
  WaitingOptions,
  WaitOptions,
} from '../waiting/types.js'
import type { AcquireDecision, Check, ConsumeOptions, Decision, LayeredDecision } from './decision-types.js'
import type { ListEntryOptions, PolicyLists } from './list-methods.js'
import type { Override, OverrideOptions } from './overrides.js'

export type {
  AcquireDecision,
  Check,
  ConsumeOptions,
  Decision,
  DenyReason,
  LayeredDecision,
  Lease,
  PenaltyApplied,
} from './decision-types.js'
export type { Override, OverrideOptions } from './overrides.js'

/** One event per decision, for metrics, top keys and the dashboard. */
export interface DecisionEvent {
  readonly operation: 'consume' | 'peek' | 'acquire'
  /** The decision as returned to the caller (a LayeredDecision for layered checks). */
  readonly decision: Decision | LayeredDecision
  /** Name of the store that decided (`memory`, `redis`, ...). */
  readonly store: string
  /** Time the store took, in seconds (high resolution); 0 when the local deny cache answered. */
  readonly storeSeconds: number
  /** True when the local deny cache answered and the store was not asked. */
  readonly cached?: boolean
}

export type DecisionListener = (event: DecisionEvent) => void

export interface LimiterOptions<P extends Record<string, Policy>> extends FailoverLimiterOptions {
  /** Where counters live. Default: a fresh `memoryStore()`. */
  store?: Store
  policies: P
  /** Called once per decision (after it is made, synchronously). Errors thrown by it are ignored. */
  onDecision?: DecisionListener
  /**
   * Deny a key locally, without asking the store, until the retry time of its last denial (rate
   * policies over a remote store; never concurrency). Default on with 10,000 keys; `false` turns it off.
   */
  localDenyCache?: boolean | LocalDenyCacheOptions
  /** Where `mode: 'hybrid'` policies sync their counts: `hybridRedis(client)` from `sluice/redis`. */
  hybrid?: HybridBackend
  /** Bounds on `wait` / `throttle` waiters in this process (docs/waiting.md). */
  waiting?: WaitingOptions
  /**
   * How stale this limiter's copy of the store's per-key overrides may be: it polls the store's
   * records version this often and re-reads the overrides when it moved. Default `1s`. Changes made
   * through this limiter apply here at once.
   */
  staleness?: Duration
}

export interface Limiter<Name extends string = string> {
  readonly store: Store
  /** The validated policies, by name. */
  readonly policies: Readonly<Record<Name, ResolvedPolicy>>
  /** Spend `cost` (default 1) units of `policy` for `key`. */
  consume(policy: Name, key: string, options?: ConsumeOptions): Promise<Decision>
  /** Layered: every check admits or none is committed. */
  consume(checks: readonly Check<Name>[]): Promise<LayeredDecision>
  /**
   * Synchronous consume; only for stores that decide in-process (the memory store). Throws
   * `SLUICE_INVALID_OPTIONS` when the store answered with a promise (it is asynchronous).
   */
  consumeSync(policy: Name, key: string, options?: ConsumeOptions): Decision
  /**
   * `consume` without the promise when there is nothing to wait for: the decision itself when every
   * layer of the chain answered in-process (the memory store, the deny cache, hybrid), a promise of
   * it otherwise. Bad input throws here rather than rejecting. For callers that answer
   * synchronously when they can (the HTTP core, the service); `await` works on both.
   * @example const d = limiter.decide('api', 'user-42'); const decision = d instanceof Promise ? await d : d
   */
  decide(policy: Name, key: string, options?: ConsumeOptions): MaybePromise<Decision>
  decide(checks: readonly Check<Name>[]): MaybePromise<LayeredDecision>
  /** What consume would decide, committing nothing. */
  peek(policy: Name, key: string, options?: ConsumeOptions): Promise<Decision>
  peek(checks: readonly Check<Name>[]): Promise<LayeredDecision>
  /** Give back `amount` (default 1) units, e.g. when the request turned out not to count. */
  refund(policy: Name, key: string, amount?: number): Promise<void>
  /** Forget the key's usage and any block on it. */
  reset(policy: Name, key: string): Promise<void>
  /** Deny every request of `key` under `policy` for `duration` (a penalty). */
  block(policy: Name, key: string, duration: Duration): Promise<void>
  /** Concurrency policies: take a lease of `cost` slots; release it when done. */
  acquire(policy: Name, key: string, options?: ConsumeOptions): Promise<AcquireDecision>
  /** Release a lease by id (same as `lease.release()`). */
  release(policy: Name, key: string, leaseId: string): Promise<void>
  /** Add a decision listener; returns a function that removes it. */
  subscribe(listener: DecisionListener): () => void
  /** Is the store answering? `ok`, `degraded` (fallbacks decide) or `down` (a `closed` policy denies). */
  health(): StoreHealth
  /**
   * Add `entry` to `policy`'s allow or deny list at run time, in the store, so every limiter
   * sharing it applies it (this one at once). An address or CIDR matches keys naming an address
   * (bare or `ip:<address>`); anything else matches the key exactly. Replaces the entry if present.
   * @example await limiter.addListEntry('api', 'deny', '203.0.113.0/24', { ttl: '1h', reason: 'scraper' })
   */
  addListEntry(policy: Name, list: ListName, entry: string, options?: ListEntryOptions): Promise<ListEntry>
  /** Remove a run-time entry; true when the store had it. Configured entries stay. */
  removeListEntry(policy: Name, list: ListName, entry: string): Promise<boolean>
  /** `policy`'s allow and deny lists: the configured entries, then the run-time ones, each marked. */
  getLists(policy: Name): Promise<PolicyLists>
  /**
   * Give `key` its own limit, window or burst under `policy`, or make it unlimited or blocked, in
   * the store, so every limiter sharing the store applies it (within their `staleness`). Replaces
   * the key's override if it has one. Resolves with the override as stored.
   * @example await limiter.setOverride('api', 'customer-7', { limit: 1000, ttl: '1d', reason: 'launch week' })
   */
  setOverride(policy: Name, key: string, options: OverrideOptions): Promise<Override>
  /** Remove the key's override; true when it had one. */
  clearOverride(policy: Name, key: string): Promise<boolean>
  /** The key's override as the store holds it, or undefined. */
  getOverride(policy: Name, key: string): Promise<Override | undefined>
  /** Every override of `policy` in force, as the store holds them. */
  listOverrides(policy: Name): Promise<Override[]>
  close(): Promise<void>
  /**
   * Wait until the request fits, or give up: `reason: 'timeout'` when it cannot fit within
   * `maxWaitMs` (decided up front when the store's `retryAfterMs` already passes it). A concurrency
   * policy waits for a release and answers with a lease.
   * @example const d = await limiter.wait('api', key, { cost: 1, maxWaitMs: 5_000, signal })
   */
  wait(policy: Name, key: string, options?: WaitOptions): Promise<WaitDecision>
  wait(checks: readonly Check<Name>[], options?: WaitOptions): Promise<LayeredWaitDecision>
  /**
   * Consume an estimate now and settle the true cost later with `r.settle(actual)`.
   * @example const r = await limiter.reserve('tokens', tenant, { cost: 2_000 })
   */
  reserve(policy: Name, key: string, options?: ReserveOptions): Promise<ReserveDecision>
  reserve(checks: readonly Check<Name>[], options?: ReserveOptions): Promise<LayeredReserveDecision>
  /** Wrap an async function so its calls keep to `policy` across every process on the store. */
  throttle<A extends unknown[], R>(
    policy: Name,
    fn: (...args: A) => Promise<R>,
    options: ThrottleOptions<A>,
  ): Throttled<A, R>
}

/** The methods src/waiting/ adds to a limiter, built on the rest of its interface (docs/waiting.md). */
export type WaitingMethod = 'wait' | 'reserve' | 'throttle'
