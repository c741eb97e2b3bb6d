// Everything an operator looks at, wired to one limiter: Prometheus metrics, top keys, spikes, and
// the live dashboard, as plain node:http handlers that any server (or the Sluice service) can mount.
import type { Registry } from 'prom-client'
import { createDashboard } from '../dashboard/handler.js'
import { listsSnapshot, type PolicyListsSnapshot } from '../dashboard/lists.js'
import { InvalidOptionsError } from '../errors.js'
import type { NodeHandler } from '../http/types.js'
import type { Decision, DecisionEvent, DecisionListener, LayeredDecision, Override } from '../limiter.js'
import type { CompiledLists } from '../lists.js'
import { checkKnownKeys, isOptionsObject, keysOf } from '../options.js'
import type { AbuseAlert, AbuseOptions, AbuseReport } from './abuse.js'
import { ABUSE_OPTION_KEYS, AbuseDetector } from './abuse.js'
import { type NearLimitKey, NearLimitKeys } from './near-limit-keys.js'
import { type PenalisedKey, PenalisedKeys } from './penalties.js'
import type {
  DecisionOutcome,
  MetricsOptions,
  PolicyShareStatus,
  RegionStatus,
  ReportedStoreHealth,
  SluiceMetrics,
} from './prometheus.js'
import { createMetrics, METRICS_OPTION_KEYS, outcomeOf } from './prometheus.js'
import { RateSeries, RecentSamples } from './series.js'
import type { Spike, SpikeDetectorOptions } from './spikes.js'
import { SPIKE_OPTION_KEYS, SpikeDetector } from './spikes.js'
import type { HeavyHitter, SlidingTopKOptions } from './topk.js'
import { SlidingTopK, TOPK_OPTION_KEYS } from './topk.js'

/** A node:http request handler (also fits Express and `@hono/node-server` raw handlers). */

export interface ObservabilityOptions {
  /**
   * The limiter to watch (anything with `subscribe`). Its `policies`, when it has them (a limiter
   * does), are read at each snapshot for the lists in force.
   */
  limiter: {
    subscribe(listener: DecisionListener): () => void
    readonly policies?: Readonly<Record<string, { readonly lists?: CompiledLists }>>
  }
  /** Prometheus registry. Default: a new one. */
  registry?: Registry
  /** Bounds of the Prometheus labels and histogram buckets. */
  metrics?: Omit<MetricsOptions, 'registry'>
  /** Top keys: horizon, buckets and counters per bucket. Defaults: 60 s, 6 buckets, 128 counters. */
  topKeys?: SlidingTopKOptions
  spikes?: SpikeDetectorOptions
  /**
   * Abuse patterns over layered decisions (identities per address, addresses per identity): window,
   * thresholds, tracked keys, which policies are addresses or identities. `false` turns them off.
   */
  abuse?: AbuseOptions | false
  /** Where `dashboardHandler` answers: the page here, SSE at `<path>/events`. Default `/dashboard`. */
  dashboardPath?: string
  /** How often the dashboard gets a new snapshot, ms. Default 1000. */
  pushIntervalMs?: number
  /** Dashboard event streams open at once; one more gets a 503. Default 16. */
  maxStreams?: number
  /** Bytes a dashboard stream may have queued before it is dropped as not reading. Default 256 KiB. */
  maxStreamBufferBytes?: number
  /** Decisions are counted in batches applied this often, ms (also when a batch holds 4096 keys). Default 100. */
  flushMs?: number
  /**
   * Policies whose per-second series, totals, top keys and spike baselines are kept. One more drops
   * the policy decided least recently (counted in the snapshot's `otherPolicies.dropped`); its
   * Prometheus counters stay. Default 1000.
   */
  maxPolicies?: number
  /**
   * Policies a snapshot lists, with their series and top keys: the busiest of the last minute. The
   * others are summed in `otherPolicies`, so a snapshot's size does not grow with the policies. Default 50.
   */
  dashboardPolicies?: number
  /** Clock in ms. Default `Date.now`. */
  now?: () => number
}

/** Heavy hitters of one policy and one side (keys denied, or keys admitted). */
export interface TopKeysReport {
  policy: string
  side: 'denied' | 'admitted'
  /** Requests in the horizon on this side. */
  total: number
  /** Estimated distinct keys in the horizon. */
  distinctKeys: number
  /** Share of `total` from the top 1% of keys; `null` when that is more keys than are tracked. */
  topOnePercentShare: number | null
  keys: HeavyHitter[]
}

export interface PolicySnapshot {
  policy: string
  /** Since start, as in `sluice_decisions_total`. */
  totals: Record<DecisionOutcome, number>
  /** Last complete second. */
  perSecond: Record<DecisionOutcome, number>
  /** Denied / all decisions over the last 10 seconds (0 when idle). */
  deniedShare10s: number
  /** Per-second counts, oldest first, for the charts. */
  series: Record<DecisionOutcome, number[]>
}

export interface StoreSnapshot extends ReportedStoreHealth {
  /** Store latency over the most recent decisions, ms; `null` before the first. */
  p50Ms: number | null
  p99Ms: number | null
  samples: number
}

/** The policies a snapshot does not list, summed. */
export interface OtherPolicies {
  /** Policies kept but not listed (beyond `dashboardPolicies`). */
  count: number
  /** Their totals since start. */
  totals: Record<DecisionOutcome, number>
  /** Their decisions in the last complete second. */
  perSecond: Record<DecisionOutcome, number>
  /** Policies dropped since start to stay within `maxPolicies` (least recently decided first). */
  dropped: number
}

/** What the dashboard shows; pushed over Server-Sent Events and served at `<path>/snapshot.json`. */
export interface DashboardSnapshot {
  at: number
  /** At most `dashboardPolicies`: the busiest of the last minute, in the order they first decided. */
  policies: PolicySnapshot[]
  otherPolicies: OtherPolicies
  /** Denied / all decisions over the last 10 seconds, all policies. */
  deniedShare10s: number
  stores: StoreSnapshot[]
  /** multiRegionStore's regions and their freshness; empty for other stores. */
  regions: RegionStatus[]
  /** Top keys of the listed policies. */
  topDenied: TopKeysReport[]
  topAdmitted: TopKeysReport[]
  spikes: Spike[]
  /** Keys whose decision crossed their policy's `nearLimit` line, newest first, until their window resets (at most 20). */
  nearLimit: NearLimitKey[]
  /** Abuse patterns and their alerts; `null` when turned off with `abuse: false`. */
  abuse: AbuseReport | null
  /** Per-key overrides in force, as `watchOverrides` last gave them (at most 50); empty without it. */
  overrides: Override[]
  /** The allow and deny lists in force, per policy that has any (a limiter's policies; empty otherwise). */
  lists: PolicyListsSnapshot[]
  /** Keys under an escalating penalty now (policies with `penalty`), newest first, at most 20. */
  penalised: PenalisedKey[]
}

export interface Observability {
  readonly metrics: SluiceMetrics
  /** Serves the Prometheus exposition (mount at `/metrics`). */
  metricsHandler: NodeHandler
  /** Serves the dashboard page, `/events` (SSE) and `/snapshot.json` under `dashboardPath`; 404 elsewhere. */
  dashboardHandler: NodeHandler
  /** Dashboard event streams open now. */
  readonly dashboardStreams: number
  /** Heavy hitters per policy and side, heaviest first. */
  topKeys(options?: { policy?: string; side?: 'denied' | 'admitted'; k?: number }): TopKeysReport[]
  /** Recent spikes, newest first. */
  spikes(): Spike[]
  /** Apply decisions counted since the last batch now (a timer does it every `flushMs`). */
  flush(): void
  onSpike(listener: (spike: Spike) => void): () => void
  /** Abuse patterns over the window: top addresses by identities, top identities by addresses, alerts. */
  abuse(options?: { k?: number }): AbuseReport | null
  /** Listen for abuse alerts (once per key per crossing of its threshold); returns an unsubscribe. */
  onAbuse(listener: (alert: AbuseAlert) => void): () => void
  /**
   * Count one (address, identity) pair that a decision's layers do not show, e.g. a check on an API
   * key made for a known client address. Keys as the layers name them (`ip:...`, `user:...`, `apikey:<hash>`).
   */
  observePair(address: string, identity: string, denied?: boolean): void
  snapshot(): DashboardSnapshot
  /**
   * Where the dashboard reads the per-key overrides in force: `source` is called for each snapshot
   * and must answer at once (a copy the caller keeps fresh, e.g. from `limiter.listOverrides`).
   */
  watchOverrides(source: () => readonly Override[]): void
  /** Stop listening to the limiter, end SSE streams and timers. Does not close the limiter. */
  close(): void
}

/** The most overrides one dashboard snapshot lists. */
const MAX_SHOWN_OVERRIDES = 50

const OPTION_KEYS = keysOf<ObservabilityOptions>({
  limiter: true,
  registry: true,
  metrics: true,
  topKeys: true,
  spikes: true,
  abuse: true,
  dashboardPath: true,
  pushIntervalMs: true,
  maxStreams: true,
  maxStreamBufferBytes: true,
  flushMs: true,
  maxPolicies: true,
  dashboardPolicies: true,
  now: true,
})

const OUTCOMES: readonly DecisionOutcome[] = ['allowed', 'denied', 'degraded']
/** Distinct keys a batch may hold before it is flushed early (bounds its memory). */
const MAX_BATCH_KEYS = 4096

interface Batch {
  outcomes: Record<DecisionOutcome, number>
  admitted: Map<string, { n: number }>
  denied: Map<string, { n: number }>
}

const EMPTY_TOTALS = (): Record<DecisionOutcome, number> => ({ allowed: 0, denied: 0, degraded: 0 })

/** What is kept per policy besides its series: totals since start and top keys by side. */
interface PolicyState {
  totals: Record<DecisionOutcome, number>
  denied: SlidingTopK
  admitted: SlidingTopK
}

function countOption(value: number | undefined, fallback: number, what: string): number {
  if (value === undefined) return fallback
  if (!Number.isSafeInteger(value) || value < 1)
    throw new InvalidOptionsError(
      `createObservability: ${what} must be a whole number, at least 1 (got ${String(value)})`,
    )
  return value
}

/**
 * Watch a limiter: metrics, top keys, spikes, dashboard.
 * @example
 * const obs = createObservability({ limiter })
 * http.createServer((req, res) =>
 *   req.url === '/metrics' ? obs.metricsHandler(req, res) : obs.dashboardHandler(req, res)).listen(9464)
 */
export function createObservability(options: ObservabilityOptions): Observability {
  if (options === null || typeof options !== 'object' || typeof options.limiter?.subscribe !== 'function')
    throw new InvalidOptionsError('createObservability: pass { limiter } (a limiter from createLimiter)')
  checkKnownKeys('createObservability', options, OPTION_KEYS)
  const nested: [string, unknown, readonly string[]][] = [
    ['metrics', options.metrics, METRICS_OPTION_KEYS.filter((k) => k !== 'registry')],
    ['topKeys', options.topKeys, TOPK_OPTION_KEYS],
    ['spikes', options.spikes, SPIKE_OPTION_KEYS],
    ['abuse', options.abuse, ABUSE_OPTION_KEYS],
  ]
  for (const [name, value, keys] of nested)
    if (isOptionsObject(value)) checkKnownKeys(`createObservability: ${name}`, value, keys)
  const now = options.now ?? Date.now
  const metricsOptions: MetricsOptions = { ...options.metrics }
  if (options.registry !== undefined) metricsOptions.registry = options.registry
  const metrics = createMetrics(metricsOptions)
  // A limiter on a multiRegionStore: its regions' freshness goes to the gauges and the dashboard.
  const store = (options.limiter as { store?: { regions?: unknown; shares?: unknown } }).store
  if (typeof store?.regions === 'function') {
    const regionsOf = store.regions.bind(store) as () => readonly RegionStatus[]
    metrics.watchRegions(regionsOf)
  }
  // And its shares of the global policies' limits.
  if (typeof store?.shares === 'function')
    metrics.watchShares(store.shares.bind(store) as () => readonly PolicyShareStatus[])
  const topOptions = options.topKeys ?? {}
  const detector = new SpikeDetector(options.spikes)
  const penalised = new PenalisedKeys()
  const abuse = options.abuse === false ? undefined : new AbuseDetector(options.abuse, metrics.registry)
  const maxPolicies = countOption(options.maxPolicies, 1000, 'maxPolicies')
  const dashboardPolicies = countOption(options.dashboardPolicies, 50, 'dashboardPolicies')
  const series = new RateSeries(60)
  const latency = new Map<string, RecentSamples>()
  // By policy, least recently decided first (a policy is moved to the end at each flush it decided in).
  const kept = new Map<string, PolicyState>()
  let droppedPolicies = 0

  /** The state of a policy that decided now, made (and the oldest dropped beyond maxPolicies) if new. */
  function stateOf(policy: string): PolicyState {
    let state = kept.get(policy)
    if (state !== undefined) {
      kept.delete(policy)
      kept.set(policy, state)
      return state
    }
    state = {
      totals: EMPTY_TOTALS(),
      denied: new SlidingTopK(topOptions),
      admitted: new SlidingTopK(topOptions),
    }
    kept.set(policy, state)
    if (kept.size > maxPolicies) {
      const oldest = kept.keys().next().value!
      kept.delete(oldest)
      series.delete(oldest)
      detector.forget(oldest)
      droppedPolicies++
    }
    return state
  }

  // The hot path only counts into a small batch (per policy: outcomes, and keys by side); every
  // `flushMs`, or sooner when the batch holds many keys, the batch goes into the series, top-K and
  // spike detector with weights. A key seen 1000 times in a batch costs one summary update, and no
  // clock is read per decision. Time is resolved to the flush, i.e. to within `flushMs`.
  let batch = new Map<string, Batch>()
  let batchKeys = 0
  // (address, identity) pairs since the last flush, by address then identity: a repeated pair is
  // two Map lookups and no hashing; the sketches see each pair once per batch, with its weights.
  let pairs = new Map<string, Map<string, { n: number; denied: number }>>()
  let batchPairs = 0

  function count(policy: string, key: string, outcome: DecisionOutcome, allowed: boolean): void {
    let b = batch.get(policy)
    if (b === undefined) {
      b = { outcomes: EMPTY_TOTALS(), admitted: new Map(), denied: new Map() }
      batch.set(policy, b)
    }
    b.outcomes[outcome]++
    const keys = allowed ? b.admitted : b.denied
    // A counter object: a repeat key is one Map lookup, not a get and a set.
    const counter = keys.get(key)
    if (counter !== undefined) counter.n++
    else {
      keys.set(key, { n: 1 })
      if (++batchKeys >= MAX_BATCH_KEYS) flush()
    }
  }

  /** Apply the pending batch now (a timer does it every `flushMs`). */
  function flush(): void {
    if (batchPairs > 0 && abuse !== undefined) {
      const at = now()
      const pending = pairs
      pairs = new Map()
      batchPairs = 0
      for (const [address, identities] of pending)
        for (const [identity, { n, denied }] of identities) abuse.record(at, address, identity, denied, n)
      abuse.check(at)
    }
    if (batch.size === 0) return
    const at = now()
    const pending = batch
    batch = new Map()
    batchKeys = 0
    for (const [policy, b] of pending) {
      const top = stateOf(policy)
      const t = top.totals
      for (const outcome of OUTCOMES) {
        const n = b.outcomes[outcome]
        if (n === 0) continue
        t[outcome] += n
        series.add(policy, outcome, at, n)
      }
      for (const [key, { n }] of b.admitted) {
        top.admitted.add(key, at, n)
        detector.record(policy, key, at, n)
      }
      for (const [key, { n }] of b.denied) {
        top.denied.add(key, at, n)
        detector.record(policy, key, at, n)
      }
    }
  }

  function pair(address: string, identity: string, denied: boolean): void {
    let identities = pairs.get(address)
    if (identities === undefined) {
      identities = new Map()
      pairs.set(address, identities)
    }
    const counter = identities.get(identity)
    if (counter !== undefined) {
      counter.n++
      if (denied) counter.denied++
    } else {
      identities.set(identity, { n: 1, denied: denied ? 1 : 0 })
      if (++batchPairs >= MAX_BATCH_KEYS) flush()
    }
  }

  /** The address and identity layers of a layered decision, as pairs for the abuse patterns. */
  function abusePairs(d: LayeredDecision, patterns: AbuseDetector): void {
    let address: string | undefined
    for (const r of d.results)
      if (patterns.kindOf(r.policy, r.key) === 'address') {
        address = r.key
        break
      }
    if (address === undefined) return
    for (const r of d.results)
      if (patterns.kindOf(r.policy, r.key) === 'identity') pair(address, r.key, !d.allowed)
  }

  const nearLimitKeys = new NearLimitKeys()
  /** The layers of `d` that crossed their nearLimit line, into the dashboard's list. */
  function nearLimitCrossed(d: Decision | LayeredDecision): void {
    const layers = 'results' in d ? d.results : [d]
    for (const r of layers)
      if (r.nearLimitCrossed === true)
        nearLimitKeys.crossed(r.policy, r.key, r.limit, r.remaining, now(), r.resetMs)
  }

  const listener = (event: DecisionEvent): void => {
    metrics.observe(event)
    let samples = latency.get(event.store)
    if (samples === undefined) {
      samples = new RecentSamples(1024)
      latency.set(event.store, samples)
    }
    samples.add(event.storeSeconds)
    if (event.operation === 'peek') return
    const d = event.decision
    // The clock is read only for a denial that applied a penalty (rare), never per decision.
    if (!d.allowed && (d.penalty !== undefined || ('results' in d && d.results.some((r) => r.penalty))))
      penalised.record(d, now())
    if (d.nearLimitCrossed === true || 'results' in d) nearLimitCrossed(d)
    if (abuse !== undefined && 'results' in d) abusePairs(d, abuse)
    const outcome = outcomeOf(d)
    // Same counting rule as sluice_decisions_total (see countedLayers), with keys for top-K.
    if (!('results' in d)) count(d.policy, d.key, outcome, d.allowed)
    else if (outcome === 'allowed')
      for (const r of (d as LayeredDecision).results) count(r.policy, r.key, outcome, true)
    else {
      const decider = d.results.find((r) => r.policy === d.deniedBy) ?? d
      count(decider.policy, decider.key, outcome, d.allowed)
    }
  }
  const unsubscribe = options.limiter.subscribe(listener)
  // Quiet intervals must close too, or a policy that went silent would never update its baseline.
  const flushMs = options.flushMs ?? 100
  const flushTimer = setInterval(() => {
    flush()
    const at = now()
    detector.tick(at)
    // Keys that fell below their threshold are re-armed even when no pair arrives.
    abuse?.check(at)
  }, flushMs)
  flushTimer.unref()

  function report(policy: string, side: 'denied' | 'admitted', at: number, k: number): TopKeysReport {
    const r = kept.get(policy)![side].report(at, k)
    return {
      policy,
      side,
      total: r.total,
      distinctKeys: r.distinctKeys,
      topOnePercentShare: r.topOnePercentShare,
      keys: r.top,
    }
  }

  function topKeys(
    opts: { policy?: string; side?: 'denied' | 'admitted'; k?: number } = {},
  ): TopKeysReport[] {
    flush()
    const at = now()
    const out: TopKeysReport[] = []
    for (const policy of series.policies()) {
      if (opts.policy !== undefined && opts.policy !== policy) continue
      for (const side of ['denied', 'admitted'] as const)
        if (opts.side === undefined || opts.side === side) out.push(report(policy, side, at, opts.k ?? 10))
    }
    return out
  }

  /**
   * The policies a snapshot lists: all of them, or the busiest of the last minute (the current
   * second included, so a burst shows at once), in first-seen order.
   */
  function listedPolicies(names: readonly string[], at: number): Set<string> {
    if (names.length <= dashboardPolicies) return new Set(names)
    const busiest = names
      .map((policy, order) => ({ policy, order, n: series.activity(policy, at) }))
      .sort((a, b) => b.n - a.n || a.order - b.order)
      .slice(0, dashboardPolicies)
    return new Set(busiest.map((b) => b.policy))
  }

  function snapshot(): DashboardSnapshot {
    flush()
    const at = now()
    let denied10 = 0
    let all10 = 0
    const names = series.policies()
    const listed = listedPolicies(names, at)
    const others: OtherPolicies = {
      count: names.length - listed.size,
      totals: EMPTY_TOTALS(),
      perSecond: EMPTY_TOTALS(),
      dropped: droppedPolicies,
    }
    const policies: PolicySnapshot[] = []
    for (const policy of names) {
      const totals = kept.get(policy)!.totals
      if (!listed.has(policy)) {
        for (const o of OUTCOMES) {
          others.totals[o] += totals[o]
          others.perSecond[o] += series.sum(policy, o, at, 1)
          all10 += series.sum(policy, o, at, 10)
        }
        denied10 += series.sum(policy, 'denied', at, 10)
        continue
      }
      const s = {
        allowed: series.read(policy, 'allowed', at),
        denied: series.read(policy, 'denied', at),
        degraded: series.read(policy, 'degraded', at),
      }
      const last = s.allowed.length - 1
      let d = 0
      let a = 0
      for (let i = Math.max(0, last - 9); i <= last; i++) {
        d += s.denied[i]!
        a += s.allowed[i]! + s.denied[i]! + s.degraded[i]!
      }
      denied10 += d
      all10 += a
      policies.push({
        policy,
        totals: { ...totals },
        perSecond: { allowed: s.allowed[last]!, denied: s.denied[last]!, degraded: s.degraded[last]! },
        deniedShare10s: a === 0 ? 0 : d / a,
        series: s,
      })
    }
    const health = new Map(metrics.storeHealth().map((h) => [h.store, h]))
    const storeNames = new Set([...latency.keys(), ...health.keys()])
    const stores: StoreSnapshot[] = [...storeNames].map((store) => {
      const samples = latency.get(store)
      const [p50, p99] = samples?.quantiles([0.5, 0.99]) ?? [null, null]
      return {
        ...(health.get(store) ?? { store, up: null, circuit: null, errors: 0 }),
        p50Ms: p50 == null ? null : p50 * 1000,
        p99Ms: p99 == null ? null : p99 * 1000,
        samples: samples?.count ?? 0,
      }
    })
    return {
      at,
      policies,
      otherPolicies: others,
      deniedShare10s: all10 === 0 ? 0 : denied10 / all10,
      stores,
      regions: metrics.regions(),
      topDenied: policies.map((p) => report(p.policy, 'denied', at, 10)),
      topAdmitted: policies.map((p) => report(p.policy, 'admitted', at, 10)),
      spikes: detector.recent().slice(0, 20),
      nearLimit: nearLimitKeys.list(at),
      abuse: abuse === undefined ? null : abuse.report(at, 10),
      overrides: overridesOf().slice(0, MAX_SHOWN_OVERRIDES),
      lists: listsSnapshot(options.limiter.policies),
      penalised: penalised.list(at, 20),
    }
  }

  let overridesOf: () => readonly Override[] = () => []
  const dashboard = createDashboard({
    path: options.dashboardPath ?? '/dashboard',
    intervalMs: options.pushIntervalMs ?? 1000,
    snapshot,
    ...(options.maxStreams === undefined ? {} : { maxStreams: options.maxStreams }),
    ...(options.maxStreamBufferBytes === undefined
      ? {}
      : { maxStreamBufferBytes: options.maxStreamBufferBytes }),
  })

  const metricsHandler: NodeHandler = (_req, res) => {
    metrics.registry.metrics().then(
      (text) => {
        res.writeHead(200, { 'content-type': metrics.registry.contentType, 'cache-control': 'no-store' })
        res.end(text)
      },
      (error: unknown) => {
        res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' })
        res.end(`metrics collection failed: ${String(error)}\n`)
      },
    )
  }

  return {
    metrics,
    metricsHandler,
    dashboardHandler: dashboard.handler,
    get dashboardStreams() {
      return dashboard.clients
    },
    topKeys,
    flush,
    spikes: () => {
      flush()
      return detector.recent()
    },
    onSpike: (l) => detector.onSpike(l),
    abuse: (opts = {}) => {
      flush()
      return abuse === undefined ? null : abuse.report(now(), opts.k ?? 10)
    },
    onAbuse: (l) => abuse?.onAbuse(l) ?? (() => {}),
    observePair(address, identity, denied = false) {
      if (abuse !== undefined) pair(address, identity, denied)
    },
    snapshot,
    watchOverrides(source) {
      if (typeof source !== 'function')
        throw new InvalidOptionsError('watchOverrides: pass a function returning the overrides in force')
      overridesOf = source
    },
    close() {
      unsubscribe()
      clearInterval(flushTimer)
      flush()
      dashboard.close()
    },
  }
}
