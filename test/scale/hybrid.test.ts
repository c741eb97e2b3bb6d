// Hybrid mode: 4 OS processes share one key through a real redis-server; the measured
// over-admission must stay within the documented bound (N - 1) * r * (2S + L), and the Redis
// total must equal what the processes admitted. Plus the single-process behaviour.
import { fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import { afterAll, describe, expect, inject, it } from 'vitest'
import { createLimiter } from '../../src/limiter.js'
import { resolvePolicy } from '../../src/policy.js'
import { hybridRedis } from '../../src/stores/redis/hybrid.js'

const { port } = inject('redis')
const client = new Redis(port, '127.0.0.1')
afterAll(() => client.disconnect())
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

interface Report {
  offered: number
  admitted: number
  elapsedMs: number
  maxFlushMs: number
  window: number
}

function worker(plan: (startAt: number) => object, onReady: () => Promise<number>): Promise<Report> {
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
        resolve(m as Report)
      }
    })
    child.on('error', reject)
  })
}

describe('hybrid mode', () => {
  it('policy validation', () => {
    expect(() =>
      resolvePolicy('h', { algorithm: 'token-bucket', limit: 1, window: '1s', mode: 'hybrid' }),
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

  it('4 processes: real over-admission within (N - 1) * r * (2S + L)', async () => {
    const N = 4
    const limit = 2000
    const windowMs = 4000
    const syncEveryMs = 100
    const rate = 2000
    const prefix = `hy4p${Date.now()}`
    // Every worker starts at the beginning of the first window at least 300 ms after all are ready.
    let readyCount = 0
    let release!: (startAt: number) => void
    const startGate = new Promise<number>((r) => {
      release = r
    })
    const onReady = () => {
      if (++readyCount === N) release((Math.floor((Date.now() + 300) / windowMs) + 1) * windowMs + 50)
      return startGate
    }
    const plan = (startAt: number) => ({
      port,
      prefix,
      limit,
      windowMs,
      syncEvery: `${syncEveryMs}ms`,
      rate,
      startAt,
      stopAt: startAt + windowMs - 600,
    })
    const workers = Array.from({ length: N }, () => worker(plan, onReady))
    const reports = await Promise.all(workers)
    const admitted = reports.reduce((n, r) => n + r.admitted, 0)
    const window = reports[0]!.window
    expect(reports.every((r) => r.window === window)).toBe(true)
    // Redis holds exactly what the 4 processes admitted: no count lost in the flushes.
    expect(Number(await client.get(`${prefix}:{shared}:api:h:${window}`))).toBe(admitted)
    const r = Math.max(...reports.map((x) => (x.offered / x.elapsedMs) * 1000))
    // L: the longest flush round trip any process measured (bounded below by 1 ms).
    const flushLatencyS = Math.max(1, ...reports.map((x) => x.maxFlushMs)) / 1000
    const bound = (N - 1) * r * ((2 * syncEveryMs) / 1000 + flushLatencyS)
    const over = admitted - limit
    console.log(
      `hybrid 4 processes: admitted ${admitted} of limit ${limit}, over-admission ${over}, bound ${Math.round(bound)} (r = ${Math.round(r)}/s per process, S = ${syncEveryMs} ms, L = ${Math.round(flushLatencyS * 1000)} ms measured)`,
    )
    expect(admitted).toBeGreaterThanOrEqual(limit)
    expect(over).toBeLessThanOrEqual(bound)
  }, 60_000)
})
