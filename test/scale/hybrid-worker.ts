// One hybrid-mode instance for the over-admission test: waits for a start time from the parent,
// offers `rate` requests/s on one key until `stop`, then flushes and reports what it admitted.
import { Redis } from 'ioredis'
import { createLimiter } from '../../src/limiter.js'
import type { HybridBackend } from '../../src/scale/hybrid.js'
import { hybridRedis } from '../../src/stores/redis/hybrid.js'

interface Plan {
  port: number
  prefix: string
  limit: number
  windowMs: number
  syncEvery: string
  rate: number
  startAt: number
  stopAt: number
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)))

process.once('message', async (plan: Plan) => {
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
  const limiter = createLimiter({
    hybrid: timed,
    policies: {
      api: {
        algorithm: 'fixed-window',
        limit: plan.limit,
        window: plan.windowMs,
        mode: 'hybrid',
        syncEvery: plan.syncEvery,
      },
    },
  })
  await client.ping()
  await sleep(plan.startAt - Date.now())
  // Requests in batches every 5 ms, so the offered rate does not depend on how fast the loop spins.
  const perTick = Math.max(1, Math.round((plan.rate * 5) / 1000))
  let offered = 0
  let admitted = 0
  const started = Date.now()
  while (Date.now() < plan.stopAt) {
    for (let i = 0; i < perTick; i++) {
      offered++
      if (limiter.consumeSync('api', 'shared').allowed) admitted++
    }
    await sleep(5)
  }
  const elapsedMs = Date.now() - started
  await limiter.close()
  client.disconnect()
  process.send!({
    offered,
    admitted,
    elapsedMs,
    maxFlushMs,
    window: Math.floor(plan.startAt / plan.windowMs),
  })
  process.disconnect()
})
process.send!('ready')
