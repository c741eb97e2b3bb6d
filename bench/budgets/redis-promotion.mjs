// Bytes V8 promotes to its old generation per Redis-backed decision, 64 in flight (the Redis
// case's load: token bucket, ioredis, 10,000 keys), after a full collection made while decisions
// were pending. A decision's objects live well under a scavenge interval, so next to nothing of
// them should be promoted; a long-lived structure that keeps dead decisions reachable through its
// old copy (a cleared Map's table, a linked list's dropped entry) makes every decision's objects
// outlive the scavenges, and the full collection is what puts such a structure in the old
// generation. V8 prints each scavenge's promoted bytes (--trace-gc-nvp, switched on for the
// measured phase only); the parent sums them.
//   node --expose-gc bench/budgets/redis-promotion.mjs <dist dir> <redis port>
// Prints the trace lines and one JSON line: { decisions, allowed }.
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { setFlagsFromString } from 'node:v8'
import { Redis } from 'ioredis'

const [distDir, redisPort] = process.argv.slice(2)
const dist = pathToFileURL(`${resolve(distDir)}/`).href
const { createLimiter } = await import(new URL('index.js', dist).href)
const { redisStore } = await import(new URL('redis.js', dist).href)
const client = new Redis(Number(redisPort), '127.0.0.1')
const limiter = createLimiter({
  store: redisStore(client, { prefix: 'budget-promotion' }),
  policies: { api: { algorithm: 'token-bucket', limit: 1_000_000, window: '1h' } },
  storeTimeout: '60s',
})
const keys = Array.from({ length: 10_000 }, (_, i) => `user-${String(i).padStart(5, '0')}`)

let allowed = true
/** Keep 64 decisions in flight until `count` more have been answered. */
async function load(count) {
  let left = count
  let i = 0
  const lane = async () => {
    while (left > 0) {
      left--
      const d = await limiter.consume('api', keys[i++ % keys.length])
      if (!d.allowed || d.degraded === true) allowed = false
    }
  }
  await Promise.all(Array.from({ length: 64 }, lane))
}

await load(100_000)
// The full collection, with 64 decisions pending.
const warm = load(100_000)
await new Promise((r) => setImmediate(r))
globalThis.gc()
await warm
const decisions = 300_000
setFlagsFromString('--trace-gc-nvp')
await load(decisions)
setFlagsFromString('--no-trace-gc-nvp')
client.disconnect()
console.log(JSON.stringify({ decisions, allowed }))
