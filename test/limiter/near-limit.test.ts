// The near-limit signal: a policy's `nearLimit` fraction marks allowed decisions that leave the key
// at or below `capacity - ceil(capacity x nearLimit)` units, and the one decision that crosses that
// line (`nearLimitCrossed`), which the limiter's decision events carry and the metrics count.
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics'
import { describe, expect, it } from 'vitest'
import type { Decision, DecisionEvent } from '../../packages/sluice/src/limiter.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { createOpenTelemetry } from '../../packages/sluice/src/metrics/index.js'
import { createMetrics } from '../../packages/sluice/src/metrics/prometheus.js'
import type { Store } from '../../packages/sluice/src/store.js'
import { memcachedStore } from '../../packages/sluice/src/stores/memcached/index.js'
import { redisStore } from '../../packages/sluice/src/stores/redis/index.js'
import { fakeClock, fakeStore } from '../helpers/fake-clock.js'
import { memcachedClient, freshPrefix as memcachedPrefix } from '../helpers/memcached-clients.js'
import { freshPostgresStore, postgresPool } from '../helpers/postgres-clients.js'
import { freshPrefix, ioredis, ioredisCluster } from '../helpers/redis-clients.js'

const POLICIES = {
  api: { algorithm: 'fixed-window', limit: 10, window: '1m', nearLimit: 0.8 },
  plain: { algorithm: 'fixed-window', limit: 10, window: '1m' },
} as const

/** The limiter's decision events, and the crossings among them (each layer of a layered decision). */
function recorder() {
  const events: DecisionEvent[] = []
  const crossings = (): Decision[] =>
    events
      .flatMap((e) => ('results' in e.decision ? e.decision.results : [e.decision]))
      .filter((d) => d.nearLimitCrossed === true)
  return { events, listen: (e: DecisionEvent) => events.push(e), crossings }
}

describe('nearLimit: memory store (injected clock)', () => {
  it('marks the allowed decisions at or past the line, and the one that crosses it', async () => {
    const clock = fakeClock()
    const rec = recorder()
    const limiter = createLimiter({ policies: POLICIES, store: fakeStore(clock), onDecision: rec.listen })
    const seen: [boolean, number, boolean | undefined, boolean | undefined][] = []
    for (let i = 0; i < 11; i++) {
      const d = await limiter.consume('api', 'k')
      seen.push([d.allowed, d.remaining, d.nearLimit, d.nearLimitCrossed])
    }
    expect(seen).toEqual([
      [true, 9, undefined, undefined],
      [true, 8, undefined, undefined],
      [true, 7, undefined, undefined],
      [true, 6, undefined, undefined],
      [true, 5, undefined, undefined],
      [true, 4, undefined, undefined],
      [true, 3, undefined, undefined],
      [true, 2, true, true],
      [true, 1, true, undefined],
      [true, 0, true, undefined],
      // A denial says why it was denied (`reason`); it is not marked.
      [false, 0, undefined, undefined],
    ])
    expect(rec.crossings()).toHaveLength(1)
    // A peek commits nothing: it never crosses.
    expect((await limiter.peek('api', 'k')).nearLimitCrossed).toBeUndefined()
  })

  it('crosses once per window: a new window crosses again', async () => {
    const clock = fakeClock()
    const rec = recorder()
    const limiter = createLimiter({ policies: POLICIES, store: fakeStore(clock), onDecision: rec.listen })
    for (let window = 0; window < 3; window++) {
      for (let i = 0; i < 12; i++) await limiter.consume('api', 'k')
      clock.advance(60_000)
    }
    expect(rec.crossings()).toHaveLength(3)
    expect(rec.crossings().map((d) => [d.policy, d.key, d.remaining])).toEqual([
      ['api', 'k', 2],
      ['api', 'k', 2],
      ['api', 'k', 2],
    ])
  })

  it('a cost that jumps over the line crosses it; one that starts past it does not', async () => {
    const limiter = createLimiter({ policies: POLICIES, store: fakeStore(fakeClock()) })
    const jump = await limiter.consume('api', 'k', { cost: 9 })
    expect([jump.remaining, jump.nearLimit, jump.nearLimitCrossed]).toEqual([1, true, true])
    const after = await limiter.consume('api', 'k')
    expect([after.remaining, after.nearLimit, after.nearLimitCrossed]).toEqual([0, true, undefined])
  })

  it('rounds the used units up, reading 100 x 0.07 as the 7 it means (not 7.000000000000001)', async () => {
    const limiter = createLimiter({
      policies: {
        seven: { algorithm: 'fixed-window', limit: 100, window: '1m', nearLimit: 0.07 },
        third: { algorithm: 'token-bucket', limit: 10, window: '1m', burst: 10, nearLimit: 0.33 },
      },
      store: fakeStore(fakeClock()),
    })
    const firstNear = async (policy: 'seven' | 'third') => {
      for (let i = 0; i < 100; i++) {
        const d = await limiter.consume(policy, 'k')
        if (d.nearLimit) return d.remaining
      }
      return undefined
    }
    expect(await firstNear('seven')).toBe(93)
    // 3.3 units used rounds up to 4: near from 6 left.
    expect(await firstNear('third')).toBe(6)
  })

  it('a policy without nearLimit is never marked', async () => {
    const limiter = createLimiter({ policies: POLICIES, store: fakeStore(fakeClock()) })
    for (let i = 0; i < 10; i++) {
      const d = limiter.consumeSync('plain', 'k')
      expect(d.nearLimit).toBeUndefined()
      expect(d.nearLimitCrossed).toBeUndefined()
    }
  })

  it('layered: each layer is marked on its own result; the headline is the closest layer', async () => {
    const rec = recorder()
    const limiter = createLimiter({
      policies: {
        small: { algorithm: 'fixed-window', limit: 4, window: '1m', nearLimit: 0.5 },
        big: { algorithm: 'token-bucket', limit: 100, window: '1m', nearLimit: 0.9 },
      },
      store: fakeStore(fakeClock()),
      onDecision: rec.listen,
    })
    const checks = [
      { policy: 'small', key: 'u' },
      { policy: 'big', key: 'u' },
    ] as const
    const first = await limiter.consume(checks)
    expect(first.results.map((r) => r.nearLimit)).toEqual([undefined, undefined])
    const second = await limiter.consume(checks)
    expect(second.results.map((r) => [r.remaining, r.nearLimitCrossed])).toEqual([
      [2, true],
      [98, undefined],
    ])
    expect(second.policy).toBe('small')
    expect(second.nearLimit).toBe(true)
    expect(rec.crossings().map((d) => d.policy)).toEqual(['small'])
  })

  it('refuses a fraction outside (0, 1) with SLUICE_INVALID_POLICY', () => {
    for (const bad of [0, 1, -0.2, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '0.8', null]) {
      let caught: unknown
      try {
        createLimiter({
          policies: { api: { algorithm: 'fixed-window', limit: 10, window: '1m', nearLimit: bad as number } },
        })
      } catch (error) {
        caught = error
      }
      expect(caught, String(bad)).toMatchObject({
        code: 'SLUICE_INVALID_POLICY',
        message: expect.stringMatching(/^policies\.api\.nearLimit: .*between 0 and 1/),
      })
    }
  })

  it('counts crossings per policy in sluice_near_limit_crossings_total (no key label)', async () => {
    const clock = fakeClock()
    const metrics = createMetrics()
    const limiter = createLimiter({
      policies: POLICIES,
      store: fakeStore(clock),
      onDecision: (e) => metrics.observe(e),
    })
    for (const key of ['a', 'b']) for (let i = 0; i < 10; i++) await limiter.consume('api', key)
    clock.advance(60_000)
    for (let i = 0; i < 8; i++) await limiter.consume('api', 'a')
    for (let i = 0; i < 10; i++) await limiter.consume('plain', 'a')
    const text = await metrics.registry.metrics()
    const lines = text.split('\n').filter((l) => l.startsWith('sluice_near_limit_crossings_total'))
    expect(lines).toEqual(['sluice_near_limit_crossings_total{policy="api"} 3'])
  })
})

describe('nearLimit: real Redis', () => {
  it('marks the same decisions, and two instances sharing a key cross it once between them', async () => {
    const client = ioredis()
    let now = 1_700_000_000_000
    const prefix = freshPrefix('near')
    const recs = [recorder(), recorder()]
    const limiters = recs.map((rec) =>
      createLimiter({
        policies: POLICIES,
        store: redisStore(client, { prefix, clock: 'client', now: () => now }),
        onDecision: rec.listen,
        localDenyCache: false,
      }),
    )
    try {
      const remaining: [number, boolean | undefined][] = []
      for (let i = 0; i < 10; i++) {
        const d = await limiters[i % 2]!.consume('api', 'shared')
        remaining.push([d.remaining, d.nearLimit])
      }
      expect(remaining.slice(6)).toEqual([
        [3, undefined],
        [2, true],
        [1, true],
        [0, true],
      ])
      // The eighth decision crossed, on the second instance (odd index): only it emitted a crossing.
      expect(recs.map((r) => r.crossings().length)).toEqual([0, 1])
      now += 60_000
      for (let i = 0; i < 10; i++) await limiters[0]!.consume('api', 'shared')
      expect(recs.map((r) => r.crossings().length)).toEqual([1, 1])
    } finally {
      client.disconnect()
    }
  })
})

describe('nearLimit: Redis Cluster, PostgreSQL and memcached', () => {
  /** Two limiters over one store: ten decisions alternating, then ten in the next window. */
  async function twoInstances(store: Store, advance: () => void): Promise<number[][]> {
    const recs = [recorder(), recorder()]
    const limiters = recs.map((rec) =>
      createLimiter({ policies: POLICIES, store, onDecision: rec.listen, localDenyCache: false }),
    )
    const counts: number[][] = []
    for (let i = 0; i < 10; i++) await limiters[i % 2]!.consume('api', 'shared')
    counts.push(recs.map((r) => r.crossings().length))
    advance()
    for (let i = 0; i < 10; i++) await limiters[i % 2]!.consume('api', 'shared')
    counts.push(recs.map((r) => r.crossings().length))
    return counts
  }

  it('Redis Cluster: one crossing per window between two instances', async () => {
    const cluster = ioredisCluster()
    let now = 1_700_000_000_000
    try {
      const store = redisStore(cluster, {
        prefix: freshPrefix('near-cluster'),
        clock: 'client',
        now: () => now,
      })
      expect(await twoInstances(store, () => (now += 60_000))).toEqual([
        [0, 1],
        [0, 2],
      ])
    } finally {
      cluster.disconnect()
    }
  })

  it('memcached: one crossing per window between two instances', async () => {
    const client = memcachedClient()
    let now = 1_700_000_000_000
    try {
      const store = memcachedStore(client, {
        clock: 'client',
        now: () => now,
        prefix: memcachedPrefix('near'),
      })
      expect(await twoInstances(store, () => (now += 60_000))).toEqual([
        [0, 1],
        [0, 2],
      ])
    } finally {
      client.close()
    }
  })

  it('PostgreSQL: one crossing per window between two instances', async () => {
    const pool = postgresPool(2)
    let now = 1_700_000_000_000
    try {
      const store = await freshPostgresStore(pool, 'near', { now: () => now })
      expect(await twoInstances(store, () => (now += 60_000))).toEqual([
        [0, 1],
        [0, 2],
      ])
    } finally {
      await pool.end()
    }
  })
})

describe('nearLimit: OpenTelemetry mirror', () => {
  it('counts crossings per policy as sluice.near_limit.crossings', async () => {
    const reader = new PeriodicExportingMetricReader({
      exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE),
      exportIntervalMillis: 3_600_000,
    })
    const provider = new MeterProvider({ readers: [reader] })
    const exporter = (reader as unknown as { _exporter: InMemoryMetricExporter })._exporter
    const limiter = createLimiter({ policies: POLICIES, store: fakeStore(fakeClock()) })
    const telemetry = createOpenTelemetry({ meter: provider.getMeter('near'), limiter })
    try {
      for (const key of ['a', 'b', 'c']) for (let i = 0; i < 9; i++) await limiter.consume('api', key)
      await reader.forceFlush()
      const metrics =
        exporter
          .getMetrics()
          .at(-1)
          ?.scopeMetrics.flatMap((s) => s.metrics) ?? []
      const metric = metrics.find((m) => m.descriptor.name === 'sluice.near_limit.crossings')
      expect(metric?.dataPoints.map((p) => [p.attributes, p.value])).toEqual([
        [{ 'sluice.policy': 'api' }, 3],
      ])
    } finally {
      telemetry.close()
      await provider.shutdown()
    }
  })
})
