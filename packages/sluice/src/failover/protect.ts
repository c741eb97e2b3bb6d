// The protection layer between the limiter and a remote store (Redis): a timeout on every call, a
// circuit breaker, a bound on calls in flight, and each policy's fallback when the store fails
// (`open`: admit, marked degraded; `closed`: deny as store_unavailable; `memory`: decide in-process).
// It never rejects a decision and never leaves a rejection unhandled.

import { type Answer, APPLY_TO, applyTo } from '../answer.js'
import {
  SluiceError,
  StoreError,
  StoreTimeoutError,
  StoreUnavailableError,
  UnsupportedError,
} from '../errors.js'
import { checkKnownKeys, keysOf } from '../options.js'
import type { ResolvedPolicy, StoreErrorMode } from '../policy.js'
import { promiseWith, takenReject, takenResolve } from '../resolvers.js'
import type { MaybePromise, Step, StepResult, Store } from '../store.js'
import { forwardStore, isPending } from '../store.js'
import type { MemoryStore } from '../stores/memory.js'
import { memoryStore } from '../stores/memory.js'
import type { CircuitState } from './breaker.js'
import { createBreaker } from './breaker.js'
import { createDeadlines, type Deadline } from './deadlines.js'
import type { FailoverSettings, StoreHealthEvent } from './options.js'
import { DEFAULT_FAILOVER } from './options.js'

/** What `limiter.health()` reports; a service's /readyz can answer from it. */
export interface StoreHealth {
  /** ok: the store answers. degraded: it fails, every policy falls back. down: a `closed` policy denies. */
  status: 'ok' | 'degraded' | 'down'
  reason?: string
  circuit: CircuitState
  /** Counts since the limiter started. */
  counts: FailoverCounts
}

export interface FailoverCounts {
  /** Store calls made. */
  calls: number
  /** Calls that failed with an error from the store. */
  errors: number
  /** Calls that took longer than the timeout. */
  timeouts: number
  /** Calls not made: circuit open or too many in flight. */
  rejected: number
  /** Decisions answered by a fallback (`open` or `memory`). */
  degraded: number
  /** Decisions denied as store_unavailable (`closed`). */
  unavailable: number
}

export interface ProtectedStore extends Store {
  /** The store being protected. */
  readonly primary: Store
  /** Store calls currently in flight (including ones that already timed out). */
  readonly inFlight: number
  health(): StoreHealth
}

export interface ProtectOptions extends Partial<FailoverSettings> {
  /** The limiter's policies: health() reports `down` when one of them fails closed. */
  policies?: Iterable<ResolvedPolicy>
  /** Monotonic clock (ms) for the timeouts, the breaker and the log interval. Default `performance.now`. */
  now?: () => number
}

const PROTECT_OPTION_KEYS = keysOf<ProtectOptions>({
  onStoreError: true,
  timeoutMs: true,
  failures: true,
  cooldownMs: true,
  maxInFlight: true,
  instances: true,
  logger: true,
  logIntervalMs: true,
  fallbackMaxKeys: true,
  onStoreHealth: true,
  policies: true,
  now: true,
})

/**
 * Wrap a remote store so that its failures cost a bounded time and follow each policy's
 * `onStoreError`. The limiter does this for every store that is not in-process.
 * @example const store = protectStore(redisStore(client), { timeoutMs: 50, onStoreError: 'memory' })
 */
export function protectStore(store: Store, options: ProtectOptions = {}): ProtectedStore {
  checkKnownKeys('protectStore', options, PROTECT_OPTION_KEYS)
  const settings: FailoverSettings = {
    ...DEFAULT_FAILOVER,
    logger: { warn() {} },
    ...definedOnly(options),
  }
  const now = options.now ?? (() => performance.now())
  const breaker = createBreaker({
    failures: settings.failures,
    cooldownMs: settings.cooldownMs,
    // A burst of timeouts that fire together is one stall of this process, not a dead store.
    minSpanMs: settings.timeoutMs,
  })
  const policies = [...(options.policies ?? [])]
  const counts: FailoverCounts = {
    calls: 0,
    errors: 0,
    timeouts: 0,
    rejected: 0,
    degraded: 0,
    unavailable: 0,
  }
  let inFlight = 0
  let lastCallFailed = false
  let lastError: SluiceError | undefined
  let fallback: MemoryStore | undefined
  const fallbackPolicies = new WeakMap<ResolvedPolicy, ResolvedPolicy>()

  // ---- logging: at most one warning per interval, with what happened since the last one ----
  let lastLogAt = Number.NEGATIVE_INFINITY
  let lastRecoveryLogAt = Number.NEGATIVE_INFINITY
  let logged: FailoverCounts = { ...counts }
  function logFailure(): void {
    const t = now()
    if (t - lastLogAt < settings.logIntervalMs) return
    lastLogAt = t
    const since: Record<string, unknown> = { store: store.name, circuit: breaker.state }
    for (const k of Object.keys(counts) as (keyof FailoverCounts)[]) since[k] = counts[k] - logged[k]
    if (lastError !== undefined) since.error = lastError.message
    logged = { ...counts }
    safeLog('warn', since, `store ${store.name} is failing; decisions follow each policy's onStoreError`)
  }
  function safeLog(level: 'warn' | 'info', details: Record<string, unknown>, message: string): void {
    try {
      if (level === 'info' && settings.logger.info !== undefined) settings.logger.info(details, message)
      else settings.logger.warn(details, message)
    } catch {
      // A broken logger must never break a decision.
    }
  }

  // ---- health events (metrics): every failed call, and each change of (up, circuit) ----
  let reportedUp: boolean | undefined
  let reportedCircuit: CircuitState | undefined
  function emitHealth(event: StoreHealthEvent): void {
    try {
      settings.onStoreHealth?.(event)
    } catch {
      // A broken listener must never break a decision.
    }
  }
  function reportState(): void {
    if (settings.onStoreHealth === undefined) return
    const up = !lastCallFailed
    const circuit = breaker.state
    if (up === reportedUp && circuit === reportedCircuit) return
    reportedUp = up
    reportedCircuit = circuit
    emitHealth({ type: 'state', store: store.name, up, circuit })
  }

  function failed(probe: boolean, error: SluiceError): void {
    lastCallFailed = true
    lastError = error
    breaker.failure(probe, now())
    emitHealth({ type: 'error', store: store.name, error })
    reportState()
    logFailure()
  }
  function succeeded(probe: boolean): void {
    lastCallFailed = false
    const closed = breaker.success(probe)
    reportState()
    if (closed && now() - lastRecoveryLogAt >= settings.logIntervalMs) {
      lastRecoveryLogAt = now()
      safeLog('info', { store: store.name, ...counts }, `store ${store.name} answers again; circuit closed`)
    }
  }

  // Every call of this store has the same timeout: one timer serves every call in flight.
  const deadlines = createDeadlines<InFlight>(timedOut, now)

  function timedOut(entry: InFlight): void {
    counts.timeouts++
    const error = new StoreTimeoutError(
      `store ${store.name}: ${entry.what} took longer than ${settings.timeoutMs} ms (storeTimeout)`,
    )
    failed(entry.probe, error)
    entry.failWith(error)
  }

  /**
   * Whether a call may go at `t` (now()): 'call' or 'probe' (the breaker's half-open probe), or the
   * error its caller falls back on (too many in flight, circuit open), counted as rejected.
   */
  function admit(t: number): 'call' | 'probe' | SluiceError {
    if (inFlight >= settings.maxInFlight) {
      counts.rejected++
      const error = new StoreUnavailableError(
        `store ${store.name}: ${inFlight} calls in flight (maxInFlight ${settings.maxInFlight}); not calling it`,
      )
      lastError = error
      logFailure()
      return error
    }
    const admission = breaker.admit(t)
    if (admission === 'reject') {
      counts.rejected++
      logFailure()
      return new StoreUnavailableError(
        `store ${store.name}: circuit ${breaker.state}; next probe in ${Math.ceil(breaker.retryInMs(now()))} ms`,
        { cause: lastError },
      )
    }
    // Open -> half-open happens on admission.
    if (admission === 'probe') reportState()
    counts.calls++
    return admission === 'probe' ? 'probe' : 'call'
  }

  /**
   * One call in flight: its deadline in the FIFO of deadlines, the answer the store gives it (it is
   * the store's Answer), and where it hands what it settles with (`to`). A class, so that a call
   * costs one object, with no closure per handler or per method.
   */
  class Call<T, R> implements InFlight, Answer<T> {
    readonly deadline: number
    /** Answered, failed or timed out: the deadlines' flag. */
    settled = false
    /** The store answered or failed: counted out of the calls in flight, once. */
    private returned = false
    next: InFlight | undefined = undefined
    constructor(
      readonly what: string,
      readonly probe: boolean,
      private readonly to: Answer<R>,
      private readonly map: (value: T) => R,
      private readonly fallback: Fallback<R>,
      /** What `fallback` falls back on (the steps and mode of an apply). */
      readonly steps: readonly Step[],
      readonly mode: 'consume' | 'peek',
      /** When the call was made (now()). */
      madeAt: number,
    ) {
      this.deadline = madeAt + settings.timeoutMs
    }
    failWith(error: SluiceError): void {
      let value: R
      try {
        value = this.fallback(error, this)
      } catch (thrown) {
        this.to.fail(thrown)
        return
      }
      this.to.ok(value)
    }
    /** The store's answer, made before the call was handed to it (a store that answers at once). */
    returnedAtOnce(): void {
      if (!this.returned) {
        this.returned = true
        inFlight--
      }
      this.settled = true
    }
    ok(value: T): void {
      if (this.returned) return
      this.returned = true
      inFlight--
      if (this.settled) return
      deadlines.settle(this)
      succeeded(this.probe)
      this.to.ok(this.map(value))
    }
    fail(cause: unknown): void {
      if (this.returned) return
      this.returned = true
      inFlight--
      if (this.settled) return
      deadlines.settle(this)
      let value: R
      try {
        value = storeFailed(this.probe, this.what, cause, this.fallback, this)
      } catch (thrown) {
        this.to.fail(thrown)
        return
      }
      this.to.ok(value)
    }
  }

  /**
   * Call the store with the timeout, the breaker and the in-flight bound, and settle with `ok` of
   * the store's value or `fail` of the error (called at most once, and only then). A store that
   * answers at once (a value, not a promise) is answered at once; otherwise the one promise
   * returned, settled by the store's answer or by the deadline, whichever comes first. Both
   * handlers are attached at once, so a call that fails after its timeout is still caught. It
   * throws or rejects only when `fail` throws.
   */
  function call<T, R>(
    what: string,
    run: () => MaybePromise<T>,
    ok: (value: T) => R,
    fail: (error: SluiceError) => R,
  ): MaybePromise<R> {
    // One clock read for the admission and the deadline.
    const t = now()
    const admission = admit(t)
    if (typeof admission !== 'string') return fail(admission)
    const probe = admission === 'probe'
    let answer: MaybePromise<T>
    try {
      answer = run()
    } catch (cause) {
      return storeFailed(probe, what, cause, fail, undefined)
    }
    if (!isPending(answer)) {
      succeeded(probe)
      return ok(answer)
    }
    const promise = promiseWith<R>()
    const to: Answer<R> = { ok: takenResolve<R>(), fail: takenReject() }
    const entry = new Call<T, R>(what, probe, to, ok, fail, NO_STEPS, 'consume', t)
    inFlight++
    deadlines.track(entry)
    answer.then(
      (value) => entry.ok(value),
      (cause: unknown) => entry.fail(cause),
    )
    return promise
  }

  /** What a decision falls back on when the store fails: the steps' modes (decideWithoutStore). */
  const withoutStore: Fallback<StepResult[]> = (_error, decision) =>
    decideWithoutStore(decision!.steps, decision!.mode)

  /**
   * A decision (every remote decision's path): the results at once when the store (or the fallback)
   * has them, else undefined and the results, the store's or the fallback's, go to `to`, which is
   * also the store's answer's destination through the call in flight. Throws only what the store
   * throws that is no failure (UnsupportedError).
   */
  function applyProtectedTo(
    steps: readonly Step[],
    mode: 'consume' | 'peek',
    to: Answer<StepResult[]>,
  ): StepResult[] | undefined {
    const t = now()
    const admission = admit(t)
    if (typeof admission !== 'string') return decideWithoutStore(steps, mode)
    const probe = admission === 'probe'
    const entry = new Call<StepResult[], StepResult[]>(mode, probe, to, same, withoutStore, steps, mode, t)
    inFlight++
    let answer: StepResult[] | undefined
    try {
      answer = applyTo(store, steps, mode, entry)
    } catch (cause) {
      entry.returnedAtOnce()
      return storeFailed(probe, mode, cause, withoutStore, entry)
    }
    if (answer !== undefined) {
      entry.returnedAtOnce()
      succeeded(probe)
      return answer
    }
    // Unless the store has already answered (a failure it saw at once).
    if (!entry.settled) deadlines.track(entry)
    return undefined
  }

  /** applyProtectedTo as a promise when the answer is not there at once. */
  function applyProtected(steps: readonly Step[], mode: 'consume' | 'peek'): MaybePromise<StepResult[]> {
    const promise = promiseWith<StepResult[]>()
    const to: Answer<StepResult[]> = { ok: takenResolve(), fail: takenReject() }
    return applyProtectedTo(steps, mode, to) ?? promise
  }

  function storeFailed<R>(
    probe: boolean,
    what: string,
    cause: unknown,
    fail: Fallback<R>,
    decision: Decided | undefined,
  ): R {
    if (cause instanceof UnsupportedError) {
      // The store answered that it cannot do this (a charge on a store without one): an answer,
      // not a failure, so no breaker count and no fallback; the caller is told as it is.
      succeeded(probe)
      throw cause
    }
    counts.errors++
    const error =
      cause instanceof SluiceError
        ? cause
        : new StoreError(`store ${store.name}: ${what} failed: ${messageOf(cause)}`, { cause })
    failed(probe, error)
    return fail(error, decision)
  }

  const modeOf = (step: Step): StoreErrorMode => step.policy.onStoreError ?? settings.onStoreError

  function fallbackStore(): MemoryStore {
    fallback ??= memoryStore({ maxKeys: settings.fallbackMaxKeys })
    return fallback
  }

  /** The policy the in-memory fallback enforces: limit and capacity shared among `instances`. */
  function fallbackPolicy(policy: ResolvedPolicy): ResolvedPolicy {
    let p = fallbackPolicies.get(policy)
    if (p === undefined) {
      p = Object.freeze({
        ...policy,
        limit: Math.ceil(policy.limit / settings.instances),
        capacity: Math.ceil(policy.capacity / settings.instances),
      })
      fallbackPolicies.set(policy, p)
    }
    return p
  }
  const toFallback = (step: Step): Step => ({ ...step, policy: fallbackPolicy(step.policy) })

  function decideWithoutStore(steps: readonly Step[], mode: 'consume' | 'peek'): StepResult[] {
    const modes = steps.map(modeOf)
    if (modes.includes('closed')) {
      // All or nothing: one closed layer denies the whole check, and nothing is committed anywhere
      // (memory layers are not even evaluated; the other layers report what they would do).
      counts.unavailable++
      const t = now()
      const retryAfterMs = Math.max(1, Math.ceil(breaker.retryInMs(t)) || settings.cooldownMs)
      return steps.map((step, i) =>
        modes[i] === 'closed'
          ? {
              allowed: false,
              remaining: 0,
              resetMs: retryAfterMs,
              retryAfterMs,
              blocked: false,
              degraded: true,
              unavailable: true,
            }
          : admitted(step, mode),
      )
    }
    counts.degraded++
    const inMemory: Step[] = []
    for (let i = 0; i < steps.length; i++) if (modes[i] === 'memory') inMemory.push(toFallback(steps[i]!))
    // The memory store commits its layers only if all of them admit; `open` layers commit nothing,
    // so the check stays all-or-nothing across modes.
    const memoryResults = inMemory.length > 0 ? fallbackStore().apply(inMemory, mode) : []
    let next = 0
    return steps.map((step, i) => {
      if (modes[i] === 'memory') return { ...memoryResults[next++]!, degraded: true }
      return admitted(step, mode)
    })
  }

  /** Memory-mode steps, for mirroring refunds, blocks and resets into the fallback. */
  const memorySteps = (steps: readonly Step[]): Step[] =>
    steps.filter((s) => modeOf(s) === 'memory').map(toFallback)

  // Every capability not overridden here (now, and any added later) goes straight to the store.
  const protectedStore = forwardStore(store, {
    primary: store,
    get inFlight() {
      return inFlight
    },
    apply: applyProtected,
    [APPLY_TO]: { apply: applyProtected, to: applyProtectedTo },
    async refund(steps) {
      // Best effort and never throws: refunds run in `finally` blocks and lease releases. A refund
      // that cannot reach the store is lost; the stored units expire with their window.
      const reached = await call('refund', () => store.refund(steps), yes, no)
      const mirror = memorySteps(steps)
      if (mirror.length > 0 && fallback !== undefined && (!reached || mirror.some((s) => s.leaseId))) {
        await fallback.refund(mirror)
      }
    },
    async block(steps, durationMs) {
      const mirror = memorySteps(steps)
      if (mirror.length > 0) await fallbackStore().block(mirror, durationMs)
      await call('block', () => store.block(steps, durationMs), same, raise)
    },
    async reset(steps) {
      const mirror = memorySteps(steps)
      if (mirror.length > 0 && fallback !== undefined) await fallback.reset(mirror)
      await call('reset', () => store.reset(steps), same, raise)
    },
    // A failure rejects: settle can be retried.
    async charge(steps) {
      await call('charge', () => store.charge(steps), same, raise)
    },
    async close() {
      await fallback?.close()
      await store.close()
    },
    health(): StoreHealth {
      const circuit = breaker.state
      if (circuit === 'closed' && !lastCallFailed) return { status: 'ok', circuit, counts: { ...counts } }
      const closedPolicies = policies
        .filter((p) => (p.onStoreError ?? settings.onStoreError) === 'closed')
        .map((p) => p.name)
      const down =
        circuit !== 'closed' &&
        (closedPolicies.length > 0 || (policies.length === 0 && settings.onStoreError === 'closed'))
      const cause = lastError === undefined ? '' : `: ${lastError.message}`
      const reason = down
        ? `store ${store.name} unavailable (circuit ${circuit})${cause}; denying policies ${closedPolicies.join(', ') || '(default closed)'}`
        : `store ${store.name} failing (circuit ${circuit})${cause}; decisions fall back`
      return { status: down ? 'down' : 'degraded', reason, circuit, counts: { ...counts } }
    },
  })
  return protectedStore
}

/** An `open` layer's answer without a store: admitted, nothing committed, marked degraded. */
function admitted(step: Step, mode: 'consume' | 'peek'): StepResult {
  return {
    allowed: true,
    remaining: Math.max(0, step.policy.capacity - (mode === 'consume' ? step.cost : 0)),
    resetMs: 0,
    retryAfterMs: 0,
    blocked: false,
    degraded: true,
  }
}

const same = <T>(value: T): T => value
const yes = (): boolean => true
const no = (): boolean => false
const raise = (error: SluiceError): never => {
  throw error
}

/** One call in flight, in the FIFO of deadlines. */
interface InFlight extends Deadline {
  readonly what: string
  readonly probe: boolean
  failWith(error: SluiceError): void
}

/** The steps and mode of a decision, for its fallback. */
interface Decided {
  readonly steps: readonly Step[]
  readonly mode: 'consume' | 'peek'
}

/** What a call settles with when the store fails: `decision` is the call's, when it is one. */
type Fallback<R> = (error: SluiceError, decision: Decided | undefined) => R

const NO_STEPS: readonly Step[] = []

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

function definedOnly<T extends object>(o: T): Partial<T> {
  const out: Partial<T> = {}
  for (const [k, v] of Object.entries(o)) if (v !== undefined) (out as Record<string, unknown>)[k] = v
  return out
}
