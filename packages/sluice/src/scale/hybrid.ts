// Hybrid mode: a policy decided in this process from the last known global counts plus this
// instance's own unsynced admissions, with counts flushed to Redis (and the global totals pulled
// back) every `syncEvery`. Trades a bounded over-admission for no Redis round trip per decision.
// Works for fixed-window, sliding-window-counter, token-bucket and gcra (hybrid-algorithms.ts has
// each one's local decision); every one syncs the same thing: per (policy id, key, clock-aligned
// slice) admitted counts, added with one increment and the global total read back.
//
// Over-admission bounds (derived in docs/scale.md), N instances, r the most one instance admits per
// second for the key, S = syncEvery, L = the longest flush round trip:
//   fixed-window, sliding-window-counter: over <= (N - 1) * r * (2S + L), never more than (N - 1) * limit
//   token-bucket, gcra: admitted in any run of T from full <= burst + rate * T + (N - 1) * min(r, rate + burst / (2S + L)) * (2S + L)
// What an instance cannot see are the other instances' admissions since their last flush before
// its last pull: at most 2S + L of their traffic.
// The Redis backend, hybridRedis, is in src/stores/redis/hybrid.ts and exported from sluice/redis: this file is
// part of the core entry and knows no Redis client.
import type { ResolvedPolicy } from '../policy.js'
import type { Step, StepResult } from '../store.js'
import {
  type HybridAlgorithm,
  type HybridEntry,
  hybridAlgorithm,
  type SliceCounts,
} from './hybrid-algorithms.js'

/** Adds counts to the global total and reads it back: what a hybrid policy syncs with. */
export interface HybridBackend {
  /** For each counter, add `count` (may be 0: a pure read) and return the global total after it. */
  add(counters: readonly HybridCounter[]): Promise<number[]>
  /** Delete counters (reset). */
  remove(keys: readonly string[]): Promise<void>
  /** The counter key of one (policy, subject, slice index). */
  keyOf(policy: string, subject: string, window: number): string
}

export interface HybridCounter {
  key: string
  count: number
  /** Time to live of the counter in ms. */
  ttlMs: number
}

/** A counter sent in a flush, and the slice it belongs to. */
interface Sent {
  key: string
  index: number
  counter: HybridCounter
}

const slice = (index: number): SliceCounts => ({ index, global: 0, pending: 0, inFlight: 0, pulled: false })

/** Counters of one hybrid policy in this process. */
export class HybridPolicy {
  private readonly entries = new Map<string, HybridEntry>()
  /** Counts of slices dropped before they were flushed. */
  private carry: HybridCounter[] = []
  private readonly timer: NodeJS.Timeout
  private flushing: Promise<void> | undefined
  private readonly algorithm: HybridAlgorithm
  private readonly syncEveryMs: number
  /** Length of one counted slice (ms): the window, or for the buckets at least a full refill. */
  readonly sliceMs: number
  /** Longest flush round trip seen, ms (the L of the bound). */
  maxFlushMs = 0
  flushes = 0
  /** Last flush error, if the last flush failed (counts are kept and retried). */
  lastError: unknown

  constructor(
    readonly policy: ResolvedPolicy,
    private readonly backend: HybridBackend,
    private readonly now: () => number = Date.now,
  ) {
    this.algorithm = hybridAlgorithm(policy.algorithm)
    this.syncEveryMs = policy.syncEveryMs ?? 100
    this.sliceMs = this.algorithm.sliceMs(policy, this.syncEveryMs)
    this.timer = setInterval(() => void this.flush(), this.syncEveryMs)
    this.timer.unref()
  }

  private entry(key: string, nowMs: number): HybridEntry {
    const index = Math.floor(nowMs / this.sliceMs)
    let e = this.entries.get(key)
    if (e === undefined) {
      const previous = this.algorithm.slices === 2 ? slice(index - 1) : undefined
      e = { current: slice(index), previous, state: undefined, touched: true }
      this.entries.set(key, e)
    } else if (index > e.current.index) this.rotate(key, e, index)
    // A clock that stepped back stays in the newest slice seen.
    return e
  }

  /** Move an entry on to slice `index`; the counts of a slice it drops go to the carry. */
  private rotate(key: string, e: HybridEntry, index: number): void {
    const keep = this.algorithm.slices === 2 && index === e.current.index + 1
    if (e.previous !== undefined) this.drop(key, e.previous)
    if (!keep) this.drop(key, e.current)
    e.previous = keep ? e.current : this.algorithm.slices === 2 ? slice(index - 1) : undefined
    e.current = slice(index)
  }

  private drop(key: string, s: SliceCounts): void {
    const unsent = s.pending - s.inFlight
    if (unsent !== 0) this.carry.push(this.counter(key, s.index, unsent))
  }

  private counter(key: string, index: number, count: number): HybridCounter {
    // Live one slice past the last that reads it, so a late flush still lands somewhere harmless.
    const ttlMs = (this.algorithm.slices + 1) * this.sliceMs
    return { key: this.backend.keyOf(this.policy.id, key, index), count, ttlMs }
  }

  /** Decide one step locally (synchronously). */
  apply(step: Step, mode: 'consume' | 'peek'): StepResult {
    const nowMs = this.now()
    const e = this.entry(step.key, nowMs)
    e.touched = true
    const out = this.algorithm.decide(e, this.policy, nowMs, step.cost, mode === 'peek')
    if (out.allowed && mode === 'consume') {
      e.current.pending += step.cost
      if (this.algorithm.merge !== undefined) e.state = out.state
    }
    return {
      allowed: out.allowed,
      remaining: out.remaining,
      resetMs: out.resetMs,
      retryAfterMs: out.retryAfterMs,
      blocked: false,
    }
  }

  refund(step: Step): void {
    const nowMs = this.now()
    const e = this.entry(step.key, nowMs)
    // Never give back more than the slice holds: the others see the refund as a negative count.
    const amount = Math.min(step.cost, e.current.global + e.current.pending)
    e.current.pending -= amount
    if (this.algorithm.refund !== undefined)
      e.state = this.algorithm.refund(e.state, this.policy, nowMs, step.cost)
  }

  async reset(step: Step): Promise<void> {
    const index = Math.floor(this.now() / this.sliceMs)
    this.entries.delete(step.key)
    const indexes = this.algorithm.slices === 2 ? [index, index - 1] : [index]
    await this.backend.remove(indexes.map((i) => this.backend.keyOf(this.policy.id, step.key, i)))
  }

  /** Flush every entry's unsynced counts (0 for a pure pull) and take the global totals back. */
  flush(): Promise<void> {
    if (this.flushing !== undefined) return this.flushing
    this.flushing = this.flushOnce().finally(() => {
      this.flushing = undefined
    })
    return this.flushing
  }

  /** Whether a flush pulls the previous slice: until it is final (the others flushed its last counts). */
  private pullsPrevious(s: SliceCounts, nowMs: number): boolean {
    return !s.pulled || nowMs < (s.index + 1) * this.sliceMs + 4 * this.syncEveryMs
  }

  private async flushOnce(): Promise<void> {
    const nowMs = this.now()
    const index = Math.floor(nowMs / this.sliceMs)
    const sent: Sent[] = []
    for (const [key, e] of this.entries) {
      const age = index - e.current.index
      if (age >= this.algorithm.slices) {
        // No slice of the entry is read any more: flush what is left and drop it.
        if (e.previous !== undefined) this.drop(key, e.previous)
        this.drop(key, e.current)
        this.entries.delete(key)
        continue
      }
      // An idle entry keeps its last totals (a lower bound of the global counts) and is not pulled:
      // once it has seen the limit reached it denies for the rest of the window without asking.
      const unsent = e.current.pending !== 0 || (e.previous !== undefined && e.previous.pending !== 0)
      if (!e.touched && !unsent) continue
      if (age > 0) this.rotate(key, e, index)
      const p = e.previous
      const previousDue = p !== undefined && (p.pending !== 0 || (e.touched && this.pullsPrevious(p, nowMs)))
      e.touched = false
      for (const s of previousDue ? [e.current, p] : [e.current]) {
        s.inFlight = s.pending
        sent.push({ key, index: s.index, counter: this.counter(key, s.index, s.pending) })
      }
    }
    const counters: HybridCounter[] = this.carry
    this.carry = []
    const carried = counters.length
    for (const s of sent) counters.push(s.counter)
    if (counters.length === 0) return
    const started = performance.now()
    let totals: number[]
    try {
      totals = await this.backend.add(counters)
    } catch (error) {
      this.lastError = error
      // Keep every count: the entries still hold theirs; dropped slices go back to the carry.
      this.carry.push(...counters.slice(0, carried))
      for (const s of sent) {
        const e = this.entries.get(s.key)
        const counts = e === undefined ? undefined : this.sliceOf(e, s.index)
        if (counts !== undefined) counts.inFlight = 0
        else if (s.counter.count !== 0) this.carry.push(s.counter)
        if (e !== undefined) e.touched = true
      }
      return
    }
    this.lastError = undefined
    this.flushes++
    this.maxFlushMs = Math.max(this.maxFlushMs, performance.now() - started)
    const mergedAt = this.now()
    sent.forEach((s, i) => {
      const e = this.entries.get(s.key)
      const counts = e === undefined ? undefined : this.sliceOf(e, s.index)
      if (e === undefined || counts === undefined) return
      const globalNow = totals[carried + i]!
      // What the others admitted in this slice since the last pull (all of it on the first pull).
      const others = globalNow - counts.global - s.counter.count
      counts.pending -= s.counter.count
      counts.inFlight = 0
      counts.global = globalNow
      counts.pulled = true
      if (others !== 0 && this.algorithm.merge !== undefined)
        e.state = this.algorithm.merge(e.state, this.policy, mergedAt, others)
    })
  }

  private sliceOf(e: HybridEntry, index: number): SliceCounts | undefined {
    if (e.current.index === index) return e.current
    return e.previous?.index === index ? e.previous : undefined
  }

  /** Stop the timer after a last flush. */
  async close(): Promise<void> {
    clearInterval(this.timer)
    await this.flush()
    const unsent = [...this.entries.values()].some(
      (e) => e.current.pending !== 0 || (e.previous !== undefined && e.previous.pending !== 0),
    )
    if (this.carry.length > 0 || unsent) await this.flush()
  }

  get size(): number {
    return this.entries.size
  }
}
