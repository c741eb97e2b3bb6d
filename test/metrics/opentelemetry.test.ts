// createOpenTelemetry against the real OpenTelemetry SDK with its in-memory exporters: the metrics
// it records, the span per decision and its attributes, and a span joining the active trace.
import { context, ROOT_CONTEXT, TraceFlags, trace } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import type { MetricData } from '@opentelemetry/sdk-metrics'
import {
  AggregationTemporality,
  DataPointType,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics'
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SluiceError } from '../../packages/sluice/src/errors.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { createOpenTelemetry } from '../../packages/sluice/src/metrics/index.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'

function sdk() {
  const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
  // The interval never fires within a test: forceFlush exports.
  const reader = new PeriodicExportingMetricReader({
    exporter: metricExporter,
    exportIntervalMillis: 3_600_000,
  })
  const meterProvider = new MeterProvider({ readers: [reader] })
  const spanExporter = new InMemorySpanExporter()
  const tracerProvider = new TracerProvider({
    spanProcessors: [new SimpleSpanProcessor({ exporter: spanExporter })],
  })
  return {
    meter: meterProvider.getMeter('sluice-test'),
    tracer: tracerProvider.getTracer('sluice-test'),
    spans: () => spanExporter.getFinishedSpans(),
    async metrics(): Promise<MetricData[]> {
      await reader.forceFlush()
      const batches = metricExporter.getMetrics()
      return batches.at(-1)?.scopeMetrics.flatMap((s) => s.metrics) ?? []
    },
    async close() {
      await Promise.all([meterProvider.shutdown(), tracerProvider.shutdown()])
    },
  }
}

function limiterFor() {
  return createLimiter({
    store: memoryStore(),
    policies: {
      api: { algorithm: 'fixed-window', limit: 2, window: '1m' },
      perIp: { algorithm: 'fixed-window', limit: 100, window: '1m' },
    },
  })
}

/** The sum's value at the point whose attributes include `attributes`, or undefined. */
function sumAt(metrics: MetricData[], name: string, attributes: Record<string, string>): number | undefined {
  const metric = metrics.find((m) => m.descriptor.name === name)
  if (metric === undefined || metric.dataPointType !== DataPointType.SUM) return undefined
  const point = metric.dataPoints.find((p) =>
    Object.entries(attributes).every(([k, v]) => p.attributes[k] === v),
  )
  return point?.value as number | undefined
}

describe('createOpenTelemetry with the OpenTelemetry SDK', () => {
  const contextManager = new AsyncLocalStorageContextManager()
  beforeAll(() => {
    contextManager.enable()
    context.setGlobalContextManager(contextManager)
  })
  afterAll(() => {
    context.disable()
  })

  it('counts decisions by policy and outcome and times the store, never naming a key', async () => {
    const otel = sdk()
    const limiter = limiterFor()
    const telemetry = createOpenTelemetry({ meter: otel.meter, limiter })
    for (let i = 0; i < 3; i++) await limiter.consume('api', 'user-secret-42')
    await limiter.peek('api', 'user-secret-42')
    const metrics = await otel.metrics()
    expect(sumAt(metrics, 'sluice.decisions', { 'sluice.policy': 'api', 'sluice.outcome': 'allowed' })).toBe(
      2,
    )
    expect(sumAt(metrics, 'sluice.decisions', { 'sluice.policy': 'api', 'sluice.outcome': 'denied' })).toBe(1)
    const duration = metrics.find((m) => m.descriptor.name === 'sluice.store.duration')
    expect(duration?.descriptor.unit).toBe('s')
    expect(duration?.dataPointType).toBe(DataPointType.HISTOGRAM)
    const counts = Object.fromEntries(
      (duration?.dataPoints ?? []).map((p) => [
        `${String(p.attributes['sluice.store'])} ${String(p.attributes['sluice.operation'])}`,
        (p.value as { count: number }).count,
      ]),
    )
    expect(counts).toEqual({ 'memory consume': 3, 'memory peek': 1 })
    expect(JSON.stringify(metrics)).not.toContain('user-secret-42')
    telemetry.close()
    await limiter.consume('api', 'after-close')
    expect(sumAt(await otel.metrics(), 'sluice.decisions', { 'sluice.outcome': 'denied' })).toBe(1)
    await otel.close()
  })

  it('counts a layered check under each layer it committed, a denial under the denying layer', async () => {
    const otel = sdk()
    const limiter = limiterFor()
    createOpenTelemetry({ meter: otel.meter, limiter })
    const layers = [
      { policy: 'perIp', key: 'ip' },
      { policy: 'api', key: 'u' },
    ] as const
    for (let i = 0; i < 3; i++) await limiter.consume(layers)
    const metrics = await otel.metrics()
    expect(
      sumAt(metrics, 'sluice.decisions', { 'sluice.policy': 'perIp', 'sluice.outcome': 'allowed' }),
    ).toBe(2)
    expect(sumAt(metrics, 'sluice.decisions', { 'sluice.policy': 'api', 'sluice.outcome': 'allowed' })).toBe(
      2,
    )
    expect(sumAt(metrics, 'sluice.decisions', { 'sluice.policy': 'api', 'sluice.outcome': 'denied' })).toBe(1)
    await otel.close()
  })

  it('folds policy names past maxLabelValues into _other', async () => {
    const otel = sdk()
    const telemetry = createOpenTelemetry({ meter: otel.meter, maxLabelValues: 1 })
    const limiter = createLimiter({
      policies: {
        a: { algorithm: 'fixed-window', limit: 5, window: '1m' },
        b: { algorithm: 'fixed-window', limit: 5, window: '1m' },
        c: { algorithm: 'fixed-window', limit: 5, window: '1m' },
      },
      onDecision: telemetry.observe,
    })
    for (const policy of ['a', 'b', 'c'] as const) await limiter.consume(policy, 'k')
    const metrics = await otel.metrics()
    expect(sumAt(metrics, 'sluice.decisions', { 'sluice.policy': 'a' })).toBe(1)
    expect(sumAt(metrics, 'sluice.decisions', { 'sluice.policy': '_other' })).toBe(2)
    await otel.close()
  })

  it('makes one span per decision with policy, outcome, store, store latency, cached and degraded', async () => {
    const otel = sdk()
    const limiter = limiterFor()
    createOpenTelemetry({ tracer: otel.tracer, limiter })
    for (let i = 0; i < 3; i++) await limiter.consume('api', 'user-secret-42')
    const spans = otel.spans()
    expect(spans.map((s) => s.name)).toEqual(['sluice.decision', 'sluice.decision', 'sluice.decision'])
    expect(spans.map((s) => s.attributes['sluice.outcome'])).toEqual(['allowed', 'allowed', 'denied'])
    const last = spans[2]!
    expect(last.attributes).toMatchObject({
      'sluice.policy': 'api',
      'sluice.operation': 'consume',
      'sluice.store': 'memory',
      'sluice.cached': false,
      'sluice.degraded': false,
      'sluice.allowed': false,
      'sluice.reason': 'limit',
    })
    expect(typeof last.attributes['sluice.store.duration_ms']).toBe('number')
    expect(last.parentSpanContext).toBeUndefined()
    expect(JSON.stringify(spans.map((s) => s.attributes))).not.toContain('user-secret-42')
    await otel.close()
  })

  it("joins the active trace: a decision inside a caller's span is its child", async () => {
    const otel = sdk()
    const limiter = limiterFor()
    createOpenTelemetry({ tracer: otel.tracer, meter: otel.meter, limiter })
    const caller = {
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: '00f067aa0ba902b7',
      traceFlags: TraceFlags.SAMPLED,
      isRemote: true,
    }
    await context.with(trace.setSpanContext(ROOT_CONTEXT, caller), () => limiter.consume('api', 'k'))
    const [span] = otel.spans()
    expect(span?.spanContext().traceId).toBe(caller.traceId)
    expect(span?.parentSpanContext?.spanId).toBe(caller.spanId)
    expect(sumAt(await otel.metrics(), 'sluice.decisions', { 'sluice.outcome': 'allowed' })).toBe(1)
    await otel.close()
  })

  it('refuses options it cannot use with a typed error', () => {
    const bad = (options: unknown) => () => createOpenTelemetry(options as never)
    expect(bad({})).toThrow(SluiceError)
    expect(bad({})).toThrow(/pass a meter, a tracer, or both/)
    expect(bad({ meter: {} })).toThrow(/must be an OpenTelemetry Meter/)
    expect(bad({ tracer: {} })).toThrow(/must be an OpenTelemetry Tracer/)
    expect(bad({ tracer: trace.getTracer('x'), maxLabelValues: 0 })).toThrow(/maxLabelValues/)
    expect(bad({ tracer: trace.getTracer('x'), metre: 1 })).toThrow(/meter/)
  })
})
