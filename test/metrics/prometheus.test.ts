import { describe, expect, it } from 'vitest'
import type { Decision } from '../../packages/sluice/src/limiter.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { countedLayers, createMetrics, outcomeOf } from '../../packages/sluice/src/metrics/prometheus.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { sample } from '../helpers/exposition.js'

function setup(maxLabelValues?: number) {
  let now = 1_000_000
  const metrics = createMetrics(maxLabelValues === undefined ? {} : { maxLabelValues })
  const limiter = createLimiter({
    store: memoryStore({ now: () => now }),
    policies: {
      api: { algorithm: 'fixed-window', limit: 3, window: '1m' },
      perIp: { algorithm: 'fixed-window', limit: 100, window: '1m' },
      perUser: { algorithm: 'fixed-window', limit: 2, window: '1m' },
    },
    onDecision: metrics.observe,
  })
  return { metrics, limiter, tick: (ms: number) => (now += ms) }
}

describe('createMetrics fed by limiter events', () => {
  it('counts decisions by policy and outcome, never by key', async () => {
    const { metrics, limiter } = setup()
    for (let i = 0; i < 5; i++) await limiter.consume('api', '203.0.113.7')
    limiter.consumeSync('api', 'user-secret-42')
    const text = await metrics.registry.metrics()
    expect(sample(text, 'sluice_decisions_total', { policy: 'api', outcome: 'allowed' })).toBe(4)
    expect(sample(text, 'sluice_decisions_total', { policy: 'api', outcome: 'denied' })).toBe(2)
    expect(text).not.toContain('203.0.113.7')
    expect(text).not.toContain('user-secret-42')
  })

  it('times every store call by store and operation; peeks are timed but not counted as decisions', async () => {
    const { metrics, limiter } = setup()
    await limiter.consume('api', 'a')
    await limiter.consume('api', 'a')
    await limiter.peek('api', 'a')
    const text = await metrics.registry.metrics()
    const consumeCount = { store: 'memory', operation: 'consume' }
    expect(sample(text, 'sluice_store_duration_seconds_count', consumeCount)).toBe(2)
    expect(sample(text, 'sluice_store_duration_seconds_count', { store: 'memory', operation: 'peek' })).toBe(
      1,
    )
    const sum = sample(text, 'sluice_store_duration_seconds_sum', consumeCount)!
    expect(sum).toBeGreaterThan(0)
    expect(sum).toBeLessThan(1)
    expect(sample(text, 'sluice_store_duration_seconds_bucket', { ...consumeCount, le: '+Inf' })).toBe(2)
    expect(sample(text, 'sluice_decisions_total', { policy: 'api', outcome: 'allowed' })).toBe(2)
  })

  it('counts a passing layered check under every layer, a denied one under the denying layer only', async () => {
    const { metrics, limiter } = setup()
    const checks = [
      { policy: 'perIp', key: '198.51.100.1' },
      { policy: 'perUser', key: 'u1' },
    ] as const
    for (let i = 0; i < 3; i++) await limiter.consume([...checks])
    const text = await metrics.registry.metrics()
    expect(sample(text, 'sluice_decisions_total', { policy: 'perIp', outcome: 'allowed' })).toBe(2)
    expect(sample(text, 'sluice_decisions_total', { policy: 'perUser', outcome: 'allowed' })).toBe(2)
    expect(sample(text, 'sluice_decisions_total', { policy: 'perUser', outcome: 'denied' })).toBe(1)
    expect(sample(text, 'sluice_decisions_total', { policy: 'perIp', outcome: 'denied' })).toBeUndefined()
  })

  it('publishes each count once: scraping twice does not double it, new decisions add to it', async () => {
    const { metrics, limiter } = setup()
    await limiter.consume('api', 'a')
    const first = await metrics.registry.metrics()
    const second = await metrics.registry.metrics()
    expect(sample(first, 'sluice_decisions_total', { policy: 'api', outcome: 'allowed' })).toBe(1)
    expect(sample(second, 'sluice_decisions_total', { policy: 'api', outcome: 'allowed' })).toBe(1)
    await limiter.consume('api', 'a')
    const third = await metrics.registry.metrics()
    expect(sample(third, 'sluice_decisions_total', { policy: 'api', outcome: 'allowed' })).toBe(2)
    expect(
      sample(third, 'sluice_store_duration_seconds_count', { store: 'memory', operation: 'consume' }),
    ).toBe(2)
  })

  it('fills histogram buckets cumulatively, like a prom-client Histogram', async () => {
    const metrics = createMetrics({ durationBuckets: [0.001, 0.01] })
    const decision: Decision = {
      allowed: true,
      limit: 1,
      remaining: 0,
      resetMs: 1,
      retryAfterMs: 0,
      policy: 'p',
      key: 'k',
    }
    for (const storeSeconds of [0.0005, 0.005, 0.005, 0.5])
      metrics.observe({ operation: 'consume', decision, store: 'redis', storeSeconds })
    const text = await metrics.registry.metrics()
    const labels = { store: 'redis', operation: 'consume' }
    expect(text).toContain('# TYPE sluice_store_duration_seconds histogram')
    expect(sample(text, 'sluice_store_duration_seconds_bucket', { ...labels, le: '0.001' })).toBe(1)
    expect(sample(text, 'sluice_store_duration_seconds_bucket', { ...labels, le: '0.01' })).toBe(3)
    expect(sample(text, 'sluice_store_duration_seconds_bucket', { ...labels, le: '+Inf' })).toBe(4)
    expect(sample(text, 'sluice_store_duration_seconds_sum', labels)).toBeCloseTo(0.5105, 9)
    expect(sample(text, 'sluice_store_duration_seconds_count', labels)).toBe(4)
    // Also readable as JSON through the registry, the way prom-client aggregators read it.
    const json = await metrics.registry.getMetricsAsJSON()
    expect(json.find((m) => m.name === 'sluice_store_duration_seconds')?.values).toHaveLength(5)
  })

  it('folds policy label values past maxLabelValues into _other', async () => {
    const { metrics, limiter } = setup(2)
    await limiter.consume('api', 'a')
    await limiter.consume('perIp', 'a')
    await limiter.consume('perUser', 'a')
    const text = await metrics.registry.metrics()
    expect(sample(text, 'sluice_decisions_total', { policy: 'api', outcome: 'allowed' })).toBe(1)
    expect(sample(text, 'sluice_decisions_total', { policy: 'perIp', outcome: 'allowed' })).toBe(1)
    expect(sample(text, 'sluice_decisions_total', { policy: '_other', outcome: 'allowed' })).toBe(1)
    expect(text).not.toContain('perUser')
  })
})

describe('the input API for store health, circuit breaker and local cache', () => {
  it('shows each input in the exposition and in storeHealth()', async () => {
    const { metrics } = createMetricsOnly()
    metrics.recordStoreError('redis')
    metrics.recordStoreError('redis')
    metrics.setStoreUp('redis', false)
    metrics.setCircuitState('redis', 'open')
    metrics.recordLocalCacheHit('api')
    let text = await metrics.registry.metrics()
    expect(sample(text, 'sluice_store_errors_total', { store: 'redis' })).toBe(2)
    expect(sample(text, 'sluice_store_up', { store: 'redis' })).toBe(0)
    expect(sample(text, 'sluice_circuit_state', { store: 'redis' })).toBe(2)
    expect(sample(text, 'sluice_local_cache_hits_total', { policy: 'api' })).toBe(1)
    expect(metrics.storeHealth()).toEqual([{ store: 'redis', up: false, circuit: 'open', errors: 2 }])

    metrics.setStoreUp('redis', true)
    metrics.setCircuitState('redis', 'half-open')
    text = await metrics.registry.metrics()
    expect(sample(text, 'sluice_store_up', { store: 'redis' })).toBe(1)
    expect(sample(text, 'sluice_circuit_state', { store: 'redis' })).toBe(1)
    metrics.setCircuitState('redis', 'closed')
    text = await metrics.registry.metrics()
    expect(sample(text, 'sluice_circuit_state', { store: 'redis' })).toBe(0)
  })

  it('reports nothing it was not told: no up, circuit or error series before the first input', async () => {
    const { metrics } = createMetricsOnly()
    const text = await metrics.registry.metrics()
    expect(sample(text, 'sluice_store_up', { store: 'memory' })).toBeUndefined()
    expect(text).toContain('# TYPE sluice_circuit_state gauge')
    expect(text).not.toMatch(/^sluice_circuit_state\{/m)
  })

  it('rejects an unknown circuit state with a stable code', () => {
    const { metrics } = createMetricsOnly()
    expect(() => metrics.setCircuitState('redis', 'broken' as 'open')).toThrow(
      expect.objectContaining({ code: 'SLUICE_INVALID_OPTIONS' }),
    )
  })
})

describe('outcomes', () => {
  const base: Decision = {
    allowed: true,
    limit: 1,
    remaining: 0,
    resetMs: 1,
    retryAfterMs: 0,
    policy: 'p',
    key: 'k',
  }
  it('maps decisions to allowed, denied and degraded', () => {
    expect(outcomeOf(base)).toBe('allowed')
    expect(outcomeOf({ ...base, allowed: false, reason: 'limit' })).toBe('denied')
    expect(outcomeOf({ ...base, allowed: false, reason: 'blocked' })).toBe('denied')
    expect(outcomeOf({ ...base, allowed: false, reason: 'cost_above_capacity' })).toBe('denied')
    // The failure-handling work marks decisions made without the store this way (fail open/closed).
    const degraded = { ...base, reason: 'store_unavailable' } as unknown as Decision
    expect(outcomeOf(degraded)).toBe('degraded')
    expect(countedLayers(degraded)).toEqual([{ policy: 'p', outcome: 'degraded' }])
  })
})

function createMetricsOnly() {
  return { metrics: createMetrics() }
}
