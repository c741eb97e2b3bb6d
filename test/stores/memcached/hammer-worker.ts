// One OS process of the memcached exactness test: keeps 64 requests in flight against one key per
// algorithm and prints how many were admitted (and how many failed). Run:
// node --import tsx test/stores/memcached/hammer-worker.ts <json config>
import memjs from 'memjs'
import { resolvePolicy } from '../../../packages/sluice/src/policy.js'
import { memcachedStore } from '../../../packages/sluice/src/stores/memcached/index.js'
import { hammerOneKey } from '../../helpers/hammer.js'

interface Config {
  address: string
  prefix: string
  algorithms: ('fixed-window' | 'sliding-window-log' | 'token-bucket' | 'gcra')[]
  attempts: number
  inFlight: number
  limit: number
  window: string
}

const config = JSON.parse(process.argv[2]!) as Config
const client = memjs.Client.create(config.address, { retries: 1, logger: { log: () => {} } })
const store = memcachedStore(client, { prefix: config.prefix })

// Connected and warm, then wait for the parent's go (a line on stdin), so the processes overlap.
await store.apply(
  [{ policy: resolvePolicy('warm', { algorithm: 'gcra', limit: 1, window: '1s' }), key: 'w', cost: 1 }],
  'peek',
)
process.stdout.write('ready\n')
await new Promise((r) => process.stdin.once('data', r))
process.stdin.pause()
const admitted = await hammerOneKey(store, {
  algorithms: config.algorithms,
  attempts: config.attempts,
  lanes: config.inFlight,
  limit: config.limit,
  window: config.window,
  countFailures: true,
})
process.stdout.write(`${JSON.stringify(admitted)}\n`)
client.close()
