// Hybrid mode: 4 OS processes share one key of each hybrid algorithm (fixed window, sliding window
// counter, token bucket, GCRA) through a real redis-server; each measured over-admission must stay
// within its documented bound (docs/scale.md), and the Redis totals must equal what the processes
// admitted. Plus the single-process behaviour.
import { fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import { afterAll, describe, expect, inject, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { type ResolvedPolicy, resolvePolicy } from '../../packages/sluice/src/policy.js'
import { HybridPolicy } from '../../packages/sluice/src/scale/hybrid.js'
import { hybridRedis } from '../../packages/sluice/src/stores/redis/hybrid.js'
import type { WorkerPlan, WorkerReport } from './hybrid-worker.js'

const { port } = inject('redis')
const client = new Redis(port, '127.0.0.1')
afterAll(() => client.disconnect())
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

function worker(
  plan: (startAt: number) => WorkerPlan,
  onReady: () => Promise<number>,
): Promise<WorkerReport> {
  const child = fork(fileURLToPath(new URL('./hybrid-worker.ts', import.meta.url)), {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error('hybrid worker timed out'))
    }, 40_000)
    child.on('message', (m) => {
      if (m === 'ready') void onReady().then((startAt) => child.send(plan(startAt)))
      else {
        clearTimeout(timer)
        resolve(m as WorkerReport)
      }
    })
    child.on('error', reject)
  })
}

describe('hybrid mode', () => {
  it('policy validation', () => {
    expect(() =>
      resolvePolicy('h', { algorithm: 'sliding-window-log', limit: 1, window: '1s', mode: 'hybrid' }),
    ).toThrow(expect.objectContaining({ code: 'SLUICE_INVALID_POLICY' }))
    expect(() =>
      resolvePolicy('h', { algorithm: 'fixed-window', limit: 1, window: '1s', syncEvery: '10ms' }),
    ).toThrow(expect.objectContaining({ code: 'SLUICE_INVALID_POLICY' }))
    expect(
      resolvePolicy('h', { algorithm: 'fixed-window', limit: 1, window: '1s', mode: 'hybrid' }).syncEveryMs,
    ).toBe(100)
    expect(() =>
      createLimiter({
        policies: { h: { algorithm: 'fixed-window', limit: 1, window: '1s', mode: 'hybrid' } },
      }),
    ).toThrow(expect.objectContaining({ code: 'SLUICE_INVALID_OPTIONS' }))
  })

  it('one process: decides locally, syncs counts to Redis, sees other instances after a sync', async () => {
    const prefix = `hy${Date.now()}`
    const policies = {
      h: { algorithm: 'fixed-window', limit: 10, window: '10s', mode: 'hybrid', syncEvery: '20ms' },
    } as const
    // Stay away from a window edge.
    const windowMs = 10_000
    if (Date.now() % windowMs > windowMs - 2000) await sleep(windowMs - (Date.now() % windowMs) + 10)
    const a = createLimiter({ hybrid: hybridRedis(client, { prefix }), policies })
    const b = createLimiter({ hybrid: hybridRedis(client, { prefix }), policies })
    for (let i = 0; i < 6; i++) expect(a.consumeSync('h', 'k').allowed).toBe(true)
    const d = await a.consume('h', 'k')
    expect(d).toMatchObject({ allowed: true, remaining: 3, limit: 10 })
    await sleep(100)
    const key = `${prefix}:{k}:h:h:${Math.floor(Date.now() / windowMs)}`
    expect(Number(await client.get(key))).toBe(7)
    expect(await client.pttl(key)).toBeGreaterThan(10_000)
    // b has synced (pulled) the key as soon as it touched it; after one interval it sees 7.
    b.consumeSync('h', 'k')
    await sleep(100)
    expect(b.consumeSync('h', 'k')).toMatchObject({ allowed: true, remaining: 1 })
    expect(b.consumeSync('h', 'k')).toMatchObject({ allowed: true, remaining: 0 })
    expect(b.consumeSync('h', 'k')).toMatchObject({ allowed: false, remaining: 0, reason: 'limit' })
    expect(b.consumeSync('h', 'k').retryAfterMs).toBeGreaterThan(0)
    await a.refund('h', 'k')
    await a.close()
    await b.close()
    expect(Number(await client.get(key))).toBe(9)
    await a.reset('h', 'k')
    expect(await client.exists(key)).toBe(0)
  })

  it('4 processes, every algorithm at once: measured over-admission within each bound', async () => {
    const N = 4
    const syncEveryMs = 100
    const rate = 2000
    const windowMs = 2000
    const prefix = `hy4p${Date.now()}`
    // Windows 2 s, buckets 500/s with a burst of 500: 4 x 2000/s offered saturates every policy.
    const policies = {
      fw: { algorithm: 'fixed-window', limit: 1000, window: windowMs },
      swc: { algorithm: 'sliding-window-counter', limit: 1000, window: windowMs },
      tb: { algorithm: 'token-bucket', limit: 500, window: '1s', burst: 500 },
      gcra: { algorithm: 'gcra', limit: 500, window: '1s', burst: 500 },
    } as const
    // Every worker starts at the beginning of a window at least 300 ms after all are ready, and
    // runs two windows (the sliding window's weight of the previous one is measured in the second).
    let readyCount = 0
    let release!: (startAt: number) => void
    const startGate = new Promise<number>((r) => {
      release = r
    })
    const onReady = () => {
      if (++readyCount === N) release((Math.floor((Date.now() + 300) / windowMs) + 1) * windowMs)
      return startGate
    }
    let startAt = 0
    const plan = (at: number): WorkerPlan => {
      startAt = at
      return {
        port,
        prefix,
        policies,
        syncEvery: `${syncEveryMs}ms`,
        rate,
        startAt: at,
        stopAt: at + 2 * windowMs - 300,
      }
    }
    const running = Promise.all(Array.from({ length: N }, () => worker(plan, onReady)))
    // The counters live a few slices; keep them alive until they are read (PEXPIRE changes no count).
    const sliceKeysOf = (name: keyof typeof policies) => {
      const policy = resolvePolicy(name, { ...policies[name], mode: 'hybrid', syncEvery: `${syncEveryMs}ms` })
      const sliceMs = new HybridPolicy(policy, hybridRedis(client, { prefix })).sliceMs
      const keys: string[] = []
      for (let i = Math.floor(startAt / sliceMs); i <= Math.floor((startAt + 2 * windowMs) / sliceMs); i++)
        keys.push(`${prefix}:{shared}:${name}:h:${i}`)
      return keys
    }
    let done = false
    const keepAlive = (async () => {
      while (!done) {
        await sleep(300)
        if (startAt === 0) continue
        const keys = (Object.keys(policies) as (keyof typeof policies)[]).flatMap(sliceKeysOf)
        await Promise.all(keys.map((k) => client.pexpire(k, 60_000)))
      }
    })()
    const reports = await running
    done = true
    await keepAlive
    const r = Math.max(...reports.map((x) => (x.policies.fw!.offered / x.elapsedMs) * 1000))
    // L: the longest flush round trip any process measured (bounded below by 1 ms).
    const flushLatencyS = Math.max(1, ...reports.map((x) => x.maxFlushMs)) / 1000
    const staleS = (2 * syncEveryMs) / 1000 + flushLatencyS
    const lines: string[] = []
    for (const name of Object.keys(policies) as (keyof typeof policies)[]) {
      const policy = resolvePolicy(name, { ...policies[name], mode: 'hybrid', syncEvery: `${syncEveryMs}ms` })
      const admitted = reports.reduce((n, x) => n + x.policies[name]!.admitted, 0)
      const ticks = mergeTicks(reports.map((x) => x.policies[name]!.ticks))
      // Redis holds exactly what the 4 processes admitted, over every slice: no count lost in the flushes.
      const sliceKeys = sliceKeysOf(name)
      const stored = (await client.mget(sliceKeys)).reduce((n, v) => n + Number(v ?? 0), 0)
      expect(stored, name).toBe(admitted)
      const bucket = policy.algorithm === 'token-bucket' || policy.algorithm === 'gcra'
      const over = bucket ? bucketOver(ticks, policy) : windowOver(ticks, policy, startAt)
      const bound = hybridBound(policy, N, r, staleS)
      lines.push(
        `${name}: admitted ${admitted}, over-admission ${Math.round(over)}, bound ${Math.round(bound)}`,
      )
      expect(over, name).toBeLessThanOrEqual(bound)
      // Saturated: at least what one exact limiter would have admitted, less a rounding tick.
      expect(over, name).toBeGreaterThan(-rate / 100)
    }
    console.log(
      `hybrid 4 processes (r = ${Math.round(r)}/s per process and policy, S = ${syncEveryMs} ms, L = ${Math.round(flushLatencyS * 1000)} ms measured):\n  ${lines.join('\n  ')}`,
    )
  }, 60_000)
})

/** All instances' ticks as one timeline: [time, units admitted], sorted, one entry per ms. */
function mergeTicks(all: [number, number][][]): [number, number][] {
  const byMs = new Map<number, number>()
  for (const ticks of all) for (const [at, n] of ticks) byMs.set(at, (byMs.get(at) ?? 0) + n)
  return [...byMs].sort((a, b) => a[0] - b[0])
}

/**
 * Windows: the most the exact estimate ever exceeded the limit, right after any tick. Fixed
 * window: this window's count; sliding window counter: previous x (window - elapsed) / window + current.
 */
function windowOver(ticks: [number, number][], policy: ResolvedPolicy, startAt: number): number {
  const w = policy.windowMs
  const perWindow = new Map<number, number>()
  let worst = Number.NEGATIVE_INFINITY
  for (const [at, n] of ticks) {
    const index = Math.floor(at / w)
    const current = (perWindow.get(index) ?? 0) + n
    perWindow.set(index, current)
    const previous = policy.algorithm === 'sliding-window-counter' ? (perWindow.get(index - 1) ?? 0) : 0
    worst = Math.max(worst, (previous * (w - (at - index * w))) / w + current - policy.limit)
  }
  expect(Math.floor(startAt / w)).toBe(Math.floor(ticks[0]![0] / w))
  return worst
}

/** Buckets: the most admitted in any stretch [s, t] beyond burst + rate x (t - s). */
function bucketOver(ticks: [number, number][], policy: ResolvedPolicy): number {
  const ratePerMs = policy.limit / policy.windowMs
  let before = 0
  let minStart = Number.POSITIVE_INFINITY
  let worst = Number.NEGATIVE_INFINITY
  for (const [at, n] of ticks) {
    // A stretch starting at this tick: what was admitted before it, less the rate's credit to it.
    minStart = Math.min(minStart, before - ratePerMs * at)
    before += n
    worst = Math.max(worst, before - ratePerMs * at - minStart - policy.capacity)
  }
  return worst
}

/** The bounds of docs/scale.md, with D = 2S + L the longest an instance decides on a stale view. */
function hybridBound(policy: ResolvedPolicy, instances: number, perInstance: number, staleS: number): number {
  if (policy.algorithm === 'token-bucket' || policy.algorithm === 'gcra') {
    const ratePerS = (policy.limit * 1000) / policy.windowMs
    return (instances - 1) * Math.min(perInstance * staleS, policy.capacity + ratePerS * staleS)
  }
  return (instances - 1) * Math.min(perInstance * staleS, policy.limit)
}
