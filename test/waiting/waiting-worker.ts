// One OS process of the waiting tests: queues `calls` waiters (or throttled HTTP calls) on one key
// of a shared Redis and prints, per call in the order it was made, whether and when (Date.now) it
// was admitted. Run: node --import tsx waiting-worker.ts <json config>
import { Cluster, Redis } from 'ioredis'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { redisStore } from '../../packages/sluice/src/stores/redis/index.js'

interface Config {
  mode: 'wait' | 'throttle'
  ports: number[]
  cluster: boolean
  prefix: string
  algorithm: 'token-bucket' | 'gcra' | 'fixed-window'
  limit: number
  window: number
  burst?: number
  calls: number
  maxWaitMs: number
  /** throttle: the test server; calls to `/fail` answer 500. */
  url?: string
  /** Wall-clock ms at which every worker starts, so the processes overlap. */
  startAt: number
}

const config = JSON.parse(process.argv[2]!) as Config
const client = config.cluster
  ? new Cluster(config.ports.map((port) => ({ host: '127.0.0.1', port })))
  : new Redis(config.ports[0]!, '127.0.0.1')
const policy =
  config.algorithm === 'fixed-window'
    ? { algorithm: config.algorithm, limit: config.limit, window: config.window }
    : {
        algorithm: config.algorithm,
        limit: config.limit,
        window: config.window,
        burst: config.burst ?? config.limit,
      }
const limiter = createLimiter({
  store: redisStore(client, { prefix: config.prefix }),
  storeTimeout: 2_000,
  policies: { shared: policy },
})

interface Outcome {
  index: number
  allowed: boolean
  at: number
  reason?: string
  error?: string
}
const outcomes: Outcome[] = []

await new Promise((r) => setTimeout(r, Math.max(0, config.startAt - Date.now())))
if (config.mode === 'wait') {
  await Promise.all(
    Array.from({ length: config.calls }, async (_, index) => {
      const d = await limiter.wait('shared', 'hot', { maxWaitMs: config.maxWaitMs })
      const outcome: Outcome = { index, allowed: d.allowed, at: Date.now() }
      if (d.reason !== undefined) outcome.reason = d.reason
      outcomes.push(outcome)
    }),
  )
} else {
  const call = limiter.throttle(
    'shared',
    async (path: string) => {
      const response = await fetch(`${config.url}${path}`)
      if (!response.ok) throw new Error(`upstream ${response.status}`)
      return response.text()
    },
    { key: () => 'app-installation-42', maxWaitMs: config.maxWaitMs, concurrency: 3 },
  )
  await Promise.all(
    Array.from({ length: config.calls }, async (_, index) => {
      try {
        await call(index % 5 === 4 ? '/fail' : `/ok/${process.pid}/${index}`)
        outcomes.push({ index, allowed: true, at: Date.now() })
      } catch (error) {
        outcomes.push({ index, allowed: false, at: Date.now(), error: (error as Error).message })
      }
    }),
  )
}
process.stdout.write(JSON.stringify(outcomes))
client.disconnect()
