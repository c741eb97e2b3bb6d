// One region's instance for the multi-region test: a limiter on multiRegionStore whose local Redis
// is direct and whose other regions are reached through latency proxies. The parent drives it over
// IPC: `run` offers `rate` requests/s on one key between two instants and reports what it admitted,
// `peek` reports the key's global remaining, `regions` the store's view of every region.
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
}
export type Command =
  | { op: 'run'; key: string; rate: number; startAt: number; stopAt: number }
  | { op: 'peek'; key: string }
  | { op: 'regions' }
  | { op: 'stop' }
export interface RunReport {
  offered: number
  admitted: number
  errors: number
  elapsedMs: number
  /** Longest PING round trip to another region during the run (the RTT of the bound). */
  maxRemoteRttMs: number
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
    syncEvery: plan.syncEvery,
    // Past 7 syncs: a busy two-core machine can delay one exchange past the default 5, while the cut
    // region (cut for the whole 2 s run before it is looked at) is past it by far.
    staleAfter: '1500ms',
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
    return { offered, admitted, errors, elapsedMs, maxRemoteRttMs }
  }

  process.on('message', async (c: Command) => {
    if (c.op === 'run') process.send!({ op: 'run', report: await run(c) })
    else if (c.op === 'peek') process.send!({ op: 'peek', decision: await limiter.peek('api', c.key) })
    else if (c.op === 'regions') process.send!({ op: 'regions', regions: store.regions() })
    else {
      await limiter.close()
      for (const client of Object.values(clients)) client.disconnect()
      process.send!({ op: 'stop' })
      process.disconnect()
    }
  })
  process.send!({ op: 'ready' })
})
process.send!({ op: 'hello' })
