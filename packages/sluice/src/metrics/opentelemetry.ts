// Decision metrics and spans through the caller's OpenTelemetry Meter and Tracer, fed by limiter
// decision events. Typed structurally so that this module, and the library, import nothing from
// @opentelemetry: the caller brings the API and the SDK.

import { InvalidOptionsError } from '../errors.js'
import type { DecisionEvent } from '../limiter.js'
import { checkKnownKeys, keysOf } from '../options.js'
import type { HybridBackend } from '../scale/hybrid.js'
import { LEASE_SERIES, leaseTotals } from './hybrid-leases.js'
import type { DecisionOutcome } from './prometheus.js'
import { countedLayers, outcomeOf, penalisedPolicies } from './prometheus.js'

/** An attribute value as OpenTelemetry takes it. */
export type OtelAttributeValue = string | number | boolean | string[]
export type OtelAttributes = Record<string, OtelAttributeValue>

/** The part of an OpenTelemetry `Histogram` Sluice uses. */
export interface OtelHistogramLike {
  record(value: number, attributes?: OtelAttributes): void
}

/** The part of an OpenTelemetry `ObservableResult` Sluice uses. */
export interface OtelObservableResultLike {
  observe(value: number, attributes?: OtelAttributes): void
}

/** The part of an OpenTelemetry `ObservableCounter` Sluice uses. */
export interface OtelObservableCounterLike {
  addCallback(callback: (result: OtelObservableResultLike) => void): void
}

/** The part of an OpenTelemetry `Meter` (`metrics.getMeter('sluice')`) Sluice uses. */
export interface OtelMeterLike {
  createObservableCounter(
    name: string,
    options?: { description?: string; unit?: string },
  ): OtelObservableCounterLike
  createHistogram(
    name: string,
    options?: { description?: string; unit?: string; advice?: { explicitBucketBoundaries?: number[] } },
  ): OtelHistogramLike
}

/** The part of an OpenTelemetry `Span` Sluice uses. */
export interface OtelSpanLike {
  end(endTime?: number): void
}

/**
 * The part of an OpenTelemetry `Tracer` (`trace.getTracer('sluice')`) Sluice uses. Spans start in
 * the active context, so a decision made inside a traced request joins that request's trace.
 */
export interface OtelTracerLike {
  startSpan(name: string, options?: { attributes?: OtelAttributes; startTime?: number }): OtelSpanLike
}

export interface OpenTelemetryOptions {
  /** Where `sluice.decisions`, `sluice.store.duration`, `sluice.local_cache.hits`, `sluice.penalties` and `sluice.near_limit.crossings` are recorded. */
  meter?: OtelMeterLike
  /** Where each decision becomes a `sluice.decision` span. */
  tracer?: OtelTracerLike
  /** Subscribe to this limiter (or anything with `subscribe`) now; or feed `observe` yourself. */
  limiter?: { subscribe(listener: (event: DecisionEvent) => void): () => void }
  /** Distinct policy and store names kept as attribute values; more fold into `_other`. Default 100. */
  maxLabelValues?: number
  /** The limiter's `hybrid` backend (`hybridRedis(...)`): its lease counts become `sluice.hybrid.*`. */
  hybrid?: Pick<HybridBackend, 'stats'>
}

const OPTION_KEYS = keysOf<OpenTelemetryOptions>({
  meter: true,
  tracer: true,
  limiter: true,
  maxLabelValues: true,
  hybrid: true,
})

export interface SluiceOpenTelemetry {
  /** Record one decision event (what `limiter.subscribe` delivers). */
  observe(event: DecisionEvent): void
  /** Stop listening to the limiter given as `limiter` (the Meter and Tracer stay the caller's). */
  close(): void
}

/** Store latency buckets in seconds: decisions take microseconds in memory, milliseconds over a network. */
const DURATION_BUCKETS = [
  0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1,
]

const OTHER_LABEL = '_other'
const OUTCOMES: readonly DecisionOutcome[] = ['allowed', 'denied', 'degraded']
const HIT: readonly 'hit'[] = ['hit']
const PENALTY: readonly 'penalty'[] = ['penalty']
const CROSSING: readonly 'crossing'[] = ['crossing']

/** Totals of one attribute set per kind (outcome), with the attributes they are observed under. */
interface Counted<K extends string> {
  counts: Record<K, number>
  attributes: Record<K, OtelAttributes>
}

/** The first `max` distinct values pass as they are, the rest become `_other`. */
function boundedLabel(max: number): (value: string) => string {
  const seen = new Set<string>()
  return (value) => {
    if (seen.has(value)) return value
    if (seen.size >= max) return OTHER_LABEL
    seen.add(value)
    return value
  }
}

/** Wall-clock milliseconds with sub-millisecond precision (what a span's startTime takes). */
const nowMs = (): number => performance.timeOrigin + performance.now()

/**
 * Record Sluice's decisions through OpenTelemetry: counters and a store latency histogram on
 * `meter`, one span per decision on `tracer` (either may be left out). Attribute values are policy
 * and store names, never a key.
 * @example
 * const telemetry = createOpenTelemetry({
 *   meter: metrics.getMeter('sluice'),
 *   tracer: trace.getTracer('sluice'),
 *   limiter,
 * })
 */
export function createOpenTelemetry(options: OpenTelemetryOptions): SluiceOpenTelemetry {
  checkKnownKeys('createOpenTelemetry', options, OPTION_KEYS)
  const { meter, tracer, limiter } = options
  if (meter === undefined && tracer === undefined)
    throw new InvalidOptionsError('createOpenTelemetry: pass a meter, a tracer, or both')
  if (meter !== undefined && typeof meter.createObservableCounter !== 'function')
    throw new InvalidOptionsError(
      'createOpenTelemetry: meter must be an OpenTelemetry Meter (metrics.getMeter)',
    )
  if (tracer !== undefined && typeof tracer.startSpan !== 'function')
    throw new InvalidOptionsError(
      'createOpenTelemetry: tracer must be an OpenTelemetry Tracer (trace.getTracer)',
    )
  const maxLabelValues = options.maxLabelValues ?? 100
  if (!Number.isInteger(maxLabelValues) || maxLabelValues < 1)
    throw new InvalidOptionsError(
      `createOpenTelemetry: maxLabelValues must be a whole number of at least 1, got ${String(maxLabelValues)}`,
    )
  const policyLabel = boundedLabel(maxLabelValues)
  const storeLabel = boundedLabel(maxLabelValues)

  // The counters are observable: a decision adds to a plain number, and the SDK reads the totals
  // when it collects (its Counter.add hashes the attributes on every call, measured several times
  // the limiter's own decision). The histogram has no observable form: one record per store call.
  /** Counts per policy as given; folded names share the `_other` entry. */
  const decisionCounts = new Map<string, Counted<DecisionOutcome>>()
  const cacheHitCounts = new Map<string, Counted<'hit'>>()
  meter
    ?.createObservableCounter('sluice.decisions', {
      description: 'Rate limit decisions by policy and outcome (allowed, denied, degraded).',
      unit: '{decision}',
    })
    .addCallback((result) => {
      for (const c of new Set(decisionCounts.values()))
        for (const outcome of OUTCOMES)
          if (c.counts[outcome] > 0) result.observe(c.counts[outcome], c.attributes[outcome])
    })
  meter
    ?.createObservableCounter('sluice.local_cache.hits', {
      description: 'Requests denied from the local deny cache without a store round trip.',
      unit: '{request}',
    })
    .addCallback((result) => {
      for (const c of new Set(cacheHitCounts.values())) result.observe(c.counts.hit, c.attributes.hit)
    })
  // Hybrid leases: totals read from the backend's counts when the SDK collects.
  const hybrid = options.hybrid
  if (hybrid !== undefined)
    for (const [series, name, description, unit] of [
      ['leases', 'sluice.hybrid.leases', 'Hybrid leases by policy: taken, and ended.', '{lease}'],
      [
        'units',
        'sluice.hybrid.lease_units',
        'Units of hybrid leases by policy: leased, spent, returned, lost, under_admitted.',
        '{unit}',
      ],
    ] as const)
      meter?.createObservableCounter(name, { description, unit }).addCallback((result) => {
        for (const [policy, stats] of leaseTotals(hybrid))
          for (const [kind, field] of Object.entries(LEASE_SERIES[series]))
            result.observe(stats[field], { 'sluice.policy': policyLabel(policy), 'sluice.lease.kind': kind })
      })
  const penaltyCounts = new Map<string, Counted<'penalty'>>()
  meter
    ?.createObservableCounter('sluice.penalties', {
      description: 'Escalating penalties applied (keys blocked by a policy with penalty), by policy.',
      unit: '{penalty}',
    })
    .addCallback((result) => {
      for (const c of new Set(penaltyCounts.values())) result.observe(c.counts.penalty, c.attributes.penalty)
    })
  const nearLimitCounts = new Map<string, Counted<'crossing'>>()
  meter
    ?.createObservableCounter('sluice.near_limit.crossings', {
      description: "Decisions that took a key across its policy's nearLimit line, by policy.",
      unit: '{decision}',
    })
    .addCallback((result) => {
      for (const c of new Set(nearLimitCounts.values()))
        result.observe(c.counts.crossing, c.attributes.crossing)
    })
  const storeDuration = meter?.createHistogram('sluice.store.duration', {
    description: 'Time the store took to decide, by store and operation (consume, peek, acquire).',
    unit: 's',
    advice: { explicitBucketBoundaries: DURATION_BUCKETS },
  })

  /** The counts of `policy`; a name past `maxLabelValues` shares the `_other` entry. */
  function countedOf<K extends string>(
    counted: Map<string, Counted<K>>,
    policy: string,
    kinds: readonly K[],
    attributes: (label: string, kind: K) => OtelAttributes,
  ): Counted<K> {
    let c = counted.get(policy)
    if (c !== undefined) return c
    const label = policyLabel(policy)
    c = counted.get(label)
    if (c === undefined) {
      c = { counts: {} as Record<K, number>, attributes: {} as Record<K, OtelAttributes> }
      for (const kind of kinds) {
        c.counts[kind] = 0
        c.attributes[kind] = attributes(label, kind)
      }
      counted.set(label, c)
    }
    // A folded name is not kept under its own name: a flood of new names must not grow the map.
    return c
  }
  const decisionAttributes = (label: string, outcome: DecisionOutcome): OtelAttributes => ({
    'sluice.policy': label,
    'sluice.outcome': outcome,
  })
  const cacheAttributes = (label: string): OtelAttributes => ({ 'sluice.policy': label })

  // Attribute objects of the histogram are made once per (store, operation) and reused.
  const durationAttributes = new Map<string, Map<string, OtelAttributes>>()
  function durationAttributesOf(store: string, operation: string): OtelAttributes {
    let byOperation = durationAttributes.get(store)
    if (byOperation === undefined) {
      byOperation = new Map()
      durationAttributes.set(store, byOperation)
    }
    let attributes = byOperation.get(operation)
    if (attributes === undefined) {
      attributes = { 'sluice.store': storeLabel(store), 'sluice.operation': operation }
      byOperation.set(operation, attributes)
    }
    return attributes
  }

  function record(event: DecisionEvent): void {
    const d = event.decision
    if (event.cached) {
      const policy = 'deniedBy' in d && d.deniedBy !== undefined ? d.deniedBy : d.policy
      countedOf(cacheHitCounts, policy, HIT, cacheAttributes).counts.hit++
    } else storeDuration?.record(event.storeSeconds, durationAttributesOf(event.store, event.operation))
    // A peek commits nothing and decides nothing: timed, not counted (as in sluice_decisions_total).
    if (event.operation === 'peek') return
    if (!('results' in d)) {
      countedOf(decisionCounts, d.policy, OUTCOMES, decisionAttributes).counts[outcomeOf(d)]++
      if (d.nearLimitCrossed === true)
        countedOf(nearLimitCounts, d.policy, CROSSING, cacheAttributes).counts.crossing++
    } else {
      for (const { policy, outcome } of countedLayers(d))
        countedOf(decisionCounts, policy, OUTCOMES, decisionAttributes).counts[outcome]++
      for (const layer of d.results)
        if (layer.nearLimitCrossed === true)
          countedOf(nearLimitCounts, layer.policy, CROSSING, cacheAttributes).counts.crossing++
    }
    if (!d.allowed)
      for (const policy of penalisedPolicies(d))
        countedOf(penaltyCounts, policy, PENALTY, cacheAttributes).counts.penalty++
  }

  function span(event: DecisionEvent): void {
    const d = event.decision
    const end = nowMs()
    const storeMs = event.storeSeconds * 1000
    const attributes: OtelAttributes = {
      'sluice.policy': 'deniedBy' in d && d.deniedBy !== undefined ? d.deniedBy : d.policy,
      'sluice.outcome': outcomeOf(d),
      'sluice.operation': event.operation,
      'sluice.store': event.store,
      'sluice.store.duration_ms': storeMs,
      'sluice.cached': event.cached === true,
      'sluice.degraded': d.degraded === true,
      'sluice.allowed': d.allowed,
    }
    if (d.reason !== undefined) attributes['sluice.reason'] = d.reason
    if ('results' in d) attributes['sluice.policies'] = d.results.map((r) => r.policy)
    // The event comes once the decision is made: the span covers the store's time, ending now.
    tracer!.startSpan('sluice.decision', { attributes, startTime: end - storeMs }).end(end)
  }

  const observe =
    tracer === undefined
      ? record
      : meter === undefined
        ? span
        : (event: DecisionEvent) => {
            record(event)
            span(event)
          }
  const unsubscribe = limiter?.subscribe(observe)
  return {
    observe,
    close() {
      unsubscribe?.()
    },
  }
}
