// Spike detection: per policy and per key, compare each interval's rate with an exponentially
// weighted moving average (EWMA) of that same series' earlier intervals, and flag a jump of `factor`x.
// Memory is bounded: per-key counts per interval go through a space-saving summary, and per-key
// baselines are kept for at most `maxKeys` keys (the least recently seen go first).
import { checkKnownKeys, keysOf } from '../options.js'
import { keyFingerprint, SpaceSaving } from './topk.js'

/** A rate that jumped well above its own recent baseline. */
export interface Spike {
  /** `policy`: the policy's whole traffic; `key`: one key under one policy. */
  scope: 'policy' | 'key'
  policy: string
  /** Present when `scope` is `key`. */
  key?: string
  /** For a hashed key: its short form to show (topk.ts keyFingerprint). */
  fingerprint?: string
  /** End of the interval that spiked (ms since epoch, the detector's clock). */
  at: number
  /** Requests per second in that interval. */
  rate: number
  /** The EWMA baseline before this interval, requests per second. */
  baseline: number
  /** rate / max(baseline, minRate). */
  ratio: number
}

export interface SpikeDetectorOptions {
  /** Length of one interval, ms. Default 1000. */
  intervalMs?: number
  /** Flag when rate >= factor x max(baseline, minRate). Default 10. */
  factor?: number
  /** Weight of the newest interval in the EWMA (0..1]. Default 0.2. */
  alpha?: number
  /** Floor under the baseline, requests per second, so 0 -> 3 req/s is not a spike. Default 5. */
  minRate?: number
  /** Intervals a policy must have been seen before its own spikes count (keys need none). Default 5. */
  warmupIntervals?: number
  /** Keys whose baselines are kept. Default 1000. */
  maxKeys?: number
  /** Keys counted per policy per interval (space-saving capacity). Default 64. */
  keysPerInterval?: number
  /** Spikes kept for `recent()`. Default 50. */
  keep?: number
}

interface Baseline {
  value: number
  intervals: number
}

/**
 * Feed it every decision with `record`; call `tick(now)` now and then (a timer) so quiet intervals
 * close too. New spikes go to `onSpike` listeners and to `recent()`.
 * @example
 * const d = new SpikeDetector({ factor: 10 })
 * d.onSpike((s) => console.warn('spike', s))
 * d.record('api', 'user-42', Date.now())
 */
export const SPIKE_OPTION_KEYS = keysOf<SpikeDetectorOptions>({
  intervalMs: true,
  factor: true,
  alpha: true,
  minRate: true,
  warmupIntervals: true,
  maxKeys: true,
  keysPerInterval: true,
  keep: true,
})

export class SpikeDetector {
  readonly intervalMs: number
  readonly factor: number
  readonly alpha: number
  readonly minRate: number
  readonly warmupIntervals: number
  readonly maxKeys: number
  readonly keysPerInterval: number
  readonly keep: number
  private intervalStart: number | undefined
  private policyCounts = new Map<string, number>()
  private keyCounts = new Map<string, SpaceSaving>()
  private readonly policyBaselines = new Map<string, Baseline>()
  /** Per-key baselines by `policy\u0000key`, in least-recently-seen-first order. */
  private readonly keyBaselines = new Map<string, Baseline>()
  private readonly spikes: Spike[] = []
  private listeners: ((spike: Spike) => void)[] = []

  constructor(options: SpikeDetectorOptions = {}) {
    checkKnownKeys('spikes', options, SPIKE_OPTION_KEYS)
    this.intervalMs = options.intervalMs ?? 1000
    this.factor = options.factor ?? 10
    this.alpha = options.alpha ?? 0.2
    this.minRate = options.minRate ?? 5
    this.warmupIntervals = options.warmupIntervals ?? 5
    this.maxKeys = options.maxKeys ?? 1000
    this.keysPerInterval = options.keysPerInterval ?? 64
    this.keep = options.keep ?? 50
  }

  /** Count one decision (of `weight` requests) for `policy` and `key` at time `now` (ms). */
  record(policy: string, key: string, now: number, weight = 1): void {
    this.advance(now)
    this.policyCounts.set(policy, (this.policyCounts.get(policy) ?? 0) + weight)
    let summary = this.keyCounts.get(policy)
    if (summary === undefined) {
      summary = new SpaceSaving(this.keysPerInterval)
      this.keyCounts.set(policy, summary)
    }
    summary.add(key, weight)
  }

  /** Forget a policy's baseline and its keys' (the caller no longer tracks the policy). */
  forget(policy: string): void {
    this.policyBaselines.delete(policy)
    this.policyCounts.delete(policy)
    this.keyCounts.delete(policy)
    const prefix = `${policy}\u0000`
    for (const id of this.keyBaselines.keys()) if (id.startsWith(prefix)) this.keyBaselines.delete(id)
  }

  /** Close every interval that ended by `now`; returns the spikes found. */
  tick(now: number): Spike[] {
    return this.advance(now)
  }

  /** The latest spikes, newest first. */
  recent(): Spike[] {
    return [...this.spikes].reverse()
  }

  /** Listen for new spikes; returns a function that removes the listener. */
  onSpike(listener: (spike: Spike) => void): () => void {
    this.listeners = [...this.listeners, listener]
    return () => {
      this.listeners = this.listeners.filter((l) => l !== listener)
    }
  }

  private advance(now: number): Spike[] {
    if (this.intervalStart === undefined) {
      this.intervalStart = now - (now % this.intervalMs)
      return []
    }
    if (now < this.intervalStart + this.intervalMs) return []
    const found = this.close(this.intervalStart + this.intervalMs)
    // Quiet intervals in between decay every baseline; a few are enough (0.8^20 ~ 1%).
    const missed = Math.min(20, Math.floor((now - this.intervalStart) / this.intervalMs) - 1)
    for (let i = 0; i < missed; i++) this.close(this.intervalStart + this.intervalMs)
    this.intervalStart = now - (now % this.intervalMs)
    return found
  }

  /** Close the current interval (ending at `end`), compare, update baselines. */
  private close(end: number): Spike[] {
    const found: Spike[] = []
    const seconds = this.intervalMs / 1000
    const policies = new Set([...this.policyBaselines.keys(), ...this.policyCounts.keys()])
    for (const policy of policies) {
      const rate = (this.policyCounts.get(policy) ?? 0) / seconds
      const base = this.policyBaselines.get(policy)
      if (base !== undefined && base.intervals >= this.warmupIntervals) {
        const spike = this.check('policy', policy, undefined, end, rate, base.value)
        if (spike !== undefined) found.push(spike)
      }
      this.policyBaselines.set(policy, this.update(base, rate))
    }
    // Keys seen this interval: compare with their baseline (0 for a key never seen: the floor decides).
    const seen = new Set<string>()
    for (const [policy, summary] of this.keyCounts) {
      for (const { key, count } of summary.entries()) {
        const id = `${policy}\u0000${key}`
        seen.add(id)
        const rate = count / seconds
        const base = this.keyBaselines.get(id)
        const spike = this.check('key', policy, key, end, rate, base?.value ?? 0)
        if (spike !== undefined) found.push(spike)
        this.keyBaselines.delete(id) // re-insert: most recently seen goes last
        this.keyBaselines.set(id, this.update(base, rate))
      }
    }
    // Keys not seen this interval decay toward zero and are forgotten once negligible.
    for (const [id, base] of this.keyBaselines) {
      if (seen.has(id)) continue
      const next = this.update(base, 0)
      if (next.value < 0.01) this.keyBaselines.delete(id)
      else this.keyBaselines.set(id, next)
    }
    while (this.keyBaselines.size > this.maxKeys) {
      const oldest = this.keyBaselines.keys().next().value
      if (oldest === undefined) break
      this.keyBaselines.delete(oldest)
    }
    this.policyCounts = new Map()
    this.keyCounts = new Map()
    for (const spike of found) {
      this.spikes.push(spike)
      if (this.spikes.length > this.keep) this.spikes.shift()
      for (const listener of this.listeners) {
        try {
          listener(spike)
        } catch {
          // A broken listener must not stop detection.
        }
      }
    }
    return found
  }

  private update(base: Baseline | undefined, rate: number): Baseline {
    if (base === undefined) return { value: rate, intervals: 1 }
    return { value: this.alpha * rate + (1 - this.alpha) * base.value, intervals: base.intervals + 1 }
  }

  private check(
    scope: Spike['scope'],
    policy: string,
    key: string | undefined,
    at: number,
    rate: number,
    baseline: number,
  ): Spike | undefined {
    const reference = Math.max(baseline, this.minRate)
    if (rate < this.factor * reference) return undefined
    const spike: Spike = { scope, policy, at, rate, baseline, ratio: rate / reference }
    if (key !== undefined) {
      spike.key = key
      const fingerprint = keyFingerprint(key)
      if (fingerprint !== undefined) spike.fingerprint = fingerprint
    }
    return spike
  }
}
