// One OS process of the memcached exactness test: keeps 64 requests in flight against one key per
// algorithm and prints how many were admitted (and how many failed). Run:
// node --import tsx test/memcached/hammer-worker.ts <json config>
import memjs from 'memjs'
import { resolvePolicy } from '../../src/policy.js'
import { memcachedStore } from '../../src/stores/memcached/index.js'

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
const admitted: Record<string, number> = {}

// Connected and warm, then wait for the parent's go (a line on stdin), so the processes overlap.
await store.apply(
  [{ policy: resolvePolicy('warm', { algorithm: 'gcra', limit: 1, window: '1s' }), key: 'w', cost: 1 }],
  'peek',
)
process.stdout.write('ready\n')
await new Promise((r) => process.stdin.once('data', r))
process.stdin.pause()
await Promise.all(
  config.algorithms.map(async (algorithm) => {
    const policy = resolvePolicy(algorithm.replaceAll('-', '_'), {
      algorithm,
      limit: config.limit,
      window: config.window,
    })
    let sent = 0
    let ok = 0
    let failed = 0
    const lane = async () => {
      while (sent < config.attempts) {
        sent++
        try {
          const [result] = await store.apply([{ policy, key: 'hot', cost: 1 }], 'consume')
          if (result!.allowed) ok++
        } catch {
          failed++
        }
      }
    }
    await Promise.all(Array.from({ length: config.inFlight }, lane))
    admitted[algorithm] = ok
    admitted[`${algorithm} failed`] = failed
  }),
)
process.stdout.write(`${JSON.stringify(admitted)}\n`)
client.close()
