// Multi-region limits: three private redis-servers, one per region; three OS processes,
// one per region, each on multiRegionStore with its own Redis direct and the two others behind
// latency proxies (40 ms each way). Each region admits within its share of a global key's limit:
// hammered from all three at once, they admit at most the limit together (the bound of
// docs/topologies.md with one instance per region); with one region busy and two idle, the busy
// one holds 90% of the limit within three of its syncs. Then one region's links are cut and
// healed: decisions continue within the shares, the region shows stale and then fresh, the totals
// converge with nothing counted twice.
import { type ChildProcess, fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type RedisServer, redisCli, startRedis } from '../helpers/redis-harness.js'
import { type LatencyProxy, startLatencyProxy } from './latency-proxy.js'
import type { Command, RunReport, WorkerPlan } from './multi-region-worker.js'

const REGIONS = ['eu', 'us', 'ap'] as const
type Region = (typeof REGIONS)[number]
const ONE_WAY_MS = 40
const SYNC_EVERY_MS = 100
const WINDOW = '1h'
const WINDOW_MS = 3_600_000
const LIMIT = 300
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

interface Worker {
  child: ChildProcess
  ask<T>(command: Command): Promise<T>
}

function startWorker(plan: WorkerPlan): Promise<Worker> {
  const child = fork(fileURLToPath(new URL('./multi-region-worker.ts', import.meta.url)), {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  const waiting: ((m: { op: string }) => void)[] = []
  child.on('message', (m: { op: string }) => {
    if (m.op === 'hello') child.send(plan)
    else waiting.shift()?.(m)
  })
  const ask = <T>(command: Command) =>
    new Promise<T>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`worker ${plan.region}: no answer to ${command.op}`)),
        20_000,
      )
      waiting.push((m) => {
        clearTimeout(timer)
        resolve(m as T)
      })
      child.send(command)
    })
  return new Promise((resolve, reject) => {
    waiting.push(() => resolve({ child, ask }))
    child.once('error', reject)
    setTimeout(() => reject(new Error(`worker ${plan.region} did not start`)), 20_000)
  })
}

/** Three regions: a redis-server each, latency proxies between them, one worker process each. */
function topology(extra: Partial<WorkerPlan> = {}) {
  const redis = new Map<Region, RedisServer>()
  /** proxies.get(`${from}->${to}`): how `from` reaches `to`'s Redis. */
  const proxies = new Map<string, LatencyProxy>()
  const workers = new Map<Region, Worker>()
  const prefix = `mr${Date.now()}`

  beforeAll(async () => {
    for (const r of REGIONS) redis.set(r, await startRedis())
    for (const from of REGIONS)
      for (const to of REGIONS)
        if (from !== to)
          proxies.set(`${from}->${to}`, await startLatencyProxy(redis.get(to)!.port, ONE_WAY_MS))
    // The whole describe runs in one aligned window (previous window empty): near an hour's end,
    // wait for the next one.
    const left = WINDOW_MS - (Date.now() % WINDOW_MS)
    if (left < 40_000) await sleep(left + 1000)
    const started = await Promise.all(
      REGIONS.map((region) =>
        startWorker({
          region,
          ports: Object.fromEntries(
            REGIONS.map((to) => [
              to,
              to === region ? redis.get(to)!.port : proxies.get(`${region}->${to}`)!.port,
            ]),
          ),
          prefix,
          limit: LIMIT,
          window: WINDOW,
          syncEvery: `${SYNC_EVERY_MS}ms`,
          ...extra,
        }),
      ),
    )
    for (const [i, r] of REGIONS.entries()) workers.set(r, started[i]!)
  }, 90_000)
  afterAll(async () => {
    await Promise.all(
      [...workers.values()].map((w) => w.ask({ op: 'stop' }).catch(() => w.child.kill('SIGKILL'))),
    )
    await Promise.all([...proxies.values()].map((p) => p.close()))
    await Promise.all([...redis.values()].map((r) => r.stop()))
  })

  const runAll = async (
    key: string,
    rate: number,
    durationMs: number,
    regions: readonly Region[] = REGIONS,
  ) => {
    const startAt = Date.now() + 300
    const answers = await Promise.all(
      regions.map((r) =>
        workers
          .get(r)!
          .ask<{ report: RunReport }>({ op: 'run', key, rate, startAt, stopAt: startAt + durationMs }),
      ),
    )
    return new Map(regions.map((r, i) => [r, answers[i]!.report]))
  }
  /** What each region's Redis holds for the key: the sum of its instances' fields. */
  const storedTotal = async (region: Region, key: string) => {
    const index = Math.floor(Date.now() / WINDOW_MS)
    const values = await redisCli(redis.get(region)!.port, 'HVALS', `${prefix}:mr:{${key}}:api:${index}`)
    return values === '' ? 0 : values.split('\n').reduce((sum, v) => sum + Number(v), 0)
  }
  /** What each region may still admit of the key: its share less its usage. */
  const remainingEverywhere = async (key: string) =>
    Promise.all(
      REGIONS.map(
        async (r) =>
          (await workers.get(r)!.ask<{ decision: { remaining: number } }>({ op: 'peek', key })).decision
            .remaining,
      ),
    )
  const regionsOf = async (r: Region) =>
    (
      await workers
        .get(r)!
        .ask<{ regions: { region: string; stale: boolean; lastSyncAgeMs: number | null }[] }>({
          op: 'regions',
        })
    ).regions
  /** The region's share of the key, in units. */
  const shareOf = async (r: Region, key: string) =>
    (await workers.get(r)!.ask<{ share: number | undefined }>({ op: 'shares', key })).share
  return { proxies, workers, runAll, storedTotal, remainingEverywhere, regionsOf, shareOf }
}

describe('multi-region: three regions, three processes, one global key', () => {
  const { proxies, runAll, storedTotal, remainingEverywhere, regionsOf, shareOf } = topology()

  it('hammered from three regions at once, twice: at most the limit admitted in all, and close to it', async () => {
    for (const key of ['hot-1', 'hot-2']) {
      const reports = await runAll(key, 400, 3000)
      let admitted = 0
      let offered = 0
      for (const r of REGIONS) {
        const report = reports.get(r)!
        expect(report.errors, `${r}: store errors`).toBe(0)
        admitted += report.admitted
        offered += report.offered
        // Nothing double-counted: what each region's Redis holds is what its process admitted.
        expect(await storedTotal(r, key), r).toBe(report.admitted)
      }
      // docs/topologies.md: with one instance per region, the bound is the limit itself (it
      // implies the issue's goal of 1.1 x the limit).
      const bound = LIMIT
      console.log(
        `multi-region shares, ${key}: admitted ${admitted} of limit ${LIMIT} (${[...reports].map(([r, x]) => `${r} ${x.admitted}/${x.offered}`).join(', ')}); ` +
          `bound ${bound}, ${(admitted / LIMIT).toFixed(3)} x the limit; offered ${offered}`,
      )
      expect(admitted).toBeLessThanOrEqual(bound)
      expect(admitted).toBeLessThanOrEqual(1.1 * LIMIT)
      // Saturated: every region offered far more than its share, and the shares were spent.
      expect(admitted).toBeGreaterThanOrEqual(0.9 * LIMIT)
      // After a sync, what the regions may still admit adds up to the limit less what was admitted.
      await sleep(3 * SYNC_EVERY_MS + 4 * ONE_WAY_MS)
      const remaining = await remainingEverywhere(key)
      expect(remaining.reduce((a, b) => a + b)).toBe(LIMIT - admitted)
    }
  })

  it('one region cut off and healed: decisions continue within the shares, staleness shown then cleared, totals converge', async () => {
    const key = 'split'
    const cutOff: Region = 'ap'
    for (const [link, proxy] of proxies) if (link.includes(cutOff)) proxy.cut()
    // 100 requests/s (one per 10 ms tick) for 600 ms: about 60 asked per region.
    const during = await runAll(key, 100, 600)
    for (const r of REGIONS) {
      expect(during.get(r)!.errors, `${r}: decisions during the partition`).toBe(0)
      // Under every region's share (100): all admitted, the cut region's too.
      expect(during.get(r)!.admitted, JSON.stringify(during.get(r))).toBe(during.get(r)!.offered)
    }
    // Stale both ways: the cut region sees the others stale, they see it stale; eu and us see each other
    // fresh. Looked at until it shows (the cut holds meanwhile), so a loaded machine that delays one
    // exchange of eu and us past staleAfter only makes the test wait.
    let euView = await regionsOf('eu')
    let apView = await regionsOf(cutOff)
    const shown = () =>
      euView.find((v) => v.region === cutOff)!.stale &&
      !euView.find((v) => v.region === 'us')!.stale &&
      apView.filter((v) => !v.region.startsWith(cutOff)).every((v) => v.stale)
    for (const shownBy = Date.now() + 10_000; !shown() && Date.now() < shownBy; ) {
      await sleep(SYNC_EVERY_MS)
      euView = await regionsOf('eu')
      apView = await regionsOf(cutOff)
    }
    expect(euView.find((v) => v.region === cutOff)!.stale, JSON.stringify(euView)).toBe(true)
    expect(euView.find((v) => v.region === 'us')!.stale, JSON.stringify(euView)).toBe(false)
    expect(
      apView.filter((v) => !v.region.startsWith(cutOff)).every((v) => v.stale),
      JSON.stringify(apView),
    ).toBe(true)
    // The cut region keeps its share (it never moved: ap was cut before the key's first request), and
    // the others do not take it over: eu and us hold the rest between them at most.
    const apShare = (await shareOf(cutOff, key))!
    expect(apShare).toBe(LIMIT / 3)
    expect((await shareOf('eu', key))! + (await shareOf('us', key))!).toBeLessThanOrEqual(LIMIT - apShare)
    // Hammered while cut: each region stops at its share, so together at the limit.
    const hammered = await runAll(`${key}-full`, 400, 1500)
    let full = 0
    for (const r of REGIONS) {
      expect(hammered.get(r)!.errors).toBe(0)
      full += hammered.get(r)!.admitted
    }
    expect(full).toBeLessThanOrEqual(LIMIT)

    for (const [link, proxy] of proxies) if (link.includes(cutOff)) proxy.heal()
    const healedBy = Date.now() + 10_000
    for (;;) {
      const views = await Promise.all(REGIONS.map(regionsOf))
      if (views.flat().every((v) => !v.stale)) break
      if (Date.now() > healedBy) throw new Error(`still stale after the heal: ${JSON.stringify(views)}`)
      await sleep(100)
    }
    await sleep(3 * SYNC_EVERY_MS + 4 * ONE_WAY_MS)
    // Converged, nothing double-counted: what the regions may still admit adds up to the limit
    // less everything admitted.
    let admitted = 0
    for (const r of REGIONS) {
      admitted += during.get(r)!.admitted
      expect(await storedTotal(r, key), r).toBe(during.get(r)!.admitted)
    }
    expect((await remainingEverywhere(key)).reduce((a, b) => a + b)).toBe(LIMIT - admitted)
  })
})

describe('multi-region: one region busy, two idle', () => {
  // Each process calls store.sync() every SYNC_EVERY_MS itself, so the test counts the syncs.
  const { runAll, storedTotal, shareOf } = topology({ driveSyncsMs: SYNC_EVERY_MS })

  it('the busy region holds 90% of the limit by its third sync after its demand is published, twice', async () => {
    for (const key of ['skew-1', 'skew-2']) {
      const reports = await runAll(key, 400, 2000, ['eu'])
      const eu = reports.get('eu')!
      expect(eu.errors).toBe(0)
      // Counted from the first sync that starts after the first request (it publishes eu's demand)
      // as sync 1.
      const reached = Object.entries(eu.shareBySync)
        .map(([n, share]) => [Number(n), share] as const)
        .filter(([n, share]) => n >= eu.firstSync && share >= 0.9 * LIMIT)
        .map(([n]) => n - eu.firstSync + 1)
      const syncsNeeded = Math.min(...reached)
      const reachedMs = eu.syncEndMs[eu.firstSync + syncsNeeded - 1]
      console.log(
        `multi-region shares, ${key}: eu admitted ${eu.admitted}/${eu.offered}; share by sync ${JSON.stringify(eu.shareBySync)} ` +
          `(demand published by sync ${eu.firstSync}); 90% at its sync ${syncsNeeded} counting that one, ${reachedMs} ms after the first request; longest sync ${eu.maxSyncMs} ms`,
      )
      expect(syncsNeeded, JSON.stringify(eu)).toBeLessThanOrEqual(3)
      expect(eu.admitted).toBeGreaterThanOrEqual(0.9 * LIMIT)
      expect(eu.admitted).toBeLessThanOrEqual(LIMIT)
      expect(await storedTotal('eu', key)).toBe(eu.admitted)
      // The idle regions handed their shares over (those of the last key they synced).
      for (const r of ['us', 'ap'] as const) expect(await shareOf(r, key), r).toBeLessThan(0.1 * LIMIT)
    }
  })
})
