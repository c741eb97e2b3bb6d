// One region's instance for the multi-region test: a limiter on multiRegionStore whose local Redis
// is direct and whose other regions are reached through latency proxies. The parent drives it over
// IPC: `run` offers `rate` requests/s on one key between two instants and reports what it admitted
// and the region's share after each sync, `peek` reports the key's remaining in this region,
// `regions` the store's view of every region. With `driveSyncs`, the store's own timer is off
// (syncEvery 1h) and the worker calls `store.sync()` every `syncEveryMs`, so every sync is seen.
import { Redis } from 'ioredis'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { multiRegionStore } from '../../packages/sluice/src/stores/multi-region/index.js'

export interface WorkerPlan {
  region: string
  /** Port per region: the local Redis itself, the others' proxies. */
  ports: Record<string, number>
  prefix: string
  limit: number
  window: string
  syncEvery: string
  /** Sync by calling store.sync() every this many ms instead of the store's timer. */
  driveSyncsMs?: number
}
export type Command =
  | { op: 'run'; key: string; rate: number; startAt: number; stopAt: number }
  | { op: 'peek'; key: string }
  | { op: 'regions' }
  | { op: 'shares'; key: string }
  | { op: 'stop' }
export interface RunReport {
  offered: number
  admitted: number
  errors: number
  elapsedMs: number
  /** Longest PING round trip to another region during the run (the RTT of the bound). */
  maxRemoteRttMs: number
  /**
   * The first sync that started after the first request was offered, so the first to publish the
   * demand (counted as store.syncs counts; only with driveSyncsMs, else the syncs done by then + 1).
   */
  firstSync: number
  /** The region's share of the key (units) after each sync, by store.syncs. */
  shareBySync: Record<number, number>
  /** When each sync of shareBySync ended, in ms after the first request (printed, never asserted). */
  syncEndMs: Record<number, number>
  /** Longest time one sync took (the parent states it beside the sync count). */
  maxSyncMs: number
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)))

process.once('message', (plan: WorkerPlan) => {
  const clients = Object.fromEntries(
    Object.entries(plan.ports).map(([region, port]) => [
      region,
      // No offline queue growth without bound while a link is cut: the store times its calls out.
      new Redis(port, '127.0.0.1', { maxRetriesPerRequest: null, retryStrategy: () => 50 }),
    ]),
  )
  const store = multiRegionStore({
    region: plan.region,
    regions: clients,
    syncEvery: plan.driveSyncsMs === undefined ? plan.syncEvery : '1h',
    // Past 7 syncs: a busy two-core machine can delay one exchange past the default 5, while the cut
    // region (cut for the whole 2 s run before it is looked at) is past it by far.
    staleAfter: plan.driveSyncsMs === undefined ? '1500ms' : '2h',
    prefix: plan.prefix,
  })
  const limiter = createLimiter({
    store,
    // Every decision goes to the store: the deny cache would answer some denials locally.
    localDenyCache: false,
    // Generous: the local Redis is direct, but two cores run three regions and the test.
    storeTimeout: 2000,
    policies: {
      api: { algorithm: 'sliding-window-counter', limit: plan.limit, window: plan.window, scope: 'global' },
    },
  })
  const remotes = Object.keys(plan.ports).filter((r) => r !== plan.region)
  const shareBySync: Record<number, number> = {}
  const syncEndMs: Record<number, number> = {}
  let firstRequestAt = 0
  let maxSyncMs = 0
  let stopping = false
  let syncsStarted = 0
  let watched: string | undefined
  const record = () => {
    const share = watched === undefined ? undefined : store.keyShare('api', watched)
    if (share !== undefined && shareBySync[store.syncs] === undefined) {
      shareBySync[store.syncs] = share
      syncEndMs[store.syncs] = Date.now() - firstRequestAt
    }
  }
  // With the store's timer, looked at often; with driveSyncsMs, right after each sync only (a share
  // that moves during a sync is then never booked to the sync before).
  const watcher = setInterval(() => {
    if (plan.driveSyncsMs === undefined) record()
  }, 2)
  if (plan.driveSyncsMs !== undefined) {
    const every = plan.driveSyncsMs
    void (async () => {
      while (!stopping) {
        const started = Date.now()
        syncsStarted++
        await store.sync()
        maxSyncMs = Math.max(maxSyncMs, Date.now() - started)
        record()
        await sleep(every - (Date.now() % every))
      }
    })()
  }

  async function run(c: Extract<Command, { op: 'run' }>): Promise<RunReport> {
    let maxRemoteRttMs = 0
    let pinging = true
    const pinger = (async () => {
      while (pinging) {
        for (const r of remotes) {
          const started = performance.now()
          // A cut link never answers: not a round trip, and not a reason to wait.
          const answered = await Promise.race([
            clients[r]!.ping().then(
              () => true,
              () => false,
            ),
            sleep(1000).then(() => false),
          ])
          if (answered) maxRemoteRttMs = Math.max(maxRemoteRttMs, performance.now() - started)
        }
        await sleep(100)
      }
    })()
    await sleep(c.startAt - Date.now())
    const firstSync = (plan.driveSyncsMs === undefined ? store.syncs : syncsStarted) + 1
    for (const k of Object.keys(shareBySync)) delete shareBySync[Number(k)]
    for (const k of Object.keys(syncEndMs)) delete syncEndMs[Number(k)]
    firstRequestAt = Date.now()
    watched = c.key
    const perTick = Math.max(1, Math.round((c.rate * 10) / 1000))
    let offered = 0
    let admitted = 0
    let errors = 0
    const started = Date.now()
    const inFlight = new Set<Promise<void>>()
    while (Date.now() < c.stopAt) {
      for (let i = 0; i < perTick; i++) {
        offered++
        const p = limiter.consume('api', c.key).then(
          (d) => {
            if (d.allowed && d.degraded !== true) admitted++
            if (d.degraded === true) errors++
          },
          () => {
            errors++
          },
        )
        inFlight.add(p)
        void p.finally(() => inFlight.delete(p))
      }
      await sleep(10)
    }
    await Promise.all(inFlight)
    const elapsedMs = Date.now() - started
    pinging = false
    await pinger
    await store.sync()
    record()
    return {
      offered,
      admitted,
      errors,
      elapsedMs,
      maxRemoteRttMs,
      firstSync,
      shareBySync: { ...shareBySync },
      syncEndMs: { ...syncEndMs },
      maxSyncMs,
    }
  }

  process.on('message', async (c: Command) => {
    if (c.op === 'run') process.send!({ op: 'run', report: await run(c) })
    else if (c.op === 'peek') process.send!({ op: 'peek', decision: await limiter.peek('api', c.key) })
    else if (c.op === 'regions') process.send!({ op: 'regions', regions: store.regions() })
    else if (c.op === 'shares')
      process.send!({ op: 'shares', shares: store.shares(), share: store.keyShare('api', c.key) })
    else {
      clearInterval(watcher)
      stopping = true
      await limiter.close()
      for (const client of Object.values(clients)) client.disconnect()
      process.send!({ op: 'stop' })
      process.disconnect()
    }
  })
  process.send!({ op: 'ready' })
})
process.send!({ op: 'hello' })
