// Abuse patterns that per-key limits cannot see: many identities (users, API keys) behind one client
// address, and one identity spread over many addresses (IP rotation). Distinct counts per key with a
// small sketch (hll.ts), inside a bounded table per time bucket, over a sliding window.
import type * as prom from 'prom-client'
import { InvalidOptionsError } from '../errors.js'
import { groupIp, parseIp } from '../http/ip.js'
import { checkKnownKeys, keysOf } from '../options.js'
import { DistinctSketch, fnv1a, HLL_STANDARD_ERROR, SKETCH_BYTES } from './hll.js'
import { promClient } from './prom.js'
import { keyFingerprint } from './topk.js'

/** `identitiesPerAddress`: one address, many users/API keys. `addressesPerIdentity`: one user/API key, many addresses. */
export type AbusePattern = 'identitiesPerAddress' | 'addressesPerIdentity'
/** What a layer's key names: the client's address, or who the client says it is. */
export type AbuseKeyKind = 'address' | 'identity'

export interface AbuseOptions {
  /** How far back the distinct counts look, ms. Default 300 000 (5 minutes). */
  windowMs?: number
  /** Time buckets the window is split into; it slides one bucket at a time. Default 5. */
  buckets?: number
  /** Keys tracked per pattern per bucket (the memory bound). Default 1024. */
  capacity?: number
  /** Alert when one address has at least this many distinct identities in the window. Default 50. */
  identitiesPerAddress?: number
  /** Alert when one identity has at least this many distinct addresses in the window. Default 100. */
  addressesPerIdentity?: number
  /**
   * Which policies' keys are addresses and which identities (configured policy names). Layers of
   * other policies are read by key prefix: `ip:` is an address, `user:` and `apikey:` identities.
   */
  kinds?: Readonly<Record<string, AbuseKeyKind>>
  /** Alerts kept for the dashboard. Default 50. */
  keep?: number
}

export const ABUSE_OPTION_KEYS = keysOf<AbuseOptions>({
  windowMs: true,
  buckets: true,
  capacity: true,
  identitiesPerAddress: true,
  addressesPerIdentity: true,
  kinds: true,
  keep: true,
})

/** One tracked key of a pattern over the window. */
export interface AbuseEntry {
  /** The address (`ip:203.0.113.7`) or identity (`user:42`, `apikey:<hash>`), as the layer named it. */
  key: string
  /** For a hashed key (`apikey:<hash>`): the short form to show. */
  fingerprint?: string
  /** Estimated distinct identities (for an address) or addresses (for an identity) in the window. */
  distinct: number
  /** For an identity: estimated distinct networks (/24 for IPv4, /64 for IPv6) it came from. */
  networks?: number
  /** Decisions that carried this key with a partner, and how many of them were denied. */
  decisions: number
  denied: number
  /** At or above the pattern's threshold. */
  flagged: boolean
}

/** An abuse alert: one key crossed its pattern's threshold (once per crossing). */
export interface AbuseAlert {
  pattern: AbusePattern
  key: string
  fingerprint?: string
  /** The estimated distinct count when it crossed. */
  distinct: number
  threshold: number
  /** When (ms since epoch, the observability clock). */
  at: number
  windowMs: number
}

export interface AbuseReport {
  windowMs: number
  thresholds: Record<AbusePattern, number>
  /** Relative standard error of a distinct count past the exact range (1.04 / sqrt(512)). */
  standardError: number
  /** Addresses with more than one identity, by distinct identities, most first. */
  identitiesPerAddress: AbuseEntry[]
  /** Identities with more than one address, by distinct addresses, most first. */
  addressesPerIdentity: AbuseEntry[]
  /** Recent alerts, newest first. */
  alerts: AbuseAlert[]
  /** Keys held now over both patterns and buckets, their bound, and the most sketch bytes they can hold. */
  memory: AbuseMemory
}

export interface AbuseMemory {
  trackedKeys: number
  maxTrackedKeys: number
  maxSketchBytes: number
}

interface Tracked {
  distinct: DistinctSketch
  networks: DistinctSketch | undefined
  decisions: number
  denied: number
  /** When it was last fed (the window's add counter): ties in eviction go least recent first. */
  touched: number
}

interface Bucket {
  start: number
  keys: Map<string, Tracked>
}

interface Totals {
  distinct: number
  networks: number | undefined
  decisions: number
  denied: number
}

/** One pattern's ring of bucket tables. */
class PatternWindow {
  private readonly ring: (Bucket | undefined)[]
  private adds = 0

  constructor(
    readonly windowMs: number,
    readonly bucketMs: number,
    buckets: number,
    readonly capacity: number,
    readonly withNetworks: boolean,
  ) {
    this.ring = new Array<Bucket | undefined>(buckets).fill(undefined)
  }

  add(now: number, key: string, value: number, network: number, decisions: number, denied: number): void {
    const start = now - (now % this.bucketMs)
    const index = Math.floor(start / this.bucketMs) % this.ring.length
    let bucket = this.ring[index]
    if (bucket === undefined || bucket.start !== start) {
      if (bucket !== undefined && bucket.start > start) return // late: never clear a newer bucket
      bucket = { start, keys: new Map() }
      this.ring[index] = bucket
    }
    let tracked = bucket.keys.get(key)
    if (tracked === undefined) {
      if (bucket.keys.size >= this.capacity) evictSmallest(bucket.keys)
      tracked = {
        distinct: new DistinctSketch(),
        networks: this.withNetworks ? new DistinctSketch() : undefined,
        decisions: 0,
        denied: 0,
        touched: 0,
      }
      bucket.keys.set(key, tracked)
    }
    tracked.distinct.add(value)
    tracked.networks?.add(network)
    tracked.touched = ++this.adds
    tracked.decisions += decisions
    tracked.denied += denied
  }

  live(now: number): Bucket[] {
    return this.ring.filter(
      (b): b is Bucket => b !== undefined && b.start > now - this.windowMs && b.start <= now,
    )
  }

  /** Sum of the per-bucket counts: an upper bound of the union (bar sketch error), cheap. */
  upperBound(key: string, live: readonly Bucket[]): number {
    let sum = 0
    for (const b of live) sum += b.keys.get(key)?.distinct.count() ?? 0
    return sum
  }

  totals(key: string, live: readonly Bucket[]): Totals | undefined {
    const distinct: DistinctSketch[] = []
    const networks: DistinctSketch[] = []
    let decisions = 0
    let denied = 0
    for (const b of live) {
      const t = b.keys.get(key)
      if (t === undefined) continue
      distinct.push(t.distinct)
      if (t.networks !== undefined) networks.push(t.networks)
      decisions += t.decisions
      denied += t.denied
    }
    if (distinct.length === 0) return undefined
    return {
      distinct: DistinctSketch.union(distinct),
      networks: this.withNetworks ? DistinctSketch.union(networks) : undefined,
      decisions,
      denied,
    }
  }

  /**
   * The `k` keys with the most distinct partners, at least two: exact among tracked keys (bounds
   * prune the rest). A key with one partner is every ordinary client, not a pattern.
   */
  top(now: number, k: number): { key: string; totals: Totals }[] {
    const live = this.live(now)
    const bounds = new Map<string, number>()
    for (const b of live)
      for (const [key, t] of b.keys) bounds.set(key, (bounds.get(key) ?? 0) + t.distinct.count())
    const candidates = [...bounds].sort((a, b) => b[1] - a[1])
    const best: { key: string; totals: Totals }[] = []
    for (const [key, bound] of candidates) {
      if (bound < 2) break
      if (best.length >= k && best[k - 1]!.totals.distinct >= bound) break
      const totals = this.totals(key, live)
      if (totals === undefined || totals.distinct < 2) continue
      best.push({ key, totals })
      best.sort((a, b) => b.totals.distinct - a.totals.distinct || a.key.localeCompare(b.key))
      if (best.length > k) best.pop()
    }
    return best
  }

  trackedKeys(): number {
    let n = 0
    for (const b of this.ring) n += b?.keys.size ?? 0
    return n
  }
}

/**
 * Drop the quarter of a full table with the fewest distinct partners, least recently fed first among
 * equals (amortised O(log n) a key). A key fed again keeps its place against one-off keys that
 * arrived before that, so a flood of one-off keys cannot wash out a returning key by its age alone.
 */
function evictSmallest(keys: Map<string, Tracked>): void {
  const order = [...keys].sort(
    (a, b) => a[1].distinct.count() - b[1].distinct.count() || a[1].touched - b[1].touched,
  )
  const drop = Math.max(1, Math.floor(order.length / 4))
  for (let i = 0; i < drop; i++) keys.delete(order[i]![0])
}

/** The network of an address key: /24 for IPv4, /64 for IPv6 (the address itself when unparsable). */
export function networkOf(address: string): string {
  const raw = address.startsWith('ip:') ? address.slice(3) : address
  const slash = raw.indexOf('/')
  const bare = slash < 0 ? raw : raw.slice(0, slash)
  if (!bare.includes(':')) {
    const dot = bare.lastIndexOf('.')
    return dot < 0 ? bare : `${bare.slice(0, dot)}.0/24`
  }
  const ip = parseIp(bare)
  if (ip === undefined) return bare
  if (ip.family === 'ipv4') return networkOf(ip.address)
  return groupIp(ip.address, 'ipv6', 64)
}

function positiveInteger(value: number | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback
  if (!Number.isSafeInteger(value) || value < 1)
    throw new InvalidOptionsError(`abuse.${name}: must be a whole number of at least 1, got ${String(value)}`)
  return value
}

/** What the detector reports through Prometheus (pattern labels only: never a key). */
function abuseMetrics(registry: prom.Registry | undefined, flagged: () => Record<AbusePattern, number>) {
  if (registry === undefined) return undefined
  const client = promClient()
  const alerts = new client.Counter<'pattern'>({
    name: 'sluice_abuse_alerts_total',
    help: 'Abuse alerts: a key crossed its pattern threshold (identitiesPerAddress, addressesPerIdentity).',
    labelNames: ['pattern'],
    registers: [registry],
  })
  new client.Gauge<'pattern'>({
    name: 'sluice_abuse_flagged_keys',
    help: 'Keys at or above their abuse pattern threshold now.',
    labelNames: ['pattern'],
    registers: [registry],
    collect() {
      for (const [pattern, n] of Object.entries(flagged())) this.labels(pattern).set(n)
    },
  })
  return alerts
}

/**
 * Distinct identities per address and addresses per identity over a sliding window, with alerts.
 * Feed it (address, identity) pairs with `record`; `check` raises alerts for the keys it was fed.
 * @example
 * const d = new AbuseDetector({ identitiesPerAddress: 50 })
 * d.onAbuse((a) => console.warn('abuse', a.pattern, a.fingerprint ?? a.key, a.distinct))
 * d.record(Date.now(), 'ip:203.0.113.7', 'user:42', false)
 * d.check(Date.now())
 */
export class AbuseDetector {
  readonly windowMs: number
  readonly thresholds: Record<AbusePattern, number>
  readonly capacity: number
  readonly buckets: number
  readonly kinds: ReadonlyMap<string, AbuseKeyKind>
  private readonly windows: Record<AbusePattern, PatternWindow>
  private readonly touched: Record<AbusePattern, Set<string>> = {
    identitiesPerAddress: new Set(),
    addressesPerIdentity: new Set(),
  }
  private readonly flagged: Record<AbusePattern, Set<string>> = {
    identitiesPerAddress: new Set(),
    addressesPerIdentity: new Set(),
  }
  private readonly recentAlerts: AbuseAlert[] = []
  private readonly keep: number
  private listeners: ((alert: AbuseAlert) => void)[] = []
  private readonly alertCounter: prom.Counter<'pattern'> | undefined

  constructor(options: AbuseOptions = {}, registry?: prom.Registry) {
    checkKnownKeys('abuse', options, ABUSE_OPTION_KEYS)
    this.windowMs = positiveInteger(options.windowMs, 'windowMs', 300_000)
    this.buckets = positiveInteger(options.buckets, 'buckets', 5)
    this.capacity = positiveInteger(options.capacity, 'capacity', 1024)
    this.keep = positiveInteger(options.keep, 'keep', 50)
    this.thresholds = {
      identitiesPerAddress: positiveInteger(options.identitiesPerAddress, 'identitiesPerAddress', 50),
      addressesPerIdentity: positiveInteger(options.addressesPerIdentity, 'addressesPerIdentity', 100),
    }
    const kinds = new Map<string, AbuseKeyKind>()
    for (const [policy, kind] of Object.entries(options.kinds ?? {})) {
      if (kind !== 'address' && kind !== 'identity')
        throw new InvalidOptionsError(
          `abuse.kinds.${policy}: must be 'address' or 'identity', got ${JSON.stringify(kind)}`,
        )
      kinds.set(policy, kind)
    }
    this.kinds = kinds
    const bucketMs = Math.max(1, Math.ceil(this.windowMs / this.buckets))
    this.windows = {
      identitiesPerAddress: new PatternWindow(this.windowMs, bucketMs, this.buckets, this.capacity, false),
      addressesPerIdentity: new PatternWindow(this.windowMs, bucketMs, this.buckets, this.capacity, true),
    }
    this.alertCounter = abuseMetrics(registry, () => ({
      identitiesPerAddress: this.flagged.identitiesPerAddress.size,
      addressesPerIdentity: this.flagged.addressesPerIdentity.size,
    }))
  }

  /** The kind of one layer's key: by its policy in `kinds`, else by prefix; undefined for neither. */
  kindOf(policy: string, key: string): AbuseKeyKind | undefined {
    const configured = this.kinds.get(policy)
    if (configured !== undefined) return configured
    if (key.startsWith('ip:')) return 'address'
    if (key.startsWith('user:') || key.startsWith('apikey:')) return 'identity'
    return undefined
  }

  /**
   * Count an (address, identity) pair seen at `now`: `decisions` decisions carried it (default 1),
   * `denied` of them denied (a boolean counts as 1 or 0).
   */
  record(now: number, address: string, identity: string, denied: boolean | number, decisions = 1): void {
    // An unknown address is many clients at once, never one: it would always look like abuse.
    if (address === 'ip:unknown' || address === '' || identity === '') return
    const deniedCount = typeof denied === 'number' ? denied : denied ? 1 : 0
    this.windows.identitiesPerAddress.add(now, address, fnv1a(identity), 0, decisions, deniedCount)
    this.windows.addressesPerIdentity.add(
      now,
      identity,
      fnv1a(address),
      fnv1a(networkOf(address)),
      decisions,
      deniedCount,
    )
    this.touched.identitiesPerAddress.add(address)
    this.touched.addressesPerIdentity.add(identity)
  }

  /** Raise alerts for keys fed since the last check that crossed; re-arm flagged keys that fell below. */
  check(now: number): AbuseAlert[] {
    const found: AbuseAlert[] = []
    for (const pattern of ['identitiesPerAddress', 'addressesPerIdentity'] as const) {
      const window = this.windows[pattern]
      const threshold = this.thresholds[pattern]
      const flagged = this.flagged[pattern]
      const live = window.live(now)
      for (const key of flagged) {
        const distinct = window.totals(key, live)?.distinct ?? 0
        if (distinct < threshold) flagged.delete(key)
      }
      for (const key of this.touched[pattern]) {
        if (flagged.has(key) || window.upperBound(key, live) < threshold) continue
        const distinct = window.totals(key, live)?.distinct ?? 0
        if (distinct < threshold) continue
        flagged.add(key)
        const alert: AbuseAlert = { pattern, key, distinct, threshold, at: now, windowMs: this.windowMs }
        const fingerprint = keyFingerprint(key)
        if (fingerprint !== undefined) alert.fingerprint = fingerprint
        found.push(alert)
      }
      this.touched[pattern].clear()
    }
    for (const alert of found) {
      this.recentAlerts.push(alert)
      if (this.recentAlerts.length > this.keep) this.recentAlerts.shift()
      this.alertCounter?.labels(alert.pattern).inc()
      for (const listener of this.listeners) {
        try {
          listener(alert)
        } catch {
          // A broken listener must not stop detection.
        }
      }
    }
    return found
  }

  /** The top `k` keys of each pattern and the recent alerts, for the window ending at `now`. */
  report(now: number, k = 10): AbuseReport {
    const entries = (pattern: AbusePattern): AbuseEntry[] =>
      this.windows[pattern].top(now, k).map(({ key, totals }) => {
        const entry: AbuseEntry = {
          key,
          distinct: totals.distinct,
          decisions: totals.decisions,
          denied: totals.denied,
          flagged: totals.distinct >= this.thresholds[pattern],
        }
        const fingerprint = keyFingerprint(key)
        if (fingerprint !== undefined) entry.fingerprint = fingerprint
        if (totals.networks !== undefined) entry.networks = totals.networks
        return entry
      })
    return {
      windowMs: this.windowMs,
      thresholds: { ...this.thresholds },
      standardError: HLL_STANDARD_ERROR,
      identitiesPerAddress: entries('identitiesPerAddress'),
      addressesPerIdentity: entries('addressesPerIdentity'),
      alerts: [...this.recentAlerts].reverse(),
      memory: this.memory(),
    }
  }

  onAbuse(listener: (alert: AbuseAlert) => void): () => void {
    this.listeners = [...this.listeners, listener]
    return () => {
      this.listeners = this.listeners.filter((l) => l !== listener)
    }
  }

  /** Keys held now over both patterns, and the most sketch bytes they can hold (the memory bound). */
  memory(): AbuseMemory {
    const trackedKeys =
      this.windows.identitiesPerAddress.trackedKeys() + this.windows.addressesPerIdentity.trackedKeys()
    const maxTrackedKeys = 2 * this.buckets * this.capacity
    // An address holds one sketch, an identity two (addresses and networks).
    return { trackedKeys, maxTrackedKeys, maxSketchBytes: 3 * this.buckets * this.capacity * SKETCH_BYTES }
  }
}
