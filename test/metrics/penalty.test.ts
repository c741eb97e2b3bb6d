// Penalties applied, counted per policy (never per key) by the Prometheus metrics and their
// OpenTelemetry mirror: one per penalty, none for the blocked requests after it, a layered check's
// under its penalised layer.
import type { MetricData } from '@opentelemetry/sdk-metrics'
import {
  AggregationTemporality,
  DataPointType,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics'
import { describe, expect, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import {
  createMetrics,
  createObservability,
  createOpenTelemetry,
} from '../../packages/sluice/src/metrics/index.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { sample } from '../helpers/exposition.js'
import { fakeClock } from '../helpers/fake-clock.js'

function setup() {
  const clock = fakeClock()
  const limiter = createLimiter({
    store: memoryStore({ now: clock.now }),
    policies: {
      login: {
        algorithm: 'fixed-window',
        limit: 1,
        window: '1s',
        penalty: { after: 2, within: '1m', block: '10s' },
      },
      perIp: { algorithm: 'fixed-window', limit: 100, window: '1s' },
    },
  })
  return { clock, limiter }
}

/** Two offences of `key` (each: one admitted, two denials), a blocked request after each. */
async function offendTwice(
  limiter: ReturnType<typeof setup>['limiter'],
  clock: ReturnType<typeof fakeClock>,
) {
  for (let round = 0; round < 2; round++) {
    for (let i = 0; i < 3; i++) await limiter.consume('login', 'user-secret-42')
    await limiter.consume('login', 'user-secret-42')
    clock.advance(60_000)
  }
  await limiter.consume('login', 'other')
  await limiter.consume([
    { policy: 'perIp', key: 'ip' },
    { policy: 'login', key: 'other' },
  ])
  await limiter.consume([
    { policy: 'perIp', key: 'ip' },
    { policy: 'login', key: 'other' },
  ])
}

describe('penalties in the metrics', () => {
  it('sluice_penalties_total counts each penalty under its policy', async () => {
    const { clock, limiter } = setup()
    const metrics = createMetrics()
    limiter.subscribe(metrics.observe)
    const before = await metrics.registry.metrics()
    expect(sample(before, 'sluice_penalties_total', { policy: 'login' })).toBeUndefined()
    await offendTwice(limiter, clock)
    const text = await metrics.registry.metrics()
    expect(sample(text, 'sluice_penalties_total', { policy: 'login' })).toBe(3)
    expect(sample(text, 'sluice_penalties_total', { policy: 'perIp' })).toBeUndefined()
    expect(text).not.toContain('user-secret-42')
  })

  it('sluice.penalties mirrors it through OpenTelemetry', async () => {
    const { clock, limiter } = setup()
    const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
    const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 })
    const provider = new MeterProvider({ readers: [reader] })
    createOpenTelemetry({ meter: provider.getMeter('sluice-test'), limiter })
    await offendTwice(limiter, clock)
    await reader.forceFlush()
    const metrics: MetricData[] =
      exporter
        .getMetrics()
        .at(-1)
        ?.scopeMetrics.flatMap((s) => s.metrics) ?? []
    const penalties = metrics.find((m) => m.descriptor.name === 'sluice.penalties')
    expect(penalties?.dataPointType).toBe(DataPointType.SUM)
    expect(penalties?.dataPoints.map((p) => [p.attributes['sluice.policy'], p.value])).toEqual([['login', 3]])
    await provider.shutdown()
  })
})

describe('penalised keys on the dashboard', () => {
  it('lists each key under a penalty with its level and block, newest first, while its block lasts', async () => {
    const { clock, limiter } = setup()
    const obs = createObservability({ limiter, now: clock.now })
    try {
      expect(obs.snapshot().penalised).toEqual([])
      for (let i = 0; i < 3; i++) await limiter.consume('login', 'mallory')
      const first = clock.now()
      clock.advance(1000)
      await limiter.consume('login', 'eve')
      await limiter.consume([
        { policy: 'perIp', key: 'ip' },
        { policy: 'login', key: 'eve' },
      ])
      await limiter.consume([
        { policy: 'perIp', key: 'ip' },
        { policy: 'login', key: 'eve' },
      ])
      expect(obs.snapshot().penalised).toEqual([
        { policy: 'login', key: 'eve', level: 0, blockMs: 10_000, at: first + 1000, until: first + 11_000 },
        { policy: 'login', key: 'mallory', level: 0, blockMs: 10_000, at: first, until: first + 10_000 },
      ])
      // Blocked requests add nothing; an ended block leaves the list.
      await limiter.consume('login', 'mallory')
      clock.advance(9000)
      expect(obs.snapshot().penalised.map((p) => p.key)).toEqual(['eve'])
      clock.advance(1000)
      expect(obs.snapshot().penalised).toEqual([])
    } finally {
      obs.close()
    }
  })
})
