// One OS process of the exactness test: keeps 64 requests in flight against one key per algorithm
// and prints how many were admitted. Run: node --import tsx hammer-worker.ts <json config>
import { Cluster, Redis } from 'ioredis'
import { resolvePolicy } from '../../src/policy.js'
import { redisStore } from '../../src/stores/redis/index.js'

interface Config {
  ports: number[]
  cluster: boolean
  prefix: string
  algorithms: ('fixed-window' | 'sliding-window-log' | 'token-bucket' | 'gcra' | 'sliding-window-counter')[]
  attempts: number
  inFlight: number
  limit: number
  window: string
  /** Wall-clock ms at which every worker starts, so the processes overlap. */
  startAt: number
}

const config = JSON.parse(process.argv[2]!) as Config
const client = config.cluster
  ? new Cluster(config.ports.map((port) => ({ host: '127.0.0.1', port })))
  : new Redis(config.ports[0]!, '127.0.0.1')
const store = redisStore(client, { prefix: config.prefix })
const admitted: Record<string, number> = {}

await new Promise((r) => setTimeout(r, Math.max(0, config.startAt - Date.now())))
await Promise.all(
  config.algorithms.map(async (algorithm) => {
    const policy = resolvePolicy(algorithm.replaceAll('-', '_'), {
      algorithm,
      limit: config.limit,
      window: config.window,
    })
    let sent = 0
    let ok = 0
    const lane = async () => {
      while (sent < config.attempts) {
        sent++
        const [result] = await store.apply([{ policy, key: 'hot', cost: 1 }], 'consume')
        if (result!.allowed) ok++
      }
    }
    await Promise.all(Array.from({ length: config.inFlight }, lane))
    admitted[algorithm] = ok
  }),
)
process.stdout.write(JSON.stringify(admitted))
client.disconnect()
