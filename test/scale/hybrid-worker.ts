// One hybrid-mode instance for the over-admission test: waits for a start time from the parent,
// offers `rate` requests/s on one key of every policy until `stop`, then flushes and reports what
// each policy admitted, tick by tick (the parent sums the instances and measures over-admission).
import { Redis } from 'ioredis'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import type { RatePolicy } from '../../packages/sluice/src/policy.js'
import type { HybridBackend } from '../../packages/sluice/src/scale/hybrid.js'
import { hybridRedis } from '../../packages/sluice/src/stores/redis/hybrid.js'

export interface WorkerPlan {
  port: number
  prefix: string
  /** The policies, all hybrid, by name (`mode` and `syncEvery` are added here). */
  policies: Record<string, Omit<RatePolicy, 'mode' | 'syncEvery'>>
  syncEvery: string
  rate: number
  startAt: number
  stopAt: number
}

export interface PolicyReport {
  offered: number
  admitted: number
  /** [Date.now() of a tick, units admitted in it], ticks that admitted something. */
  ticks: [number, number][]
}

export interface WorkerReport {
  elapsedMs: number
  maxFlushMs: number
  policies: Record<string, PolicyReport>
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)))

process.once('message', async (plan: WorkerPlan) => {
  const client = new Redis(plan.port, '127.0.0.1')
  // Time every flush: its longest round trip is the L of the over-admission bound.
  const backend = hybridRedis(client, { prefix: plan.prefix })
  let maxFlushMs = 0
  const timed: HybridBackend = {
    ...backend,
    async add(counters) {
      const started = performance.now()
      try {
        return await backend.add(counters)
      } finally {
        maxFlushMs = Math.max(maxFlushMs, performance.now() - started)
      }
    },
  }
  const names = Object.keys(plan.policies)
  const policies = Object.fromEntries(
    names.map((name) => [name, { ...plan.policies[name]!, mode: 'hybrid', syncEvery: plan.syncEvery }]),
  ) as Record<string, RatePolicy>
  const limiter = createLimiter({ hybrid: timed, policies })
  await client.ping()
  // A timer may fire a millisecond before the wall clock reaches its time: wait until it has, so no
  // request lands in the window before the one every worker starts in.
  while (Date.now() < plan.startAt) await sleep(plan.startAt - Date.now())
  // Requests in batches every 5 ms, so the offered rate does not depend on how fast the loop spins.
  const perTick = Math.max(1, Math.round((plan.rate * 5) / 1000))
  const reports: Record<string, PolicyReport> = Object.fromEntries(
    names.map((name) => [name, { offered: 0, admitted: 0, ticks: [] }]),
  )
  const started = Date.now()
  while (Date.now() < plan.stopAt) {
    const tickAt = Date.now()
    for (const name of names) {
      const report = reports[name]!
      let admitted = 0
      for (let i = 0; i < perTick; i++) if (limiter.consumeSync(name, 'shared').allowed) admitted++
      report.offered += perTick
      report.admitted += admitted
      if (admitted > 0) report.ticks.push([tickAt, admitted])
    }
    await sleep(5)
  }
  const elapsedMs = Date.now() - started
  await limiter.close()
  client.disconnect()
  const done: WorkerReport = { elapsedMs, maxFlushMs, policies: reports }
  process.send!(done)
  process.disconnect()
})
process.send!('ready')
