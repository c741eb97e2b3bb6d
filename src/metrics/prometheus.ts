// Prometheus metrics (prom-client) fed by limiter decision events, plus a small input API for the
// parts of the limiter that report health rather than decisions (store errors, store up/down,
// circuit breaker, local deny cache). Label values are policy and store names only: never a key.
import type { Counter, Gauge, Histogram } from 'prom-client'
import * as prom from 'prom-client'
import { InvalidOptionsError } from '../errors.js'
import type { Decision, DecisionEvent, LayeredDecision } from '../limiter.js'

/** How a decision ended, as counted in `sluice_decisions_total{outcome}`. */
export type Outcome = 'allowed' | 'denied' | 'degraded'

/** Circuit breaker states; `sluice_circuit_state` exports them as 0, 1 and 2. */
export type CircuitState = 'closed' | 'half-open' | 'open'

export const CIRCUIT_STATE_VALUE: Readonly<Record<CircuitState, number>> = {
  closed: 0,
  'half-open': 1,
  open: 2,
}

/** Label value used once a label has seen `maxLabelValues` distinct values. */
export const OTHER_LABEL = '_other'

export interface MetricsOptions {
  /** Where the metrics are registered. Default: a new Registry (not prom-client's global one). */
  registry?: prom.Registry
  /** Distinct values kept per label (policy, store, operation); more fold into `_other`. Default 100. */
  maxLabelValues?: number
  /** Buckets of `sluice_store_duration_seconds`, in seconds. */
  durationBuckets?: readonly number[]
}

/** The health of one store as last reported through the input API. */
export interface StoreHealth {
  store: string
  /** `null` until `setStoreUp` was called for this store. */
  up: boolean | null
  /** `null` until `setCircuitState` was called for this store. */
  circuit: CircuitState | null
  errors: number
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
  storeHealth(): StoreHealth[]
}

const DEFAULT_BUCKETS = [
  0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1,
]

/**
 * The outcome of a decision. `degraded`: a decision made without the store's say (the failure
 * handling work marks these with a `reason` other than `limit` or `blocked`, e.g. `store_unavailable`).
 */
export function outcomeOf(decision: Decision): Outcome {
  const reason: string | undefined = decision.reason
  if (reason !== undefined && reason !== 'limit' && reason !== 'blocked') return 'degraded'
  return decision.allowed ? 'allowed' : 'denied'
}

/**
 * The (policy, outcome) pairs one decision counts for. A plain decision counts once. A layered one
 * that passed counts as allowed under every layer (each was charged); a denied one counts as denied
 * under the layer that denied only (the others were not charged and did not decide).
 */
export function countedLayers(decision: Decision | LayeredDecision): { policy: string; outcome: Outcome }[] {
  const outcome = outcomeOf(decision)
  if (!('results' in decision)) return [{ policy: decision.policy, outcome }]
  if (outcome === 'allowed') return decision.results.map((r) => ({ policy: r.policy, outcome }))
  return [{ policy: decision.deniedBy ?? decision.policy, outcome }]
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
  const registry = options.registry ?? new prom.Registry()
  const maxLabelValues = options.maxLabelValues ?? 100
  const policyLabel = boundedLabel(maxLabelValues)
  const storeLabel = boundedLabel(maxLabelValues)
  const registers = [registry]

  const decisions: Counter<'policy' | 'outcome'> = new prom.Counter({
    name: 'sluice_decisions_total',
    help: 'Rate limit decisions by policy and outcome (allowed, denied, degraded).',
    labelNames: ['policy', 'outcome'],
    registers,
  })
  const storeDuration: Histogram<'store' | 'operation'> = new prom.Histogram({
    name: 'sluice_store_duration_seconds',
    help: 'Time the store took to decide, by store and operation (consume, peek, acquire).',
    labelNames: ['store', 'operation'],
    buckets: [...(options.durationBuckets ?? DEFAULT_BUCKETS)],
    registers,
  })
  const storeErrors: Counter<'store'> = new prom.Counter({
    name: 'sluice_store_errors_total',
    help: 'Store operations that failed (connection lost, timeout, script error).',
    labelNames: ['store'],
    registers,
  })
  const storeUp: Gauge<'store'> = new prom.Gauge({
    name: 'sluice_store_up',
    help: '1 when the store is reachable, 0 when not.',
    labelNames: ['store'],
    registers,
  })
  const localCacheHits: Counter<'policy'> = new prom.Counter({
    name: 'sluice_local_cache_hits_total',
    help: 'Requests denied from the local deny cache without a store round trip.',
    labelNames: ['policy'],
    registers,
  })
  const circuitState: Gauge<'store'> = new prom.Gauge({
    name: 'sluice_circuit_state',
    help: 'Circuit breaker state per store: 0 closed, 1 half-open, 2 open.',
    labelNames: ['store'],
    registers,
  })

  // Label children cached by name: the hot path does a Map lookup and an add, no label hashing.
  const decisionChildren = new Map<string, prom.Counter.Internal>()
  const durationChildren = new Map<string, prom.Histogram.Internal<'store' | 'operation'>>()
  const health = new Map<string, StoreHealth>()

  function healthOf(store: string): StoreHealth {
    let h = health.get(store)
    if (h === undefined) {
      h = { store, up: null, circuit: null, errors: 0 }
      health.set(store, h)
    }
    return h
  }

  function countDecision(policy: string, outcome: Outcome): void {
    const id = `${policy}\u0000${outcome}`
    let child = decisionChildren.get(id)
    if (child === undefined) {
      child = decisions.labels(policyLabel(policy), outcome)
      decisionChildren.set(id, child)
    }
    child.inc()
  }

  function observe(event: DecisionEvent): void {
    const id = `${event.store}\u0000${event.operation}`
    let child = durationChildren.get(id)
    if (child === undefined) {
      child = storeDuration.labels(storeLabel(event.store), event.operation)
      durationChildren.set(id, child)
    }
    child.observe(event.storeSeconds)
    // A peek charges nothing and decides nothing: it is timed, not counted as a decision.
    if (event.operation === 'peek') return
    for (const { policy, outcome } of countedLayers(event.decision)) countDecision(policy, outcome)
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
    recordLocalCacheHit(policy) {
      localCacheHits.labels(policyLabel(policy)).inc()
    },
    storeHealth() {
      return [...health.values()].map((h) => ({ ...h }))
    },
  }
}
