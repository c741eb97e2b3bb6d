// One hybrid-mode instance for the burst test: waits for a start time from the parent, keeps
// `inFlight` requests going on one key of every policy until `stopAt`, gives its leases back, and
// reports what each policy admitted and its lease counts (the parent sums the instances).
import { Redis } from 'ioredis'
import { type RatePolicy, resolvePolicy } from '../../packages/sluice/src/policy.js'
import { HybridPolicy, type HybridStats } from '../../packages/sluice/src/scale/hybrid.js'
import { hybridRedis } from '../../packages/sluice/src/stores/redis/hybrid.js'

export interface WorkerPlan {
  port: number
  prefix: string
  /** The policies, all hybrid, by name (`mode` and `syncEvery` are added here). */
  policies: Record<string, Omit<RatePolicy, 'mode' | 'syncEvery'>>
  syncEvery: string
  inFlight: number
  startAt: number
  stopAt: number
}

export interface PolicyReport {
  offered: number
  admitted: number
  stats: HybridStats
}

export interface WorkerReport {
  policies: Record<string, PolicyReport>
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)))

process.once('message', async (plan: WorkerPlan) => {
  const client = new Redis(plan.port, '127.0.0.1')
  const backend = hybridRedis(client, { prefix: plan.prefix })
  const names = Object.keys(plan.policies)
  const hybrids = names.map(
    (name) =>
      new HybridPolicy(
        resolvePolicy(name, {
          ...plan.policies[name]!,
          mode: 'hybrid',
          syncEvery: plan.syncEvery,
        } as RatePolicy),
        backend,
      ),
  )
  const reports: Record<string, PolicyReport> = {}
  await client.ping()
  // A timer may fire a millisecond early: wait until the wall clock has reached the start.
  while (Date.now() < plan.startAt) await sleep(plan.startAt - Date.now())
  await Promise.all(
    hybrids.map(async (hybrid) => {
      const report: PolicyReport = { offered: 0, admitted: 0, stats: hybrid.stats }
      reports[hybrid.policy.name] = report
      const step = { policy: hybrid.policy, key: 'shared', cost: 1 }
      const loop = async () => {
        while (Date.now() < plan.stopAt) {
          report.offered++
          const r = await hybrid.apply(step, 'consume')
          if (r.allowed) report.admitted++
          else await sleep(1)
        }
      }
      await Promise.all(Array.from({ length: plan.inFlight }, loop))
    }),
  )
  await Promise.all(hybrids.map((h) => h.close()))
  client.disconnect()
  const done: WorkerReport = { policies: reports }
  process.send!(done)
  process.disconnect()
})
process.send!('ready')
