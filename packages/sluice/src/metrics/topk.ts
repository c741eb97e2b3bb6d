// Heavy hitters with bounded memory: the space-saving algorithm (Metwally et al.) over a sliding time
// horizon built from a ring of time buckets, plus a small HyperLogLog per bucket to estimate how many
// distinct keys there were (needed for "share of traffic taken by the top 1% of keys").
import { checkKnownKeys, keysOf } from '../options.js'

/**
 * One counted key. The true count lies within `maxError` of `count` (for one space-saving summary
 * `count` only ever overestimates; a merged report can also miss what a key had in a full bucket).
 */
export interface HeavyHitter {
  key: string
  count: number
  /** Upper bound on |true count - count|. */
  maxError: number
  /** For a hashed key (`apikey:<hash>`, `hash:<hash>`): a short form to show, `apikey:I6L_xJKj…`. */
  fingerprint?: string
}

// The HTTP core's and the service's hashed keys: a kind, then 32 base64url characters of SHA-256.
const HASHED_KEY = /^(apikey|hash):([A-Za-z0-9_-]{32})$/
const FINGERPRINT_CHARS = 8

/**
 * A short, stable name for a hashed key (what dashboards show); undefined for other keys.
 * @example keyFingerprint('apikey:I6L_xJKjT0mQ...') // 'apikey:I6L_xJKj…'
 */
export function keyFingerprint(key: string): string | undefined {
  const match = HASHED_KEY.exec(key)
  return match === null ? undefined : `${match[1]}:${match[2]!.slice(0, FINGERPRINT_CHARS)}…`
}

function withFingerprint(hitter: HeavyHitter): HeavyHitter {
  const fingerprint = keyFingerprint(hitter.key)
  return fingerprint === undefined ? hitter : { ...hitter, fingerprint }
}

interface Counter {
  key: string
  count: number
  error: number
  /** Index in the heap array. */
  slot: number
}

/**
 * Space-saving summary: at most `capacity` counters. A key not tracked replaces the smallest counter
 * and inherits its count as error. A min-heap keeps "find the smallest" at O(log capacity).
 * Any key whose true count exceeds total / capacity is guaranteed to be tracked.
 */
export class SpaceSaving {
  readonly capacity: number
  private readonly byKey = new Map<string, Counter>()
  private readonly heap: Counter[] = []
  /** Sum of all weights recorded. */
  total = 0

  constructor(capacity: number) {
    this.capacity = capacity
  }

  get size(): number {
    return this.heap.length
  }

  /** The smallest tracked count when full (an unseen key may have had up to this many), else 0. */
  get floor(): number {
    return this.heap.length < this.capacity ? 0 : (this.heap[0]?.count ?? 0)
  }

  /** Count `weight` for `key`; returns false when the key was already tracked. */
  add(key: string, weight = 1): boolean {
    this.total += weight
    const existing = this.byKey.get(key)
    if (existing !== undefined) {
      existing.count += weight
      this.siftDown(existing.slot)
      return false
    }
    if (this.heap.length < this.capacity) {
      const counter: Counter = { key, count: weight, error: 0, slot: this.heap.length }
      this.heap.push(counter)
      this.byKey.set(key, counter)
      this.siftUp(counter.slot)
      return true
    }
    // Replace the smallest counter: the newcomer inherits its count as possible overcount.
    const smallest = this.heap[0]!
    this.byKey.delete(smallest.key)
    smallest.error = smallest.count
    smallest.count += weight
    smallest.key = key
    this.byKey.set(key, smallest)
    this.siftDown(0)
    return true
  }

  get(key: string): HeavyHitter | undefined {
    const c = this.byKey.get(key)
    return c === undefined ? undefined : { key: c.key, count: c.count, maxError: c.error }
  }

  /** Every tracked counter, unordered. */
  entries(): HeavyHitter[] {
    return this.heap.map((c) => ({ key: c.key, count: c.count, maxError: c.error }))
  }

  /** The `k` largest counters, largest first. */
  top(k: number): HeavyHitter[] {
    return this.entries()
      .sort((a, b) => b.count - a.count || a.key.localeCompare(b.key))
      .slice(0, k)
  }

  private swap(i: number, j: number): void {
    const a = this.heap[i]!
    const b = this.heap[j]!
    this.heap[i] = b
    this.heap[j] = a
    a.slot = j
    b.slot = i
  }

  private siftUp(i: number): void {
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (this.heap[parent]!.count <= this.heap[i]!.count) return
      this.swap(i, parent)
      i = parent
    }
  }

  private siftDown(i: number): void {
    const n = this.heap.length
    for (;;) {
      const left = 2 * i + 1
      if (left >= n) return
      const right = left + 1
      const child = right < n && this.heap[right]!.count < this.heap[left]!.count ? right : left
      if (this.heap[i]!.count <= this.heap[child]!.count) return
      this.swap(i, child)
      i = child
    }
  }
}

/** 32-bit FNV-1a over UTF-16 code units: cheap, and good enough to spread keys for HyperLogLog. */
export function fnv1a(text: string): number {
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  // Final avalanche (murmur3 fmix32) so nearby keys ("user-1", "user-2") land on unrelated registers.
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}

const HLL_BITS = 8
const HLL_REGISTERS = 1 << HLL_BITS

/** HyperLogLog with 256 registers (about 6.5% standard error); merges by register-wise max. */
export class DistinctCounter {
  readonly registers = new Uint8Array(HLL_REGISTERS)

  add(key: string): void {
    const h = fnv1a(key)
    const index = h >>> (32 - HLL_BITS)
    const rest = (h << HLL_BITS) >>> 0
    // Position of the first 1 bit in the remaining 24 bits (1-based); all zero counts as 25.
    const rank = rest === 0 ? 32 - HLL_BITS + 1 : Math.clz32(rest) + 1
    if (rank > this.registers[index]!) this.registers[index] = rank
  }

  /** Estimate of distinct keys in the union of `counters`. */
  static estimate(counters: readonly DistinctCounter[]): number {
    const merged = new Uint8Array(HLL_REGISTERS)
    for (const c of counters)
      for (let i = 0; i < HLL_REGISTERS; i++) if (c.registers[i]! > merged[i]!) merged[i] = c.registers[i]!
    let sum = 0
    let zeros = 0
    for (let i = 0; i < HLL_REGISTERS; i++) {
      sum += 2 ** -merged[i]!
      if (merged[i] === 0) zeros++
    }
    const m = HLL_REGISTERS
    const alpha = 0.7213 / (1 + 1.079 / m)
    const raw = (alpha * m * m) / sum
    // Small cardinalities: linear counting on empty registers is far more accurate.
    if (raw <= 2.5 * m && zeros > 0) return Math.round(m * Math.log(m / zeros))
    return Math.round(raw)
  }
}

export interface SlidingTopKOptions {
  /** How far back the summary looks, in ms. Default 60 000. */
  horizonMs?: number
  /** Number of time buckets the horizon is split into; the window slides one bucket at a time. Default 6. */
  buckets?: number
  /** Counters per bucket (memory bound). Default 128. */
  capacity?: number
}

interface Bucket {
  start: number
  summary: SpaceSaving
  distinct: DistinctCounter
}

/** What a sliding top-K reports for its horizon. */
export interface TopKReport {
  /** Total weight recorded within the horizon. */
  total: number
  /** Estimated distinct keys within the horizon (HyperLogLog). */
  distinctKeys: number
  top: HeavyHitter[]
  /**
   * Share of `total` taken by the top 1% of distinct keys (at least one key), or `null` when the top
   * 1% is more keys than the summary can track. An estimate, as precise as the counts.
   */
  topOnePercentShare: number | null
}

/**
 * Heavy hitters over the last `horizonMs`: memory is `buckets x capacity` counters, whatever the
 * number of keys. Older buckets fall out of the window as time moves on.
 * @example
 * const t = new SlidingTopK({ horizonMs: 60_000 })
 * t.add('203.0.113.7', Date.now())
 * t.report(Date.now(), 10).top // [{ key: '203.0.113.7', count: 1, maxError: 0 }]
 */
export const TOPK_OPTION_KEYS = keysOf<SlidingTopKOptions>({ horizonMs: true, buckets: true, capacity: true })

export class SlidingTopK {
  readonly horizonMs: number
  readonly bucketMs: number
  readonly capacity: number
  private readonly ring: (Bucket | undefined)[]

  constructor(options: SlidingTopKOptions = {}) {
    checkKnownKeys('topKeys', options, TOPK_OPTION_KEYS)
    this.horizonMs = options.horizonMs ?? 60_000
    const buckets = options.buckets ?? 6
    this.capacity = options.capacity ?? 128
    this.bucketMs = Math.max(1, Math.ceil(this.horizonMs / buckets))
    this.ring = new Array<Bucket | undefined>(buckets).fill(undefined)
  }

  add(key: string, now: number, weight = 1): void {
    const start = now - (now % this.bucketMs)
    const index = Math.floor(start / this.bucketMs) % this.ring.length
    let bucket = this.ring[index]
    if (bucket === undefined || bucket.start !== start) {
      // Late events (older than the slot's bucket) are dropped rather than clearing a newer bucket.
      if (bucket !== undefined && bucket.start > start) return
      bucket = { start, summary: new SpaceSaving(this.capacity), distinct: new DistinctCounter() }
      this.ring[index] = bucket
    }
    // A key the bucket's summary already tracks went into its HyperLogLog when it was first
    // tracked; adding it again changes nothing, so the hash is skipped for heavy hitters.
    if (bucket.summary.add(key, weight)) bucket.distinct.add(key)
  }

  /** The `k` heaviest keys of the horizon ending at `now`. */
  report(now: number, k: number): TopKReport {
    const live = this.ring.filter(
      (b): b is Bucket => b !== undefined && b.start > now - this.horizonMs && b.start <= now,
    )
    let total = 0
    const merged = new Map<string, HeavyHitter>()
    for (const b of live) {
      total += b.summary.total
      for (const e of b.summary.entries()) {
        const m = merged.get(e.key)
        if (m === undefined) merged.set(e.key, { ...e })
        else {
          m.count += e.count
          m.maxError += e.maxError
        }
      }
    }
    // A key missing from a full bucket may have had up to that bucket's floor there: add that to the
    // key's error bound rather than to its count.
    for (const m of merged.values()) {
      for (const b of live) if (b.summary.get(m.key) === undefined) m.maxError += b.summary.floor
    }
    const all = [...merged.values()].sort((a, b) => b.count - a.count || a.key.localeCompare(b.key))
    const distinctKeys = Math.max(
      DistinctCounter.estimate(live.map((b) => b.distinct)),
      merged.size > 0 ? 1 : 0,
    )
    const onePercent = Math.max(1, Math.ceil(distinctKeys * 0.01))
    let topOnePercentShare: number | null = null
    if (total > 0 && onePercent <= all.length && onePercent <= this.capacity) {
      let sum = 0
      for (let i = 0; i < onePercent; i++) sum += all[i]!.count
      topOnePercentShare = Math.min(1, sum / total)
    } else if (total === 0) topOnePercentShare = 0
    return { total, distinctKeys, top: all.slice(0, k).map(withFingerprint), topOnePercentShare }
  }
}
