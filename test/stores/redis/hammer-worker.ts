// One OS process of the exactness test: keeps 64 requests in flight against one key per algorithm
// and prints how many were admitted. Run: node --import tsx hammer-worker.ts <json config>
import { Cluster, Redis } from 'ioredis'
import { redisStore } from '../../../packages/sluice/src/stores/redis/index.js'
import { hammerOneKey } from '../../helpers/hammer.js'

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

await new Promise((r) => setTimeout(r, Math.max(0, config.startAt - Date.now())))
const admitted = await hammerOneKey(store, {
  algorithms: config.algorithms,
  attempts: config.attempts,
  lanes: config.inFlight,
  limit: config.limit,
  window: config.window,
})
process.stdout.write(JSON.stringify(admitted))
client.disconnect()
