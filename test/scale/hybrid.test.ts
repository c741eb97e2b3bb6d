// Hybrid mode with leases: N = 3 and N = 8 OS processes hammer one key of every hybrid algorithm
// (fixed window, sliding window counter, token bucket, GCRA) through a real redis-server at once,
// with a limit that does not refill during the run: together they never admit more than the
// limit, every leased unit is spent or given back, and Redis holds exactly what was admitted.
// Plus the single-process behaviour through the limiter.
import { fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import { afterAll, describe, expect, inject, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { resolvePolicy } from '../../packages/sluice/src/policy.js'
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

const LIMIT = 200
// A limit of 200 that nothing refills during a run of seconds: windows of a day, buckets of 200 that
// refill one unit a day. Exact Redis decisions admit exactly 200 of such a burst.
const policies = {
  fw: { algorithm: 'fixed-window', limit: LIMIT, window: '1d' },
  swc: { algorithm: 'sliding-window-counter', limit: LIMIT, window: '1d' },
  tb: { algorithm: 'token-bucket', limit: 1, window: '1d', burst: LIMIT },
  gcra: { algorithm: 'gcra', limit: 1, window: '1d', burst: LIMIT },
} as const
type Name = keyof typeof policies

async function burst(instances: number, runMs: number) {
  const prefix = `hyl${instances}-${Date.now()}`
  // Stay away from a day's edge, where the windows roll.
  const dayMs = 86_400_000
  if (Date.now() % dayMs > dayMs - 60_000) await sleep(dayMs - (Date.now() % dayMs) + 10)
  let readyCount = 0
  let release!: (startAt: number) => void
  const startGate = new Promise<number>((r) => {
    release = r
  })
  const onReady = () => {
    if (++readyCount === instances) release(Date.now() + 300)
    return startGate
  }
  const plan = (startAt: number): WorkerPlan => ({
    port,
    prefix,
    policies,
    syncEvery: '100ms',
    inFlight: 8,
    startAt,
    stopAt: startAt + runMs,
  })
  const reports = await Promise.all(Array.from({ length: instances }, () => worker(plan, onReady)))
  const backend = hybridRedis(client, { prefix })
  const lines: string[] = []
  for (const name of Object.keys(policies) as Name[]) {
    const policy = resolvePolicy(name, { ...policies[name], mode: 'hybrid' })
    const per = reports.map((r) => r.policies[name]!)
    const admitted = per.reduce((n, p) => n + p.admitted, 0)
    const leased = per.reduce((n, p) => n + p.stats.unitsLeased, 0)
    const spent = per.reduce((n, p) => n + p.stats.unitsSpent, 0)
    const returned = per.reduce((n, p) => n + p.stats.unitsReturned, 0)
    const lost = per.reduce((n, p) => n + p.stats.unitsLost, 0)
    const leases = per.reduce((n, p) => n + p.stats.leasesTaken, 0)
    const ended = per.reduce((n, p) => n + p.stats.leasesEnded, 0)
    lines.push(
      `${name}: admitted ${admitted} of ${LIMIT}, ${leases} leases of ${leased} units (${spent} spent, ${returned} returned)`,
    )
    // Never over the limit.
    expect(admitted, name).toBeLessThanOrEqual(LIMIT)
    // Every lease ended, and every leased unit is accounted for.
    expect(ended, name).toBe(leases)
    expect(lost, name).toBe(0)
    expect(spent + returned, name).toBe(leased)
    // Redis holds what was admitted, no more (every unspent unit came back): windows count units;
    // a bucket's debt is units x window, less the refill of the run (under one unit).
    const state = await client.hgetall(backend.keyOf(policy.id, 'shared'))
    const used =
      policy.algorithm === 'fixed-window' || policy.algorithm === 'sliding-window-counter'
        ? Number(state.c)
        : Math.ceil(Number(state.d) / policy.windowMs)
    expect(used, name).toBe(admitted)
  }
  console.log(`hybrid leases, ${instances} processes, ${runMs} ms:\n  ${lines.join('\n  ')}`)
  return reports
}

describe('hybrid mode, leases', () => {
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

  it('one process through the limiter: a cold key is decided in Redis, a hot one from its lease', async () => {
    const prefix = `hy1-${Date.now()}`
    const policies1 = {
      h: { algorithm: 'fixed-window', limit: 100, window: '1d', mode: 'hybrid', syncEvery: '50ms' },
    } as const
    const backend = hybridRedis(client, { prefix })
    const a = createLimiter({ hybrid: backend, policies: policies1 })
    // Cold: a plain decision, so no answer in this tick.
    expect(() => a.consumeSync('h', 'k')).toThrow(expect.objectContaining({ code: 'SLUICE_INVALID_OPTIONS' }))
    await expect(a.consume('h', 'k')).resolves.toMatchObject({ allowed: true, limit: 100 })
    // Hot now: this call takes a lease (at most a quarter of what is left) and the next ones spend it.
    await expect(a.consume('h', 'k')).resolves.toMatchObject({ allowed: true })
    expect(a.consumeSync('h', 'k')).toMatchObject({ allowed: true })
    const key = backend.keyOf(a.policies.h.id, 'k')
    // Redis was charged for the whole lease before its units were spent.
    expect(Number(await client.hget(key, 'c'))).toBeGreaterThan(3)
    await a.close()
    // Closed: the unspent units are back; Redis holds the admitted ones: 3 requests plus the 1 consumeSync threw on.
    expect(Number(await client.hget(key, 'c'))).toBe(4)
    await a.reset('h', 'k')
    expect(await client.exists(key)).toBe(0)
  })

  for (const instances of [3, 8])
    it(`${instances} processes, one key of every algorithm at once: never over the limit, every leased unit accounted`, async () => {
      await burst(instances, 2000)
    }, 60_000)
})
