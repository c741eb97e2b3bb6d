// Hybrid leases, one process, a fake clock and a real redis-server: how a lease is sized, charged
// before use, spent, given back, refused near the limit, charged as of its end on a bucket, lost
// to a crash (never over-admitted), and what a Redis failure does; the lease sizing on its own.
import { createServer } from 'node:net'
import {
  AggregationTemporality,
  DataPointType,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics'
import { Redis } from 'ioredis'
import { afterAll, describe, expect, inject, it } from 'vitest'
import { createMetrics, createOpenTelemetry } from '../../packages/sluice/src/metrics/index.js'
import { type RatePolicy, resolvePolicy } from '../../packages/sluice/src/policy.js'
import { type HybridBackend, HybridPolicy } from '../../packages/sluice/src/scale/hybrid.js'
import { COLD_UNITS, leaseWant, rollDemand } from '../../packages/sluice/src/scale/hybrid-algorithms.js'
import { isPending, type StepResult } from '../../packages/sluice/src/store.js'
import { hybridRedis } from '../../packages/sluice/src/stores/redis/index.js'

const { port } = inject('redis')
const client = new Redis(port, '127.0.0.1')
afterAll(() => client.disconnect())

// A start on a whole day of a recent clock: windows of an hour start with it.
const T0 = Math.floor(Date.now() / 86_400_000) * 86_400_000 + 60_000
let run = 0

/** Two instances of one hybrid policy sharing Redis, on one fake clock. */
function pair(
  policy: Omit<RatePolicy, 'mode' | 'syncEvery'>,
  syncEvery = '1s',
  backendOf = (b: HybridBackend) => b,
) {
  const resolved = resolvePolicy('h', { ...policy, mode: 'hybrid', syncEvery } as RatePolicy)
  const clock = { now: T0 }
  const backend = hybridRedis(client, { prefix: `hylease${Date.now()}-${run++}` })
  const a = new HybridPolicy(resolved, backendOf(backend), () => clock.now)
  const b = new HybridPolicy(resolved, backend, () => clock.now)
  // Only peeks, so never holds a lease: what it sees is the shared state.
  const observer = new HybridPolicy(resolved, backend, () => clock.now)
  const step = { policy: resolved, key: 'k', cost: 1 }
  const seen = () => observer.apply(step, 'peek')
  return {
    a,
    b,
    clock,
    step,
    seen,
    backend,
    close: () => Promise.all([a.close(), b.close(), observer.close()]),
  }
}

const consume = async (
  h: HybridPolicy,
  step: { policy: ReturnType<typeof resolvePolicy>; key: string; cost: number },
) => h.apply(step, 'consume')

const ALGORITHMS: Record<string, Omit<RatePolicy, 'mode' | 'syncEvery'>> = {
  'fixed-window': { algorithm: 'fixed-window', limit: 100, window: '1h' },
  'sliding-window-counter': { algorithm: 'sliding-window-counter', limit: 100, window: '1h' },
  'token-bucket': { algorithm: 'token-bucket', limit: 1, window: '1h', burst: 100 },
  gcra: { algorithm: 'gcra', limit: 1, window: '1h', burst: 100 },
}

describe('lease sizing', () => {
  it('asks for none on a cold key and for twice the recent demand on a hot one', () => {
    expect(leaseWant({ periodStartMs: 0, current: 0, previous: 0 })).toBe(0)
    expect(leaseWant({ periodStartMs: 0, current: COLD_UNITS - 1, previous: 0 })).toBe(0)
    expect(leaseWant({ periodStartMs: 0, current: 30, previous: 50 })).toBe(100)
    expect(leaseWant({ periodStartMs: 0, current: 70, previous: 50 })).toBe(140)
  })
  it('rolls the demand on with the clock: the last whole period is kept, older ones forgotten', () => {
    const d = { periodStartMs: 1000, current: 40, previous: 10 }
    rollDemand(d, 1099, 100)
    expect(d).toEqual({ periodStartMs: 1000, current: 40, previous: 10 })
    rollDemand(d, 1150, 100)
    expect(d).toEqual({ periodStartMs: 1100, current: 0, previous: 40 })
    expect(leaseWant(d)).toBe(80)
    rollDemand(d, 1420, 100)
    expect(d).toEqual({ periodStartMs: 1400, current: 0, previous: 0 })
    expect(leaseWant(d)).toBe(0)
  })
})

describe('hybrid policy validation', () => {
  for (const algorithm of ['fixed-window', 'sliding-window-counter', 'token-bucket', 'gcra'] as const)
    it(`accepts ${algorithm}`, () => {
      expect(resolvePolicy('h', { algorithm, limit: 5, window: '1s', mode: 'hybrid' }).syncEveryMs).toBe(100)
    })
  it('refuses sliding-window-log and concurrency, naming the algorithms that work', () => {
    for (const policy of [
      { algorithm: 'sliding-window-log', limit: 5, window: '1s', mode: 'hybrid' },
      { algorithm: 'concurrency', limit: 5, timeout: '1s', mode: 'hybrid' },
    ]) {
      expect(() => resolvePolicy('h', policy)).toThrow(
        expect.objectContaining({
          code: 'SLUICE_INVALID_POLICY',
          message: expect.stringContaining(
            'hybrid mode works for fixed-window, sliding-window-counter, token-bucket, gcra',
          ),
        }),
      )
    }
  })
})

describe.each(Object.keys(ALGORITHMS))('%s, leased', (name) => {
  it('a cold key is decided in Redis; a hot one takes a lease charged before use, spends it here and gives back the rest', async () => {
    const { a, clock, step, seen, close } = pair(ALGORITHMS[name]!)
    // Cold: a plain decision in Redis (a promise), no lease.
    const first = a.apply(step, 'consume')
    expect(isPending(first)).toBe(true)
    await expect(first).resolves.toMatchObject({ allowed: true })
    expect(a.stats.leasesTaken).toBe(0)
    // Asked twice in this period: hot; this call is decided in Redis and takes a lease of 4 (2 x demand).
    await expect(consume(a, step)).resolves.toMatchObject({ allowed: true })
    expect(a.stats).toMatchObject({ leasesTaken: 1, unitsLeased: 4 })
    // The lease answers at once, without Redis.
    for (let i = 0; i < 3; i++) {
      const d = a.apply(step, 'consume')
      expect(isPending(d)).toBe(false)
      expect((d as StepResult).allowed).toBe(true)
    }
    // Another instance sees the whole lease charged: 2 decided + 4 leased of 100.
    await expect(seen()).resolves.toMatchObject({ allowed: true, remaining: 94 })
    // The lease ends after syncEvery; its unspent unit goes back.
    clock.now += 1000
    await a.returnEnded()
    expect(a.stats).toMatchObject({ leasesEnded: 1, unitsSpent: 3, unitsReturned: 1, unitsLost: 0 })
    await expect(seen()).resolves.toMatchObject({ allowed: true, remaining: 95 })
    await close()
  })

  it('near the limit grants shrink to a quarter of what is left, then to none: the instances are exact', async () => {
    const policy = {
      ...ALGORITHMS[name]!,
      ...(name === 'token-bucket' || name === 'gcra' ? { burst: 40 } : { limit: 40 }),
    }
    const { a, b, step, close } = pair(policy as Omit<RatePolicy, 'mode' | 'syncEvery'>, '1h')
    let admitted = 0
    const grants: number[] = []
    for (let i = 0; i < 80; i++) {
      const h = i % 2 === 0 ? a : b
      const before = h.stats.unitsLeased
      if ((await consume(h, step)).allowed) admitted++
      if (h.stats.unitsLeased > before) grants.push(h.stats.unitsLeased - before)
    }
    // Exactly the limit: leases and plain decisions mix on one state and none is lost here.
    expect(admitted).toBe(40)
    expect(grants.length).toBeGreaterThan(0)
    expect(Math.max(...grants)).toBeLessThanOrEqual(40 / 4)
    // Both instances were denied in Redis at the end, with no lease left to spend.
    expect(a.stats.plainDecisions + b.stats.plainDecisions).toBeGreaterThan(
      40 - a.stats.unitsSpent - b.stats.unitsSpent,
    )
    await close()
  })

  it('a crashed instance never gives its lease back: its units stay charged, never admitted twice', async () => {
    let crashed = false
    const { a, clock, step, seen, close } = pair(ALGORITHMS[name]!, '1s', (backend) => ({
      ...backend,
      lease: (call) => (crashed ? Promise.reject(new Error('crashed')) : backend.lease(call)),
    }))
    await consume(a, step)
    await consume(a, step)
    expect(a.stats.unitsLeased).toBe(4)
    a.apply(step, 'consume')
    crashed = true
    clock.now += 1000
    await a.returnEnded()
    // Taken = spent + returned + lost to the crash.
    expect(a.stats).toMatchObject({ unitsLeased: 4, unitsSpent: 1, unitsReturned: 0, unitsLost: 3 })
    // The others count the lost units as used: 2 decided + 4 leased.
    await expect(seen()).resolves.toMatchObject({ remaining: 94 })
    await close()
  })
})

describe('buckets', () => {
  it('charge a lease as if spent at its end, and ignore a return once a refill was cut at the cap since it', async () => {
    const { a, b, clock, step, seen, close } = pair({
      algorithm: 'token-bucket',
      limit: 10,
      window: '1s',
      burst: 100,
    })
    await consume(a, step)
    await consume(a, step)
    expect(a.stats.unitsLeased).toBe(4)
    // Exact would leave 94; the lease is charged as of its end, 1 s (10 units of refill) later.
    await expect(seen()).resolves.toMatchObject({ remaining: 86 })
    // 2 s later the bucket is full again (the refill was cut at the cap): the lease's units are refilled.
    clock.now += 2000
    const heavy = { ...step, cost: 50 }
    await expect(consume(b, heavy)).resolves.toMatchObject({ allowed: true })
    // b asked for 50 and took a lease of a quarter of the 50 left: 12.
    expect(b.stats.unitsLeased).toBe(12)
    await expect(seen()).resolves.toMatchObject({ remaining: 38 })
    // a's return of its 4 unspent units is from another epoch: no credit.
    await a.returnEnded()
    expect(a.stats.unitsReturned).toBe(4)
    await expect(seen()).resolves.toMatchObject({ remaining: 38 })
    await close()
  })
})

describe('refund and Redis failure', () => {
  it('a refund goes to the running lease, else to Redis', async () => {
    const { a, clock, step, seen, close } = pair(ALGORITHMS['fixed-window']!)
    await consume(a, step)
    await consume(a, step)
    a.apply(step, 'consume')
    await a.refund(step)
    expect(a.stats.unitsSpent).toBe(0)
    clock.now += 1000
    await a.returnEnded()
    await expect(seen()).resolves.toMatchObject({ remaining: 98 })
    await a.refund(step)
    await expect(seen()).resolves.toMatchObject({ remaining: 99 })
    await close()
  })

  it("follows the policy's onStoreError when Redis cannot be reached", async () => {
    const dead = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port
        s.close(() => resolve(p))
      })
    })
    const down = new Redis(dead, '127.0.0.1', {
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    })
    const backend = hybridRedis(down)
    const of = (onStoreError: 'open' | 'closed') => {
      const policy = resolvePolicy('h', {
        algorithm: 'fixed-window',
        limit: 5,
        window: '1s',
        mode: 'hybrid',
        onStoreError,
      })
      return { h: new HybridPolicy(policy, backend), step: { policy, key: 'k', cost: 1 } }
    }
    const closed = of('closed')
    await expect(consume(closed.h, closed.step)).resolves.toMatchObject({
      allowed: false,
      unavailable: true,
      degraded: true,
    })
    const open = of('open')
    await expect(consume(open.h, open.step)).resolves.toMatchObject({ allowed: true, degraded: true })
    expect(open.h.stats.errors).toBe(1)
    await Promise.all([closed.h.close(), open.h.close()])
    down.disconnect()
  })
})

describe('metrics', () => {
  it('Prometheus and OpenTelemetry publish leases taken and ended, and units leased, spent, returned, lost, under-admitted', async () => {
    const { a, clock, step, backend, close } = pair(ALGORITHMS['fixed-window']!)
    const metrics = createMetrics({ hybrid: backend })
    const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
    const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 })
    const provider = new MeterProvider({ readers: [reader] })
    createOpenTelemetry({ meter: provider.getMeter('sluice-test'), hybrid: backend })
    await consume(a, step)
    await consume(a, step)
    a.apply(step, 'consume')
    clock.now += 1000
    await a.returnEnded()
    const text = await metrics.registry.metrics()
    expect(text).toContain('sluice_hybrid_leases_total{policy="h",kind="taken"} 1')
    expect(text).toContain('sluice_hybrid_leases_total{policy="h",kind="ended"} 1')
    expect(text).toContain('sluice_hybrid_lease_units_total{policy="h",kind="leased"} 4')
    expect(text).toContain('sluice_hybrid_lease_units_total{policy="h",kind="spent"} 1')
    expect(text).toContain('sluice_hybrid_lease_units_total{policy="h",kind="returned"} 3')
    expect(text).toContain('sluice_hybrid_lease_units_total{policy="h",kind="under_admitted"} 0')
    await reader.forceFlush()
    const exported =
      exporter
        .getMetrics()
        .at(-1)
        ?.scopeMetrics.flatMap((m) => m.metrics) ?? []
    const units = exported.find((m) => m.descriptor.name === 'sluice.hybrid.lease_units')
    expect(units?.dataPointType).toBe(DataPointType.SUM)
    const point = units?.dataPoints.find((p) => p.attributes['sluice.lease.kind'] === 'returned')
    expect(point?.value).toBe(3)
    await provider.shutdown()
    await close()
  })
})
