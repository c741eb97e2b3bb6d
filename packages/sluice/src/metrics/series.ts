// Small fixed-size time series for the dashboard: decisions per second per policy over the last
// minute or so, and recent store latencies for p50/p99. Fixed memory per policy and per store.
import type { DecisionOutcome } from './prometheus.js'

const OUTCOMES: readonly DecisionOutcome[] = ['allowed', 'denied', 'degraded']

interface Ring {
  /** Which whole second each slot currently holds. */
  seconds: Float64Array
  counts: Record<DecisionOutcome, Float64Array>
}

/** Per-second counts of decisions by policy and outcome, for the last `length` seconds. */
export class RateSeries {
  readonly length: number
  private readonly rings = new Map<string, Ring>()

  constructor(length = 60) {
    this.length = length
  }

  add(policy: string, outcome: DecisionOutcome, now: number, count = 1): void {
    let ring = this.rings.get(policy)
    if (ring === undefined) {
      ring = {
        seconds: new Float64Array(this.length).fill(-1),
        counts: {
          allowed: new Float64Array(this.length),
          denied: new Float64Array(this.length),
          degraded: new Float64Array(this.length),
        },
      }
      this.rings.set(policy, ring)
    }
    const second = Math.floor(now / 1000)
    const slot = second % this.length
    if (ring.seconds[slot] !== second) {
      ring.seconds[slot] = second
      for (const o of OUTCOMES) ring.counts[o][slot] = 0
    }
    ring.counts[outcome][slot]! += count
  }

  /** The policies with a series, in the order they first appeared. */
  policies(): string[] {
    return [...this.rings.keys()]
  }

  /** Forget a policy's series. */
  delete(policy: string): void {
    this.rings.delete(policy)
  }

  /** Every decision of the policy in the last `length` seconds, the current one included. */
  activity(policy: string, now: number): number {
    const ring = this.rings.get(policy)
    if (ring === undefined) return 0
    const oldest = Math.floor(now / 1000) - this.length
    let total = 0
    for (let slot = 0; slot < this.length; slot++)
      if (ring.seconds[slot]! > oldest) for (const o of OUTCOMES) total += ring.counts[o][slot]!
    return total
  }

  /** The sum of `read(policy, outcome, now)`'s last `seconds` values, without building the array. */
  sum(policy: string, outcome: DecisionOutcome, now: number, seconds = this.length): number {
    const ring = this.rings.get(policy)
    if (ring === undefined) return 0
    const current = Math.floor(now / 1000)
    let total = 0
    for (let second = current - Math.min(seconds, this.length); second < current; second++) {
      const slot = ((second % this.length) + this.length) % this.length
      if (ring.seconds[slot] === second) total += ring.counts[outcome][slot]!
    }
    return total
  }

  /**
   * Counts of the last `length` whole seconds before the one containing `now`, oldest first
   * (the current second is still filling, so it is left out).
   */
  read(policy: string, outcome: DecisionOutcome, now: number): number[] {
    const ring = this.rings.get(policy)
    const out = new Array<number>(this.length).fill(0)
    if (ring === undefined) return out
    const current = Math.floor(now / 1000)
    for (let i = 0; i < this.length; i++) {
      const second = current - this.length + i
      const slot = ((second % this.length) + this.length) % this.length
      if (ring.seconds[slot] === second) out[i] = ring.counts[outcome][slot]!
    }
    return out
  }
}

/** The most recent `size` samples; quantiles over them. */
export class RecentSamples {
  private readonly values: Float64Array
  private next = 0
  private filled = 0

  constructor(size = 1024) {
    this.values = new Float64Array(size)
  }

  add(value: number): void {
    this.values[this.next] = value
    this.next = (this.next + 1) % this.values.length
    if (this.filled < this.values.length) this.filled++
  }

  get count(): number {
    return this.filled
  }

  /** Quantiles (0..1) by nearest rank; `null` when there are no samples. */
  quantiles(qs: readonly number[]): (number | null)[] {
    if (this.filled === 0) return qs.map(() => null)
    const sorted = this.values.slice(0, this.filled).sort()
    return qs.map((q) => sorted[Math.min(this.filled - 1, Math.max(0, Math.ceil(q * this.filled) - 1))]!)
  }
}
