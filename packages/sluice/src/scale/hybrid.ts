// Hybrid mode: a policy decided in this process from a lease of units taken from the key's shared
// state in Redis, so a hot key costs one Redis call per lease instead of one per decision, and the
// instances together never admit more than exact Redis decisions would.
// A lease is charged to the shared state before any unit of it is spent (one atomic script call),
// spent here, and what it did not spend is given back when it ends: after at most `syncEvery`,
// or with its window. A key holds at most one lease per instance; its size follows the key's recent
// demand here (hybrid-algorithms.ts: none for a cold key, whose requests are plain exact decisions
// in Redis) and Redis grants at most a fraction of what is left, none near the limit.
// The bounds (derived in docs/scale.md): over-admission 0; a denial in Redis misses at most the units
// the other instances hold unspent in their leases, each given back within syncEvery + a round trip.
// The Redis backend, hybridRedis, is in src/stores/redis/hybrid.ts and exported from sluice/redis: this
// file is part of the core entry and knows no Redis client.
import type { ResolvedPolicy, StoreErrorMode } from '../policy.js'
import type { MaybePromise, Step, StepResult } from '../store.js'
import { memoryStore } from '../stores/memory.js'
import {
  type Demand,
  type HybridAlgorithm,
  hybridAlgorithm,
  leaseWant,
  rollDemand,
} from './hybrid-algorithms.js'

/** One call of the lease script: give back, decide, grant (src/stores/redis/scripts/hybrid/lease.lua). */
export interface LeaseCall {
  key: string
  kind: HybridAlgorithm['kind']
  nowMs: number
  limit: number
  windowMs: number
  capacity: number
  /** Units of the request decided exactly in Redis (0: none). */
  cost: number
  peek: boolean
  /** Units of lease wanted (0: none). */
  want: number
  leaseMs: number
  /** Units given back: the unspent part of an ended lease, or a refund. */
  returned: number
  /** The tag of the lease they come from, or -1 for a refund. */
  returnTag: number
  /** The key's count of denials when that lease was granted (under-admission is counted against it). */
  deniedBefore: number
  /** A grant is at most what is left divided by this. */
  divisor: number
  /** A smaller grant is none: near the limit every decision is exact. */
  leastGrant: number
}

export interface LeaseReply {
  allowed: boolean
  grant: number
  remaining: number
  retryAfterMs: number
  resetMs: number
  /** The lease's tag, sent back with its return: its window, or the bucket's epoch. */
  tag: number
  /** Of the returned units: how many a denial of the key, during their lease, might have admitted. */
  underAdmitted: number
  /** The key's count of denials so far. */
  denials: number
  /** When a lease granted now must end (ms): after `leaseMs`, and a window's lease with its window. */
  endsAtMs: number
}

/** The shared state of hybrid keys: Redis in practice (hybridRedis). */
export interface HybridBackend {
  /** One atomic call on the key's shared state. */
  lease(call: LeaseCall): Promise<LeaseReply>
  /** Delete shared states (reset). */
  remove(keys: readonly string[]): Promise<void>
  /** The shared state's key of one (policy, subject). */
  keyOf(policy: string, subject: string): string
  /**
   * Where each hybrid policy using this backend registers its counts, by policy name (the metrics
   * exporters read them: createMetrics({ hybrid }), createOpenTelemetry({ hybrid })).
   */
  readonly stats?: Map<string, HybridStats[]>
}

/** Counts of one hybrid policy in this process since it started. */
export interface HybridStats {
  leasesTaken: number
  unitsLeased: number
  /** Leases that ended (used up, timed out, their window over, or at close). */
  leasesEnded: number
  /** Of the leased units: spent here on admitted requests. */
  unitsSpent: number
  /** Of the leased units: given back unspent. */
  unitsReturned: number
  /** Of the leased units: neither spent nor given back, because the call giving them back failed. */
  unitsLost: number
  /**
   * Of the returned units: those of a lease during which the key's shared state denied a request
   * (on any instance). Such a denial might have been admitted had these units not been leased out
   * here, so this bounds the under-admission leases cause, counted by the instance that held them.
   */
  unitsUnderAdmitted: number
  /** Decisions made in Redis, one request each (cold keys, used-up leases, peeks). */
  plainDecisions: number
  /** Calls to Redis that failed (their requests followed the policy's onStoreError). */
  errors: number
}

/** Every count of HybridStats at 0. */
export function noHybridStats(): HybridStats {
  return {
    leasesTaken: 0,
    unitsLeased: 0,
    leasesEnded: 0,
    unitsSpent: 0,
    unitsReturned: 0,
    unitsLost: 0,
    unitsUnderAdmitted: 0,
    plainDecisions: 0,
    errors: 0,
  }
}

interface Lease {
  left: number
  granted: number
  tag: number
  /** The key's count of denials when it was granted. */
  deniedBefore: number
  endsAtMs: number
}

interface Entry {
  lease: Lease | undefined
  demand: Demand
  /** The call that may bring this key's next lease: others wait for it rather than ask for one too. */
  inFlight: Promise<unknown> | undefined
  /** Remaining and reset of the last Redis answer, and when it came. */
  remaining: number
  resetMs: number
  answeredAtMs: number
}

/** A grant is at most a quarter of what is left, and under 2 units none. */
export const LEASE_DIVISOR = 4
export const LEAST_GRANT = 2

export interface HybridPolicyOptions {
  now?: () => number
  /** The limiter's onStoreError, for a policy without its own. Default `open`. */
  onStoreError?: StoreErrorMode | undefined
}

/** The leases of one hybrid policy in this process. */
export class HybridPolicy {
  private readonly entries = new Map<string, Entry>()
  private readonly timer: NodeJS.Timeout
  private readonly algorithm: HybridAlgorithm
  private readonly now: () => number
  private readonly onStoreError: StoreErrorMode
  /** Returns in flight (ended leases, refunds): close waits for them. */
  private readonly returning = new Set<Promise<unknown>>()
  private fallback: ReturnType<typeof memoryStore> | undefined
  /** A lease lasts at most this long: `syncEvery`. */
  readonly leaseMs: number
  readonly stats: HybridStats = noHybridStats()
  /** Last failed call's error, until a call succeeds. */
  lastError: unknown

  constructor(
    readonly policy: ResolvedPolicy,
    private readonly backend: HybridBackend,
    options: HybridPolicyOptions | (() => number) = {},
  ) {
    const o = typeof options === 'function' ? { now: options } : options
    this.now = o.now ?? Date.now
    this.onStoreError = policy.onStoreError ?? o.onStoreError ?? 'open'
    this.algorithm = hybridAlgorithm(policy.algorithm)
    this.leaseMs = policy.syncEveryMs ?? 100
    const registered = backend.stats?.get(policy.name)
    if (registered !== undefined) registered.push(this.stats)
    else backend.stats?.set(policy.name, [this.stats])
    // Ended leases go back within a quarter of their length.
    this.timer = setInterval(() => this.returnEnded(), Math.max(5, Math.floor(this.leaseMs / 4)))
    this.timer.unref()
  }

  private entry(key: string, nowMs: number): Entry {
    let e = this.entries.get(key)
    if (e === undefined) {
      e = {
        lease: undefined,
        demand: { periodStartMs: nowMs, current: 0, previous: 0 },
        inFlight: undefined,
        remaining: 0,
        resetMs: 0,
        answeredAtMs: nowMs,
      }
      this.entries.set(key, e)
    } else rollDemand(e.demand, nowMs, this.leaseMs)
    return e
  }

  /** Decide one step: from this instance's lease when it holds the cost, else in Redis. */
  apply(step: Step, mode: 'consume' | 'peek'): MaybePromise<StepResult> {
    const nowMs = this.now()
    const e = this.entry(step.key, nowMs)
    if (mode === 'consume') e.demand.current += step.cost
    const local = this.fromLease(e, step, mode, nowMs)
    if (local !== undefined) return local
    // A lease may be on its way: wait for it once, then decide in Redis.
    if (e.inFlight !== undefined)
      return e.inFlight.then(
        () => this.fromLease(e, step, mode, this.now()) ?? this.remote(e, step, mode, false),
      )
    return this.remote(e, step, mode, true)
  }

  private fromLease(e: Entry, step: Step, mode: 'consume' | 'peek', nowMs: number): StepResult | undefined {
    const lease = e.lease
    if (lease === undefined || nowMs >= lease.endsAtMs || lease.left < step.cost) return undefined
    if (mode === 'consume') {
      lease.left -= step.cost
      this.stats.unitsSpent += step.cost
    }
    return {
      allowed: true,
      remaining: e.remaining + lease.left,
      resetMs: Math.max(0, e.resetMs - (nowMs - e.answeredAtMs)),
      retryAfterMs: 0,
      blocked: false,
    }
  }

  /**
   * One call to Redis for this step. The leader (no call of this key in flight) gives back the
   * key's ended or used-up lease and asks for the next one in the same call; a request that waited
   * for the leader and still found no room is a plain decision.
   */
  private remote(e: Entry, step: Step, mode: 'consume' | 'peek', leader: boolean): Promise<StepResult> {
    const nowMs = this.now()
    const old = leader ? e.lease : undefined
    if (old !== undefined) e.lease = undefined
    const want = leader && mode === 'consume' ? leaseWant(e.demand) : 0
    const call = this.backend.lease({
      ...this.callBase(step.key, nowMs),
      cost: step.cost,
      peek: mode === 'peek',
      want,
      returned: old?.left ?? 0,
      returnTag: old?.tag ?? 0,
      deniedBefore: old?.deniedBefore ?? 0,
    })
    const answer = call.then(
      (reply) => {
        this.lastError = undefined
        this.stats.plainDecisions++
        if (old !== undefined) this.ended(old, reply.underAdmitted)
        e.remaining = reply.remaining
        e.resetMs = reply.resetMs
        e.answeredAtMs = nowMs
        if (reply.grant > 0) {
          this.stats.leasesTaken++
          this.stats.unitsLeased += reply.grant
          e.lease = {
            left: reply.grant,
            granted: reply.grant,
            tag: reply.tag,
            deniedBefore: reply.denials,
            endsAtMs: reply.endsAtMs,
          }
        }
        const result: StepResult = {
          allowed: reply.allowed,
          remaining: reply.remaining + (e.lease?.left ?? 0),
          resetMs: reply.resetMs,
          retryAfterMs: reply.retryAfterMs,
          blocked: false,
        }
        return result
      },
      (error: unknown) => {
        if (old !== undefined) this.lost(old)
        return this.withoutStore(error, step, mode)
      },
    )
    if (leader) {
      const settled = answer.finally(() => {
        if (e.inFlight === settled) e.inFlight = undefined
      })
      e.inFlight = settled
    }
    return answer
  }

  private callBase(key: string, nowMs: number) {
    const p = this.policy
    return {
      key: this.backend.keyOf(p.id, key),
      kind: this.algorithm.kind,
      nowMs,
      limit: p.limit,
      windowMs: p.windowMs,
      capacity: p.capacity,
      leaseMs: this.leaseMs,
      divisor: LEASE_DIVISOR,
      leastGrant: LEAST_GRANT,
    }
  }

  private ended(lease: Lease, underAdmitted: number): void {
    this.stats.leasesEnded++
    this.stats.unitsReturned += lease.left
    this.stats.unitsUnderAdmitted += underAdmitted
  }

  private lost(lease: Lease): void {
    this.stats.leasesEnded++
    this.stats.unitsLost += lease.left
  }

  /** Redis failed: the policy's onStoreError decides, as for any store (docs/reliability.md). */
  private withoutStore(error: unknown, step: Step, mode: 'consume' | 'peek'): MaybePromise<StepResult> {
    this.lastError = error
    this.stats.errors++
    if (this.onStoreError === 'closed')
      return {
        allowed: false,
        remaining: 0,
        resetMs: this.leaseMs,
        retryAfterMs: this.leaseMs,
        blocked: false,
        degraded: true,
        unavailable: true,
      }
    if (this.onStoreError === 'memory') {
      this.fallback ??= memoryStore()
      const decided = this.fallback.apply([step], mode) as StepResult[]
      return { ...decided[0]!, degraded: true }
    }
    return {
      allowed: true,
      remaining: 0,
      resetMs: 0,
      retryAfterMs: 0,
      blocked: false,
      degraded: true,
    }
  }

  /** Give back every lease that has ended; forget keys idle for two lease lengths. Runs on a timer. */
  returnEnded(): Promise<void> {
    const nowMs = this.now()
    for (const [key, e] of this.entries) {
      if (e.inFlight !== undefined) continue
      if (e.lease !== undefined && nowMs >= e.lease.endsAtMs) this.giveBack(key, e)
      else if (e.lease === undefined && nowMs - e.demand.periodStartMs >= 2 * this.leaseMs)
        this.entries.delete(key)
    }
    return Promise.allSettled([...this.returning]).then(() => undefined)
  }

  private giveBack(key: string, e: Entry): void {
    const lease = e.lease
    if (lease === undefined) return
    e.lease = undefined
    if (lease.left === 0) {
      this.ended(lease, 0)
      return
    }
    const call = this.returnUnits(key, lease.left, lease.tag, lease.deniedBefore).then(
      (reply) => this.ended(lease, reply.underAdmitted),
      (error: unknown) => {
        this.lastError = error
        this.stats.errors++
        this.lost(lease)
      },
    )
    this.track(call)
  }

  private returnUnits(key: string, units: number, tag: number, deniedBefore: number): Promise<LeaseReply> {
    return this.backend.lease({
      ...this.callBase(key, this.now()),
      cost: 0,
      peek: false,
      want: 0,
      returned: units,
      returnTag: tag,
      deniedBefore,
    })
  }

  private track(call: Promise<unknown>): void {
    this.returning.add(call)
    void call.finally(() => this.returning.delete(call))
  }

  /** Give `step.cost` units back: to this instance's lease while it runs, else to Redis. */
  async refund(step: Step): Promise<void> {
    const nowMs = this.now()
    const e = this.entries.get(step.key)
    const lease = e?.lease
    if (lease !== undefined && nowMs < lease.endsAtMs) {
      lease.left += step.cost
      this.stats.unitsSpent -= step.cost
      return
    }
    await this.returnUnits(step.key, step.cost, -1, 0)
  }

  async reset(step: Step): Promise<void> {
    // A lease of this key held here is dropped: its units went with the state.
    const lease = this.entries.get(step.key)?.lease
    if (lease !== undefined) this.ended({ ...lease, left: 0 }, 0)
    this.entries.delete(step.key)
    await this.backend.remove([this.backend.keyOf(this.policy.id, step.key)])
  }

  /** Stop the timer and give back every lease. */
  async close(): Promise<void> {
    clearInterval(this.timer)
    await Promise.allSettled([...this.entries.values()].map((e) => e.inFlight))
    for (const [key, e] of this.entries) this.giveBack(key, e)
    await Promise.allSettled([...this.returning])
  }

  get size(): number {
    return this.entries.size
  }
}
