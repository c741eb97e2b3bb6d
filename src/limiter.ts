// The limiter: named policies over one store. Validates every call before the store sees it, turns
// store results into Decisions, and makes layered checks all-or-nothing.
import { randomUUID } from 'node:crypto'
import type { Duration } from './duration.js'
import { parseDuration } from './duration.js'
import {
  InvalidCostError,
  InvalidKeyError,
  InvalidOptionsError,
  UnknownPolicyError,
  UnsupportedError,
} from './errors.js'
import type { FailoverLimiterOptions, StoreHealth } from './failover/index.js'
import { protectStore, resolveFailover } from './failover/index.js'
import { FAILOVER_OPTION_KEYS } from './failover/options.js'
import { checkKnownKeys, keysOf } from './options.js'
import type { Policy, ResolvedPolicy } from './policy.js'
import { resolvePolicy } from './policy.js'
import { denyCacheOptions, LocalDenyCache, type LocalDenyCacheOptions } from './scale/deny-cache.js'
import { type HybridBackend, HybridPolicy } from './scale/hybrid.js'
import type { Step, StepResult, Store } from './store.js'
import { isSyncStore } from './store.js'
import { isMemoryStore, memoryStore } from './stores/memory.js'
// waiting: wait / reserve / throttle live in src/waiting/
import { createWaiting, waitBounds } from './waiting/index.js'
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
} from './waiting/types.js'

/** Why a request was denied. */
export type DenyReason = 'limit' | 'blocked' | 'store_unavailable' | 'timeout' // waiting: timeout (wait)

/** The answer to one check. Times are whole milliseconds. */
export interface Decision {
  allowed: boolean
  /** The most the key can spend at once: `burst` for token bucket and GCRA, `limit` otherwise. */
  limit: number
  /** Units left after this decision; never negative. */
  remaining: number
  /** Wait until the key is back to full. */
  resetMs: number
  /** Wait until this request would pass; 0 when allowed. */
  retryAfterMs: number
  policy: string
  key: string
  /** Present when denied. */
  reason?: DenyReason
  /** True when the store failed and the policy's `onStoreError` fallback decided. */
  degraded?: boolean
  /** True when the local deny cache answered without asking the store. */
  cached?: boolean
  /**
   * True on a layer of a layered decision that the local deny cache answered: another layer's
   * cached denial decided, this one was not evaluated (nor charged). Its numbers are placeholders
   * (full `remaining`), not its state; the rate-limit headers leave it out of `RateLimit`.
   */
  notEvaluated?: boolean
}

/** The answer to a layered check: the deciding layer's numbers, plus every layer's own. */
export interface LayeredDecision extends Decision {
  /** One decision per check, in the order given. */
  results: Decision[]
  /** The policy of the first layer that denied, when denied. */
  deniedBy?: string
}

/** A concurrency lease; call `release()` when the work is done. */
export interface Lease {
  readonly id: string
  readonly policy: string
  readonly key: string
  readonly cost: number
  release(): Promise<void>
}

export interface AcquireDecision extends Decision {
  /** Present when allowed. */
  lease?: Lease
}

export interface Check<Name extends string = string> {
  policy: Name
  key: string
  cost?: number
}

export interface ConsumeOptions {
  /** Units this request spends (weight). Default 1. */
  cost?: number
}

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
  /** waiting: bounds on `wait` / `throttle` waiters in this process (docs/waiting.md). */
  waiting?: WaitingOptions
}

export interface Limiter<Name extends string = string> {
  readonly store: Store
  /** The validated policies, by name. */
  readonly policies: Readonly<Record<Name, ResolvedPolicy>>
  /** Spend `cost` (default 1) units of `policy` for `key`. */
  consume(policy: Name, key: string, options?: ConsumeOptions): Promise<Decision>
  /** Layered: every check admits or none is charged. */
  consume(checks: readonly Check<Name>[]): Promise<LayeredDecision>
  /** Synchronous consume; only for stores that decide in-process (the memory store). */
  consumeSync(policy: Name, key: string, options?: ConsumeOptions): Decision
  /** What consume would decide, charging nothing. */
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
  close(): Promise<void>
  // waiting: the methods of src/waiting/ (docs/waiting.md)
  /**
   * Wait until the request fits, or give up: `reason: 'timeout'` when it cannot fit within
   * `maxWaitMs` (decided up front when the store's `retryAfterMs` already passes it). A concurrency
   * policy waits for a release and answers with a lease.
   * @example const d = await limiter.wait('api', key, { cost: 1, maxWaitMs: 5_000, signal })
   */
  wait(policy: Name, key: string, options?: WaitOptions): Promise<WaitDecision>
  wait(checks: readonly Check<Name>[], options?: WaitOptions): Promise<LayeredWaitDecision>
  /**
   * Charge an estimate now and settle the true cost later with `r.settle(actual)`.
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

/** waiting: the methods createLimiter adds after the rest (src/waiting/ builds on the rest). */
export type WaitingMethod = 'wait' | 'reserve' | 'throttle'

/** Every key `createLimiter` accepts; anything else is a misspelling to report. */
const LIMITER_OPTION_KEYS = [
  ...keysOf<Omit<LimiterOptions<Record<string, Policy>>, keyof FailoverLimiterOptions>>({
    store: true,
    policies: true,
    onDecision: true,
    localDenyCache: true,
    hybrid: true,
    waiting: true, // waiting:
  }),
  ...FAILOVER_OPTION_KEYS,
]

/**
 * Create a limiter over named policies.
 * @example
 * const limiter = createLimiter({ policies: { api: { algorithm: 'token-bucket', limit: 10, window: '1s' } } })
 * const d = await limiter.consume('api', 'user-42')
 */
export function createLimiter<const P extends Record<string, Policy>>(
  options: LimiterOptions<P>,
): Limiter<keyof P & string> {
  type Name = keyof P & string
  if (
    options === null ||
    typeof options !== 'object' ||
    options.policies === null ||
    typeof options.policies !== 'object'
  ) {
    throw new InvalidOptionsError('createLimiter: pass { policies: { name: { algorithm, limit, window } } }')
  }
  checkKnownKeys('createLimiter', options, LIMITER_OPTION_KEYS)
  const denyCacheSettings = denyCacheOptions(options.localDenyCache)
  const waitingBounds = waitBounds(options.waiting) // waiting:
  const policies = new Map<string, ResolvedPolicy>()
  for (const [name, policy] of Object.entries(options.policies))
    policies.set(name, resolvePolicy(name, policy))
  if (policies.size === 0)
    throw new InvalidOptionsError('createLimiter: policies is empty; define at least one policy')
  const hybrids = new Map<string, HybridPolicy>()
  for (const p of policies.values()) {
    if (p.syncEveryMs === undefined) continue
    if (options.hybrid === undefined) {
      throw new InvalidOptionsError(
        `createLimiter: policy ${p.name} is hybrid; pass hybrid: hybridRedis(client) (from sluice/redis) so it can sync its counts`,
      )
    }
    hybrids.set(p.name, new HybridPolicy(p, options.hybrid))
  }
  const hybridOf = (s: Step) => (hybrids.size === 0 ? undefined : hybrids.get(s.policy.name))
  const failover = resolveFailover(options)
  const userStore = options.store ?? memoryStore()
  // In-process stores cannot fail the way a network store does; remote ones get timeouts, a
  // circuit breaker and each policy's onStoreError fallback (src/failover/).
  const store = isSyncStore(userStore)
    ? userStore
    : protectStore(userStore, { ...failover, policies: policies.values() })
  const syncStore = isSyncStore(store) ? store : undefined
  const oneStepStore = isMemoryStore(store) ? store : undefined
  // The deny cache runs on the store's clock: a test clock (or any clock of the store's own) that
  // passes a denial's retry time must find the key admitted, not a denial cached on Date.now.
  const storeNow = userStore.now
  const clockNow: () => number = storeNow === undefined ? Date.now : () => storeNow.call(userStore)
  let listeners: DecisionListener[] = options.onDecision === undefined ? [] : [options.onDecision]
  // An in-process store answers as fast as a cache would: the cache only fronts remote stores.
  const denyCache =
    syncStore !== undefined || options.localDenyCache === false
      ? undefined
      : new LocalDenyCache(denyCacheSettings)

  function emit(
    operation: DecisionEvent['operation'],
    decision: Decision | LayeredDecision,
    started: number,
  ): void {
    const event: DecisionEvent = decision.cached
      ? { operation, decision, store: store.name, storeSeconds: 0, cached: true }
      : { operation, decision, store: store.name, storeSeconds: (performance.now() - started) / 1000 }
    for (const listener of listeners) {
      try {
        listener(event)
      } catch {
        // A broken listener must never break a decision.
      }
    }
  }

  /** Run the store; emit an event when anyone listens (timing costs nothing otherwise). */
  /**
   * One decision through the store: the deny cache first, then the store, then the events. Not an
   * async function: the store's promise is continued once, which is all a remote decision needs.
   */
  function decide<D extends Decision>(
    operation: DecisionEvent['operation'],
    steps: readonly Step[],
    mode: 'consume' | 'peek',
    build: (results: StepResult[]) => D,
  ): Promise<D> {
    if (syncStore !== undefined) return Promise.resolve(decideSync(operation, steps, mode, build))
    if (denyCache === undefined || operation === 'acquire') {
      if (listeners.length === 0) return store.apply(steps, mode).then(build)
      const started = performance.now()
      return store.apply(steps, mode).then((results) => {
        const d = build(results)
        emit(operation, d, started)
        return d
      })
    }
    const sentAt = clockNow()
    const hit = cachedResults(denyCache, steps, sentAt)
    if (hit !== undefined) {
      const d = build(hit)
      d.cached = true
      if (listeners.length > 0) emit(operation, d, 0)
      return Promise.resolve(d)
    }
    const cache = denyCache
    const epoch = cache.epoch
    const started = performance.now()
    return store.apply(steps, mode).then((results) => {
      for (let i = 0; i < steps.length; i++) {
        const s = steps[i]!
        if (s.policy.algorithm !== 'concurrency') cache.remember(s, results[i]!, sentAt, epoch)
      }
      const d = build(results)
      if (listeners.length > 0) emit(operation, d, started)
      return d
    })
  }

  /** The same for an in-process store, without a promise per step (the memory store's hot path). */
  function decideSync<D extends Decision>(
    operation: DecisionEvent['operation'],
    steps: readonly Step[],
    mode: 'consume' | 'peek',
    build: (results: StepResult[]) => D,
  ): D {
    if (listeners.length === 0) return build(syncStore!.applySync(steps, mode))
    const started = performance.now()
    const d = build(syncStore!.applySync(steps, mode))
    emit(operation, d, started)
    return d
  }

  // The last policy looked up: most traffic names the same policy again, and comparing the same
  // string is cheaper than hashing it.
  let lastName: unknown
  let lastPolicy: ResolvedPolicy | undefined
  function policyOf(name: unknown): ResolvedPolicy {
    if (name === lastName && lastPolicy !== undefined) return lastPolicy
    const policy = typeof name === 'string' ? policies.get(name) : undefined
    if (policy === undefined) {
      throw new UnknownPolicyError(
        `unknown policy ${JSON.stringify(name)}; configured: ${[...policies.keys()].join(', ')}`,
      )
    }
    lastName = name
    lastPolicy = policy
    return policy
  }

  function step(name: unknown, key: unknown, cost: unknown = 1, leaseId?: string): Step {
    const policy = policyOf(name)
    if (typeof key !== 'string' || key.length === 0) {
      throw new InvalidKeyError(
        `policy ${policy.name}: key must be a non-empty string, got ${key === '' ? 'an empty string' : typeof key}`,
      )
    }
    if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost <= 0) {
      throw new InvalidCostError(
        `policy ${policy.name}: cost must be a positive whole number, got ${String(cost)}`,
      )
    }
    if (cost > policy.capacity) {
      throw new InvalidCostError(
        `policy ${policy.name}: cost ${cost} can never be admitted (capacity ${policy.capacity}); lower the cost or raise ${policy.algorithm === 'token-bucket' || policy.algorithm === 'gcra' ? 'burst' : 'limit'}`,
      )
    }
    return leaseId === undefined ? { policy, key, cost } : { policy, key, cost, leaseId }
  }

  function decision(s: Step, r: StepResult): Decision {
    const d: Decision = {
      allowed: r.allowed,
      limit: s.policy.capacity,
      remaining: r.remaining,
      resetMs: r.resetMs,
      retryAfterMs: r.retryAfterMs,
      policy: s.policy.name,
      key: s.key,
    }
    if (!r.allowed) d.reason = r.unavailable ? 'store_unavailable' : r.blocked ? 'blocked' : 'limit'
    if (r.degraded) d.degraded = true
    if (r.notEvaluated) d.notEvaluated = true
    return d
  }

  function decideHybrid(hybrid: HybridPolicy, mode: 'consume' | 'peek', s: Step): Decision {
    if (listeners.length === 0) return decision(s, hybrid.decide(s, mode))
    const started = performance.now()
    const d = decision(s, hybrid.decide(s, mode))
    emit(mode, d, started)
    return d
  }

  function layered(steps: readonly Step[], results: readonly StepResult[]): LayeredDecision {
    const decisions = steps.map((s, i) => decision(s, results[i]!))
    const denied = decisions.find((d) => !d.allowed)
    // Allowed: headline the layer closest to its limit (smallest share left).
    const headline =
      denied ??
      decisions.reduce((closest, d) =>
        d.remaining * closest.limit < closest.remaining * d.limit ? d : closest,
      )
    const out: LayeredDecision = { ...headline, results: decisions }
    if (denied !== undefined) out.deniedBy = denied.policy
    if (decisions.some((d) => d.degraded)) out.degraded = true
    return out
  }

  function checksToSteps(checks: unknown): Step[] {
    if (!Array.isArray(checks) || checks.length === 0) {
      throw new InvalidOptionsError('layered consume: pass a non-empty array of { policy, key, cost? }')
    }
    // A loop, not map: map skips the holes of a sparse array, which then reach find() as undefined.
    const steps: Step[] = []
    for (let i = 0; i < checks.length; i++) {
      const c: unknown = checks[i]
      if (typeof c !== 'object' || c === null)
        throw new InvalidOptionsError(
          `layered consume: checks[${i}] is ${c === null ? 'null' : typeof c}; pass { policy, key, cost? }`,
        )
      const check = c as Check
      steps.push(step(check.policy, check.key, check.cost))
    }
    const hybridStep = steps.find((s) => hybridOf(s) !== undefined)
    if (hybridStep !== undefined)
      throw new InvalidOptionsError(
        `layered consume: policy ${hybridStep.policy.name} is hybrid; hybrid policies cannot be layered yet, check it on its own`,
      )
    const seen = new Set<string>()
    for (const s of steps) {
      const id = `${s.policy.name}:${s.key}`
      if (seen.has(id))
        throw new InvalidOptionsError(
          `layered consume: policy ${s.policy.name} and key ${JSON.stringify(s.key)} appear twice; merge them into one check with the summed cost`,
        )
      seen.add(id)
    }
    return steps
  }

  function run(
    mode: 'consume' | 'peek',
    a: unknown,
    key?: unknown,
    opts?: ConsumeOptions,
  ): Promise<Decision | LayeredDecision> {
    try {
      if (Array.isArray(a)) {
        const steps = checksToSteps(a)
        return decide(mode, steps, mode, (results) => layered(steps, results))
      }
      // An in-process store decides now: one resolved promise instead of a chain of async calls.
      if (oneStepStore !== undefined && listeners.length === 0 && hybrids.size === 0) {
        const s = step(a, key, opts?.cost)
        return Promise.resolve(decision(s, oneStepStore.applyOneSync(s, mode)))
      }
      const s = step(a, key, opts?.cost)
      const hybrid = hybridOf(s)
      if (hybrid !== undefined) return Promise.resolve(decideHybrid(hybrid, mode, s))
      if (syncStore !== undefined)
        return Promise.resolve(decideSync(mode, [s], mode, (r) => decision(s, r[0]!)))
      return decide(mode, [s], mode, (results) => decision(s, results[0]!))
    } catch (error) {
      // Bad input rejects like any other failure; consume never throws synchronously.
      return Promise.reject(error)
    }
  }

  function consume(policy: Name, key: string, options?: ConsumeOptions): Promise<Decision>
  function consume(checks: readonly Check<Name>[]): Promise<LayeredDecision>
  function consume(
    a: Name | readonly Check<Name>[],
    key?: string,
    opts?: ConsumeOptions,
  ): Promise<Decision | LayeredDecision> {
    return run('consume', a, key, opts)
  }
  function peek(policy: Name, key: string, options?: ConsumeOptions): Promise<Decision>
  function peek(checks: readonly Check<Name>[]): Promise<LayeredDecision>
  function peek(
    a: Name | readonly Check<Name>[],
    key?: string,
    opts?: ConsumeOptions,
  ): Promise<Decision | LayeredDecision> {
    return run('peek', a, key, opts)
  }

  const base: Omit<Limiter<Name>, WaitingMethod> = {
    store: userStore,
    policies: Object.fromEntries(policies) as Record<Name, ResolvedPolicy>,
    consume,
    peek,
    consumeSync(policy, key, opts) {
      if (hybrids.size > 0) {
        const s = step(policy, key, opts?.cost)
        const hybrid = hybridOf(s)
        if (hybrid !== undefined) return decideHybrid(hybrid, 'consume', s)
      }
      if (syncStore === undefined) {
        throw new InvalidOptionsError(
          `consumeSync needs an in-process store; the ${store.name} store is asynchronous, use consume`,
        )
      }
      const s = step(policy, key, opts?.cost)
      if (listeners.length === 0) {
        if (oneStepStore !== undefined) return decision(s, oneStepStore.applyOneSync(s, 'consume'))
        return decision(s, syncStore.applySync([s], 'consume')[0]!)
      }
      const started = performance.now()
      const d = decision(s, syncStore.applySync([s], 'consume')[0]!)
      emit('consume', d, started)
      return d
    },
    async refund(policy, key, amount = 1) {
      const s = step(policy, key, amount)
      const hybrid = hybridOf(s)
      if (hybrid !== undefined) return hybrid.refund(s)
      // Forget before (no new hit) and after (no answer from before the change gets cached).
      denyCache?.forget(s)
      await store.refund([s])
      denyCache?.forget(s)
    },
    async reset(policy, key) {
      const s = step(policy, key)
      const hybrid = hybridOf(s)
      if (hybrid !== undefined) return hybrid.reset(s)
      denyCache?.forget(s)
      await store.reset([s])
      denyCache?.forget(s)
    },
    async block(policy, key, duration) {
      const durationMs = parseDuration(duration, 'block duration')
      const s = step(policy, key)
      if (hybridOf(s) !== undefined)
        throw new InvalidOptionsError(
          `block: policy ${s.policy.name} is hybrid; block is not supported in hybrid mode yet`,
        )
      denyCache?.forget(s)
      await store.block([s], durationMs)
      denyCache?.forget(s)
    },
    async acquire(policy, key, opts) {
      const id = randomUUID()
      const s = step(policy, key, opts?.cost, id)
      if (s.policy.algorithm !== 'concurrency') {
        throw new InvalidOptionsError(
          `acquire: policy ${s.policy.name} is ${s.policy.algorithm}; acquire needs a concurrency policy, use consume`,
        )
      }
      const d: AcquireDecision = await decide('acquire', [s], 'consume', (results) =>
        decision(s, results[0]!),
      )
      if (d.allowed) {
        let released = false
        d.lease = {
          id,
          policy: s.policy.name,
          key: s.key,
          cost: s.cost,
          async release() {
            if (released) return
            released = true
            await store.refund([s])
            waiting.queues.released(s.policy.id, s.key) // waiting: a waiter may fit now
          },
        }
      }
      return d
    },
    async release(policy, key, leaseId) {
      if (typeof leaseId !== 'string' || leaseId.length === 0)
        throw new InvalidOptionsError('release: pass the lease id from acquire')
      const s = step(policy, key, 1, leaseId)
      await store.refund([s])
      waiting.queues.released(s.policy.id, s.key) // waiting: a waiter may fit now
    },
    subscribe(listener) {
      listeners = [...listeners, listener]
      return () => {
        listeners = listeners.filter((l) => l !== listener)
      }
    },
    health() {
      return 'health' in store ? store.health() : { status: 'ok', circuit: 'closed', counts: zeroCounts() }
    },
    async close() {
      await Promise.all([...hybrids.values()].map((h) => h.close()))
      await store.close()
    },
  }
  // waiting: wait / reserve / throttle over the methods above; settle's forced charge goes to the
  // store's optional `charge` (costs were checked by reserve; a charge may pass the capacity).
  const waiting = createWaiting(
    base,
    async (checks) => {
      if (store.charge === undefined)
        throw new UnsupportedError(
          `settle: the ${store.name} store cannot charge past the limit (it has no charge method); settle at most the estimate`,
        )
      const steps = checks.map((c) => ({ policy: policyOf(c.policy), key: c.key, cost: c.cost }))
      await store.charge(steps)
      for (const s of steps) denyCache?.forget(s)
    },
    waitingBounds,
  )
  const limiter: Limiter<Name> = Object.assign(base, {
    wait: waiting.wait,
    reserve: waiting.reserve,
    throttle: waiting.throttle,
  })
  return limiter
}

/**
 * Store-shaped results for a check the deny cache can answer: the cached denial for the first
 * cached layer, and for the other layers (not evaluated, not charged) a full allowance marked
 * `notEvaluated`, so that nobody reads it as their state.
 */
function cachedResults(cache: LocalDenyCache, steps: readonly Step[], now: number): StepResult[] | undefined {
  for (let i = 0; i < steps.length; i++) {
    const s = steps[i]!
    if (s.policy.algorithm === 'concurrency') continue
    const denied = cache.lookup(s, now)
    if (denied === undefined) continue
    if (steps.length === 1) return [denied]
    return steps.map((other, j) =>
      j === i
        ? denied
        : {
            allowed: true,
            remaining: other.policy.capacity,
            resetMs: 0,
            retryAfterMs: 0,
            blocked: false,
            notEvaluated: true,
          },
    )
  }
  return undefined
}

const zeroCounts = () => ({ calls: 0, errors: 0, timeouts: 0, rejected: 0, degraded: 0, unavailable: 0 })
