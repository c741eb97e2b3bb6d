// Hybrid mode: a fixed-window policy decided in this process from the last known global count plus
// this instance's own unsynced admissions, with counts flushed to Redis (and the global total pulled
// back) every `syncEvery`. Trades a bounded over-admission for no Redis round trip per decision.
//
// Over-admission bound (per key and window), derived in docs/scale.md:
//   over <= (N - 1) * r * (2 * S + L), and never more than (N - 1) * limit
// N instances, r the most a single instance admits per second for the key, S = syncEvery (s),
// L = the longest flush round trip (s). An instance admits only while
// (global total as last pulled) + (its own unsynced admissions) + cost <= limit; what it cannot see
// are the other instances' admissions since their last flush before its last pull (at most 2S + L
// of their traffic).
// The Redis backend, hybridRedis, is in hybrid-redis.ts and exported from sluice/redis: this file is
// part of the core entry and knows no Redis client.
import type { ResolvedPolicy } from '../policy.js'
import type { Step, StepResult } from '../store.js'

/** Adds counts to the global total and reads it back: what a hybrid policy syncs with. */
export interface HybridBackend {
  /** For each counter, add `count` (may be 0: a pure read) and return the global total after it. */
  add(counters: readonly HybridCounter[]): Promise<number[]>
  /** Delete counters (reset). */
  remove(keys: readonly string[]): Promise<void>
  /** The counter key of one (policy, subject, window index). */
  keyOf(policy: string, subject: string, window: number): string
}

export interface HybridCounter {
  key: string
  count: number
  /** Time to live of the counter in ms. */
  ttlMs: number
}

interface Entry {
  /** Index of the clock-aligned window (floor(now / windowMs)); all instances agree on it. */
  window: number
  /** Global total as last pulled from Redis (this instance's flushed counts included). */
  global: number
  /** Admitted here and not yet flushed. */
  pending: number
  /** Part of `pending` in a flush that has not answered yet. */
  inFlight: number
  /** Decided on since the last flush: only these are pulled (an idle key costs Redis nothing). */
  touched: boolean
}

/** Counters of one hybrid policy in this process. */
export class HybridPolicy {
  private readonly entries = new Map<string, Entry>()
  /** Counts of windows that ended before they were flushed. */
  private carry: HybridCounter[] = []
  private readonly timer: NodeJS.Timeout
  private flushing: Promise<void> | undefined
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
    this.timer = setInterval(() => void this.flush(), policy.syncEveryMs ?? 100)
    this.timer.unref()
  }

  private entry(key: string, nowMs: number): Entry {
    const window = Math.floor(nowMs / this.policy.windowMs)
    let e = this.entries.get(key)
    if (e === undefined) {
      e = { window, global: 0, pending: 0, inFlight: 0, touched: true }
      this.entries.set(key, e)
    } else if (e.window !== window) {
      if (e.pending - e.inFlight !== 0) this.carry.push(this.counter(key, e.window, e.pending - e.inFlight))
      e.window = window
      e.global = 0
      e.pending = 0
      e.inFlight = 0
    }
    return e
  }

  private counter(key: string, window: number, count: number): HybridCounter {
    // Live for two windows so a late flush of an ended window still lands somewhere harmless.
    return { key: this.backend.keyOf(this.policy.id, key, window), count, ttlMs: 2 * this.policy.windowMs }
  }

  /** Decide one step locally (synchronously). */
  decide(step: Step, mode: 'consume' | 'peek'): StepResult {
    const nowMs = this.now()
    const e = this.entry(step.key, nowMs)
    e.touched = true
    const limit = this.policy.limit
    const used = e.global + e.pending
    const allowed = used + step.cost <= limit
    if (allowed && mode === 'consume') e.pending += step.cost
    const after = e.global + e.pending
    const end = (e.window + 1) * this.policy.windowMs
    return {
      allowed,
      remaining: Math.max(0, limit - after),
      resetMs: after > 0 ? end - nowMs : 0,
      retryAfterMs: allowed ? 0 : end - nowMs,
      blocked: false,
    }
  }

  refund(step: Step): void {
    const e = this.entry(step.key, this.now())
    e.pending -= Math.min(step.cost, e.global + e.pending)
  }

  async reset(step: Step): Promise<void> {
    const nowMs = this.now()
    const window = Math.floor(nowMs / this.policy.windowMs)
    this.entries.delete(step.key)
    await this.backend.remove([this.backend.keyOf(this.policy.id, step.key, window)])
  }

  /** Flush every entry's unsynced count (0 for a pure pull) and take the global totals back. */
  flush(): Promise<void> {
    if (this.flushing !== undefined) return this.flushing
    this.flushing = this.flushOnce().finally(() => {
      this.flushing = undefined
    })
    return this.flushing
  }

  private async flushOnce(): Promise<void> {
    const window = Math.floor(this.now() / this.policy.windowMs)
    const keys: string[] = []
    const counters: HybridCounter[] = this.carry
    this.carry = []
    const carried = counters.length
    for (const [key, e] of this.entries) {
      if (e.window < window) {
        // The window ended here: flush what is left and drop the entry.
        if (e.pending !== 0) counters.push(this.counter(key, e.window, e.pending))
        this.entries.delete(key)
        continue
      }
      // An idle entry keeps its last total (a lower bound of the global count) and is not pulled:
      // once it has seen the limit reached it denies for the rest of the window without asking.
      if (!e.touched && e.pending === 0) continue
      e.touched = false
      e.inFlight = e.pending
      keys.push(key)
      counters.push(this.counter(key, e.window, e.pending))
    }
    if (counters.length === 0) return
    const started = performance.now()
    let totals: number[]
    try {
      totals = await this.backend.add(counters)
    } catch (error) {
      this.lastError = error
      // Keep every count: the entries still hold theirs; ended windows go back to the carry.
      for (const e of this.entries.values()) {
        e.inFlight = 0
        e.touched = true
      }
      this.carry.push(...counters.slice(0, carried))
      return
    }
    this.lastError = undefined
    this.flushes++
    this.maxFlushMs = Math.max(this.maxFlushMs, performance.now() - started)
    keys.forEach((key, i) => {
      const e = this.entries.get(key)
      const sent = counters[carried + i]!
      if (e === undefined || sent.key !== this.backend.keyOf(this.policy.id, key, e.window)) return
      e.pending -= sent.count
      e.inFlight = 0
      e.global = totals[carried + i]!
    })
  }

  /** Stop the timer after a last flush. */
  async close(): Promise<void> {
    clearInterval(this.timer)
    await this.flush()
    if (this.carry.length > 0 || [...this.entries.values()].some((e) => e.pending !== 0)) await this.flush()
  }

  get size(): number {
    return this.entries.size
  }
}
