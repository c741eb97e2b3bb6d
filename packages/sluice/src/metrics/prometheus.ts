// Prometheus metrics (prom-client) fed by limiter decision events, plus a small input API for the
// parts of the limiter that report health rather than decisions (store errors, store up/down,
// circuit breaker, local deny cache). Label values are policy and store names only: never a key.

import type * as prom from 'prom-client'
import type { Counter, Gauge } from 'prom-client'
import { InvalidOptionsError } from '../errors.js'
import type { CircuitState } from '../failover/breaker.js'
import type { Decision, DecisionEvent, LayeredDecision } from '../limiter.js'
import { checkKnownKeys, keysOf } from '../options.js'
import type { HybridBackend } from '../scale/hybrid.js'
import { LEASE_SERIES, leaseTotals } from './hybrid-leases.js'
import { promClient } from './prom.js'

export type { CircuitState }

/** How a decision ended, as counted in `sluice_decisions_total{outcome}`. */
export type DecisionOutcome = 'allowed' | 'denied' | 'degraded'

/** The failover layer's circuit states; `sluice_circuit_state` exports them as 0, 1 and 2. */
const CIRCUIT_STATE_VALUE: Readonly<Record<CircuitState, number>> = {
  closed: 0,
  'half-open': 1,
  open: 2,
}

const OUTCOMES: readonly DecisionOutcome[] = ['allowed', 'denied', 'degraded']

/** Label value used once a label has seen `maxLabelValues` distinct values. */
const OTHER_LABEL = '_other'

export interface MetricsOptions {
  /** Where the metrics are registered. Default: a new Registry (not prom-client's global one). */
  registry?: prom.Registry
  /** Distinct values kept per label (policy, store, operation); more fold into `_other`. Default 100. */
  maxLabelValues?: number
  /** Buckets of `sluice_store_duration_seconds`, in seconds. */
  durationBuckets?: readonly number[]
  /** The limiter's `hybrid` backend (`hybridRedis(...)`): its policies' lease counts become `sluice_hybrid_*`. */
  hybrid?: Pick<HybridBackend, 'stats'>
}

export const METRICS_OPTION_KEYS = keysOf<MetricsOptions>({
  registry: true,
  maxLabelValues: true,
  durationBuckets: true,
  hybrid: true,
})

/**
 * One store as last reported through the input API (`setStoreUp`, `setCircuitState`,
 * `recordStoreError`); `limiter.health()` returns the failover layer's own `StoreHealth`.
 */
export interface ReportedStoreHealth {
  store: string
  /** `null` until `setStoreUp` was called for this store. */
  up: boolean | null
  /** `null` until `setCircuitState` was called for this store. */
  circuit: CircuitState | null
  errors: number
}

/** One region as `multiRegionStore`'s `regions()` reports it (the dashboard and two gauges show it). */
export interface RegionStatus {
  readonly region: string
  readonly local: boolean
  readonly stale: boolean
  /** ms since the last exchange with the region answered; `null` before the first. */
  readonly lastSyncAgeMs: number | null
}

/** One global policy's share in this region, as `multiRegionStore`'s `shares()` reports it. */
export interface PolicyShareStatus {
  /** The global policy's storage id (its name unless it has an `id`). */
  readonly policy: string
  /** This region's shares over the policy's tracked keys, over their limits (1 / regions when nothing moved). */
  readonly shareOfLimit: number
}

export interface SluiceMetrics {
  readonly registry: prom.Registry
  /** Count one decision event (what `limiter.subscribe` delivers). */
  observe(event: DecisionEvent): void
  /** The store failed one operation (connection lost, timeout, script error). */
  recordStoreError(store: string): void
  /** The store is reachable (`true`) or not (`false`). */
  setStoreUp(store: string, up: boolean): void
  /** The circuit breaker in front of `store` changed state. */
  setCircuitState(store: string, state: CircuitState): void
  /** A request was denied from the local deny cache without asking the store. */
  recordLocalCacheHit(policy: string): void
  /** Store health as reported so far, for the dashboard. */
  storeHealth(): ReportedStoreHealth[]
  /**
   * Read regions' freshness at every scrape from `source` (a multiRegionStore's `regions`):
   * `sluice_region_stale{region}` and `sluice_region_sync_age_seconds{region}`. One source; a new
   * call replaces it. createObservability does this for a limiter on a multiRegionStore.
   */
  watchRegions(source: () => readonly RegionStatus[]): void
  /** The regions as the source reports them now; empty without one. */
  regions(): RegionStatus[]
  /**
   * Read this region's share of each global policy at every scrape from `source` (a
   * multiRegionStore's `shares`): `sluice_region_share_ratio{policy}`, one series per policy, never
   * per key. One source; a new call replaces it. createObservability does this for a limiter on a
   * multiRegionStore.
   */
  watchShares(source: () => readonly PolicyShareStatus[]): void
}

const DEFAULT_BUCKETS = [
  0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1,
]

/**
 * The outcome of a decision. `degraded`: a decision made without the store's say: marked
 * `degraded: true` by the failover layer (fail-open admits, in-memory fallback), or denied with a
 * `reason` other than `limit`, `blocked` or `cost_above_capacity` (`store_unavailable`, fail-closed).
 */
export function outcomeOf(decision: Decision): DecisionOutcome {
  if (decision.degraded === true) return 'degraded'
  const reason: string | undefined = decision.reason
  if (reason !== undefined && reason !== 'limit' && reason !== 'blocked' && reason !== 'cost_above_capacity')
    return 'degraded'
  return decision.allowed ? 'allowed' : 'denied'
}

/**
 * The (policy, outcome) pairs one decision counts for. A plain decision counts once. A layered one
 * that passed counts as allowed under every layer (each was committed); a denied one counts as denied
 * under the layer that denied only (the others were not committed and did not decide).
 */
export function countedLayers(
  decision: Decision | LayeredDecision,
): { policy: string; outcome: DecisionOutcome }[] {
  const outcome = outcomeOf(decision)
  if (!('results' in decision)) return [{ policy: decision.policy, outcome }]
  if (outcome === 'allowed') return decision.results.map((r) => ({ policy: r.policy, outcome }))
  return [{ policy: decision.deniedBy ?? decision.policy, outcome }]
}

/** The policies one decision applied a penalty for: each layer's (or the decision's own) `penalty`. */
export function penalisedPolicies(decision: Decision | LayeredDecision): string[] {
  if (!('results' in decision)) return decision.penalty === undefined ? [] : [decision.policy]
  return decision.results.filter((r) => r.penalty !== undefined).map((r) => r.policy)
}

/** Keeps a label's values bounded: the first `max` distinct values pass, the rest become `_other`. */
function boundedLabel(max: number): (value: string) => string {
  const seen = new Set<string>()
  return (value) => {
    if (seen.has(value)) return value
    if (seen.size >= max) return OTHER_LABEL
    seen.add(value)
    return value
  }
}

/**
 * Create Sluice's Prometheus metrics in `registry` and return their inputs.
 * @example
 * const metrics = createMetrics()
 * limiter.subscribe(metrics.observe)
 * res.end(await metrics.registry.metrics())
 */
export function createMetrics(options: MetricsOptions = {}): SluiceMetrics {
  checkKnownKeys('createMetrics', options, METRICS_OPTION_KEYS)
  const client = promClient()
  const registry = options.registry ?? new client.Registry()
  const maxLabelValues = options.maxLabelValues ?? 100
  const policyLabel = boundedLabel(maxLabelValues)
  const storeLabel = boundedLabel(maxLabelValues)
  const registers = [registry]

  // The hot path only adds to plain numbers; prom-client reads them when scraped. (A prom-client
  // child's inc/observe validates and hashes labels on every call: ~20x a Map update, measured in
  // bench/cases/metrics.ts.)
  // Keyed by the policy name as given (no string building on the hot path: a concatenated key costs
  // more than everything else here together); several names may share one folded label.
  const decisionCounts = new Map<string, { label: string; counts: Record<DecisionOutcome, number> }>()
  const publishedDecisions = new Map<string, Record<DecisionOutcome, number>>()
  // Past this many names (a flood of new policy names, such as Envoy's per-request limits), a name
  // that folds into _other is counted in one shared entry instead of one of its own.
  const maxNamedCounts = maxLabelValues * 4
  const OTHER_NAMES = '\u0000other'
  const cacheHitCounts = new Map<string, { count: number; published: number }>()
  new client.Counter<'policy' | 'outcome'>({
    name: 'sluice_decisions_total',
    help: 'Rate limit decisions by policy and outcome (allowed, denied, degraded).',
    labelNames: ['policy', 'outcome'],
    registers,
    collect() {
      for (const [policy, c] of decisionCounts) {
        let published = publishedDecisions.get(policy)
        if (published === undefined) {
          published = { allowed: 0, denied: 0, degraded: 0 }
          publishedDecisions.set(policy, published)
        }
        for (const outcome of OUTCOMES) {
          const delta = c.counts[outcome] - published[outcome]
          if (delta > 0) this.labels(c.label, outcome).inc(delta)
          published[outcome] = c.counts[outcome]
        }
      }
    },
  })
  const storeDuration = new PulledHistogram(
    'sluice_store_duration_seconds',
    'Time the store took to decide, by store and operation (consume, peek, acquire).',
    [...(options.durationBuckets ?? DEFAULT_BUCKETS)],
  )
  registry.registerMetric(storeDuration as unknown as prom.Metric)
  const storeErrors: Counter<'store'> = new client.Counter({
    name: 'sluice_store_errors_total',
    help: 'Store operations that failed (connection lost, timeout, script error).',
    labelNames: ['store'],
    registers,
  })
  const storeUp: Gauge<'store'> = new client.Gauge({
    name: 'sluice_store_up',
    help: '1 when the store is reachable, 0 when not.',
    labelNames: ['store'],
    registers,
  })
  new client.Counter({
    name: 'sluice_local_cache_hits_total',
    help: 'Requests denied from the local deny cache without a store round trip.',
    labelNames: ['policy'],
    registers,
    collect() {
      for (const [policy, c] of cacheHitCounts) {
        if (c.count > c.published) this.labels(policy).inc(c.count - c.published)
        c.published = c.count
      }
    },
  })
  // Hybrid leases: read from the backend's counts when scraped, published as deltas.
  const hybrid = options.hybrid
  if (hybrid !== undefined) {
    const published = new Map<string, number>()
    const publish = (counter: Counter<'policy' | 'kind'>, policy: string, kind: string, total: number) => {
      const id = `${policy}\u0000${kind}`
      const before = published.get(id) ?? 0
      // Every kind is published from the first scrape, 0 included, so a rate of it exists.
      if (total > before || !published.has(id)) counter.labels(policyLabel(policy), kind).inc(total - before)
      published.set(id, total)
    }
    for (const [series, name, help] of [
      [
        'leases',
        'sluice_hybrid_leases_total',
        'Hybrid leases by policy: taken, and ended (used up, timed out or closed).',
      ],
      [
        'units',
        'sluice_hybrid_lease_units_total',
        'Units of hybrid leases by policy: leased, spent, returned unspent, lost (a failed return), under_admitted (returned from a lease during which the key was denied).',
      ],
    ] as const)
      new client.Counter<'policy' | 'kind'>({
        name,
        help,
        labelNames: ['policy', 'kind'],
        registers,
        collect() {
          for (const [policy, stats] of leaseTotals(hybrid))
            for (const [kind, field] of Object.entries(LEASE_SERIES[series]))
              publish(this, policy, kind, stats[field])
        },
      })
  }
  const penaltyCounts = new Map<string, { count: number; published: number }>()
  new client.Counter({
    name: 'sluice_penalties_total',
    help: 'Escalating penalties applied (keys blocked by a policy with penalty), by policy.',
    labelNames: ['policy'],
    registers,
    collect() {
      for (const [policy, c] of penaltyCounts) {
        if (c.count > c.published) this.labels(policy).inc(c.count - c.published)
        c.published = c.count
      }
    },
  })
  // Crossings of a policy's near-limit line, by policy label; published as the decisions are.
  const nearLimitCounts = new Map<string, { count: number; published: number }>()
  new client.Counter({
    name: 'sluice_near_limit_crossings_total',
    help: "Decisions that took a key across its policy's nearLimit line, by policy.",
    labelNames: ['policy'],
    registers,
    collect() {
      for (const [policy, c] of nearLimitCounts) {
        if (c.count > c.published) this.labels(policy).inc(c.count - c.published)
        c.published = c.count
      }
    },
  })
  const circuitState: Gauge<'store'> = new client.Gauge({
    name: 'sluice_circuit_state',
    help: 'Circuit breaker state per store: 0 closed, 1 half-open, 2 open.',
    labelNames: ['store'],
    registers,
  })

  let regionSource: (() => readonly RegionStatus[]) | undefined
  const regions = (): RegionStatus[] =>
    regionSource === undefined ? [] : regionSource().map((r) => ({ ...r }))
  new client.Gauge({
    name: 'sluice_region_stale',
    help: 'multiRegionStore: 1 when the region has not been synced for longer than staleAfter, else 0.',
    labelNames: ['region'],
    registers,
    collect() {
      this.reset()
      for (const r of regions()) this.labels(r.region).set(r.stale ? 1 : 0)
    },
  })
  new client.Gauge({
    name: 'sluice_region_sync_age_seconds',
    help: 'multiRegionStore: seconds since the last exchange with the region answered (absent before the first).',
    labelNames: ['region'],
    registers,
    collect() {
      this.reset()
      for (const r of regions())
        if (r.lastSyncAgeMs !== null) this.labels(r.region).set(r.lastSyncAgeMs / 1000)
    },
  })

  // Shares of global policies (multiRegionStore), one block: the gauge reads its source at each scrape.
  let shareSource: (() => readonly PolicyShareStatus[]) | undefined
  new client.Gauge({
    name: 'sluice_region_share_ratio',
    help: "multiRegionStore: this region's share of a global policy's limit, over the keys it tracks (1 / regions when nothing moved).",
    labelNames: ['policy'],
    registers,
    collect() {
      this.reset()
      for (const s of shareSource?.() ?? []) this.labels(s.policy).set(s.shareOfLimit)
    },
  })

  const health = new Map<string, ReportedStoreHealth>()

  function healthOf(store: string): ReportedStoreHealth {
    let h = health.get(store)
    if (h === undefined) {
      h = { store, up: null, circuit: null, errors: 0 }
      health.set(store, h)
    }
    return h
  }

  function countDecision(policy: string, outcome: DecisionOutcome): void {
    let c = decisionCounts.get(policy)
    if (c === undefined) {
      const label = policyLabel(policy)
      const name = label === OTHER_LABEL && decisionCounts.size >= maxNamedCounts ? OTHER_NAMES : policy
      c = decisionCounts.get(name)
      if (c === undefined) {
        c = { label, counts: { allowed: 0, denied: 0, degraded: 0 } }
        decisionCounts.set(name, c)
      }
    }
    c.counts[outcome]++
  }

  function recordLocalCacheHit(policy: string): void {
    const label = policyLabel(policy)
    const c = cacheHitCounts.get(label)
    if (c !== undefined) c.count++
    else cacheHitCounts.set(label, { count: 1, published: 0 })
  }

  function countNearLimitCrossing(policy: string): void {
    const label = policyLabel(policy)
    const c = nearLimitCounts.get(label)
    if (c !== undefined) c.count++
    else nearLimitCounts.set(label, { count: 1, published: 0 })
  }

  function observe(event: DecisionEvent): void {
    if (event.cached) {
      // Answered by the local deny cache: no store call to time, one cache hit per denying layer.
      const d = event.decision
      recordLocalCacheHit('deniedBy' in d && d.deniedBy !== undefined ? d.deniedBy : d.policy)
    } else storeDuration.observe(event.store, event.operation, event.storeSeconds, storeLabel)
    // A peek commits nothing and decides nothing: it is timed, not counted as a decision.
    if (event.operation === 'peek') return
    const d = event.decision
    if (!('results' in d)) {
      countDecision(d.policy, outcomeOf(d))
      if (d.nearLimitCrossed === true) countNearLimitCrossing(d.policy)
    } else {
      for (const { policy, outcome } of countedLayers(d)) countDecision(policy, outcome)
      for (const layer of d.results) if (layer.nearLimitCrossed === true) countNearLimitCrossing(layer.policy)
    }
    if (!d.allowed) for (const policy of penalisedPolicies(d)) countPenalty(policy)
  }

  function countPenalty(policy: string): void {
    const label = policyLabel(policy)
    const c = penaltyCounts.get(label)
    if (c !== undefined) c.count++
    else penaltyCounts.set(label, { count: 1, published: 0 })
  }

  return {
    registry,
    observe,
    recordStoreError(store) {
      const label = storeLabel(store)
      storeErrors.labels(label).inc()
      healthOf(label).errors++
    },
    setStoreUp(store, up) {
      const label = storeLabel(store)
      storeUp.labels(label).set(up ? 1 : 0)
      healthOf(label).up = up
    },
    setCircuitState(store, state) {
      const value = CIRCUIT_STATE_VALUE[state]
      if (value === undefined) {
        throw new InvalidOptionsError(
          `setCircuitState: state must be closed, half-open or open, got ${JSON.stringify(state)}`,
        )
      }
      const label = storeLabel(store)
      circuitState.labels(label).set(value)
      healthOf(label).circuit = state
    },
    recordLocalCacheHit,
    storeHealth() {
      return [...health.values()].map((h) => ({ ...h }))
    },
    watchRegions(source) {
      if (typeof source !== 'function')
        throw new InvalidOptionsError('watchRegions: pass a function returning the regions (store.regions)')
      regionSource = source
    },
    regions,
    watchShares(source) {
      if (typeof source !== 'function')
        throw new InvalidOptionsError('watchShares: pass a function returning the shares (store.shares)')
      shareSource = source
    },
  }
}

/** One exposition line as prom-client's registry formats it (its typings call the type an enum; it is a string). */
interface PulledValue {
  metricName: string
  labels: Record<string, string | number>
  value: number
}

interface Series {
  labels: { store: string; operation: string }
  /** Per bucket (not cumulative); the last slot is above every bound. */
  buckets: Float64Array
  sum: number
  count: number
}

/**
 * A histogram by store and operation whose samples land in plain arrays and that prom-client reads
 * at scrape time (the registry only needs `name`, `help`, `type`, `get()` and `reset()`). The
 * exposition is the same as a prom-client Histogram's.
 */
class PulledHistogram {
  readonly type = 'histogram'
  readonly aggregator = 'sum'
  /** By store name as given, then operation; folded store names share one Series. */
  private series = new Map<string, Map<string, Series>>()

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly bounds: readonly number[],
  ) {}

  observe(store: string, operation: string, seconds: number, label: (store: string) => string): void {
    let byOperation = this.series.get(store)
    if (byOperation === undefined) {
      const labelled = label(store)
      byOperation = this.series.get(labelled) ?? new Map()
      this.series.set(store, byOperation)
      this.series.set(labelled, byOperation)
    }
    let s = byOperation.get(operation)
    if (s === undefined) {
      s = {
        labels: { store: label(store), operation },
        buckets: new Float64Array(this.bounds.length + 1),
        sum: 0,
        count: 0,
      }
      byOperation.set(operation, s)
    }
    let i = 0
    while (i < this.bounds.length && seconds > this.bounds[i]!) i++
    s.buckets[i]!++
    s.sum += seconds
    s.count++
  }

  async get(): Promise<{
    name: string
    help: string
    type: string
    aggregator: string
    values: PulledValue[]
  }> {
    const values: PulledValue[] = []
    const all = new Set<Series>()
    for (const byOperation of this.series.values()) for (const s of byOperation.values()) all.add(s)
    for (const s of all) {
      let cumulative = 0
      this.bounds.forEach((bound, i) => {
        cumulative += s.buckets[i]!
        values.push({
          metricName: `${this.name}_bucket`,
          labels: { ...s.labels, le: bound },
          value: cumulative,
        })
      })
      values.push(
        { metricName: `${this.name}_bucket`, labels: { ...s.labels, le: '+Inf' }, value: s.count },
        { metricName: `${this.name}_sum`, labels: s.labels, value: s.sum },
        { metricName: `${this.name}_count`, labels: s.labels, value: s.count },
      )
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values }
  }

  reset(): void {
    this.series = new Map()
  }
}
