// Memory of the in-memory store: bytes per key, and whether the heap stays flat when more distinct
// keys pass through than maxKeys allows. Each key takes `--requests` decisions in a row (default 1),
// each 1 ms after the one before (a sliding log keeps one entry per ms), against a limit of `--limit`
// per hour (default 100): `--limit 5 --requests 6` holds keys locked out. The clock moves only
// between a key's own decisions. Needs --expose-gc:
//   node --expose-gc --import tsx bench/memory-bytes.ts [--keys N] [--max-keys M] [--algorithm A]
//     [--limit L] [--requests R] [--json]
import { parseArgs } from 'node:util'
import { type AlgorithmName, createLimiter, memoryStore, type Policy } from '../packages/sluice/src/index.js'
import { ALGORITHMS } from '../packages/sluice/src/policy.js'

const { values } = parseArgs({
  options: {
    keys: { type: 'string', default: '1000000' },
    'max-keys': { type: 'string' },
    algorithm: { type: 'string', default: 'token-bucket' },
    limit: { type: 'string', default: '100' },
    requests: { type: 'string', default: '1' },
    json: { type: 'boolean', default: false },
  },
})

const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) {
  console.error('run with node --expose-gc')
  process.exit(2)
}
const keys = Number(values.keys)
const maxKeys = values['max-keys'] === undefined ? keys + 1 : Number(values['max-keys'])
const algorithm = values.algorithm as AlgorithmName
if (!ALGORITHMS.includes(algorithm)) throw new Error(`unknown algorithm ${algorithm}`)
const limit = Number(values.limit)
const requests = Number(values.requests)
if (!Number.isSafeInteger(limit) || limit < 1) throw new Error(`--limit must be a whole number >= 1`)
if (!Number.isSafeInteger(requests) || requests < 1) throw new Error(`--requests must be a whole number >= 1`)
const policy: Policy =
  algorithm === 'concurrency' ? { algorithm, limit, timeout: '1h' } : { algorithm, limit, window: '1h' }

function heap(): number {
  gc!()
  gc!()
  return process.memoryUsage().heapUsed
}

let nowMs = 1_700_000_000_000
const store = memoryStore({ now: () => nowMs, maxKeys })
const limiter = createLimiter({ store, policies: { p: policy } })
const baseline = heap()
let maxSizeSeen = 0
let heapAtHalf = 0
let sizeAtHalf = 0
const half = Math.floor(keys / 2)
const started = performance.now()
for (let i = 0; i < keys; i++) {
  const key = `user-${i}`
  limiter.consumeSync('p', key)
  for (let r = 1; r < requests; r++) {
    nowMs++
    limiter.consumeSync('p', key)
  }
  if ((i & 1023) === 0 && store.size > maxSizeSeen) maxSizeSeen = store.size
  // Sampled after the same number of inserts in each half, so both samples meet the two
  // generations at the same phase (the store's size swings between maxKeys/2 and maxKeys).
  if (i + 1 === half) {
    heapAtHalf = heap()
    sizeAtHalf = store.size
  }
}
const seconds = (performance.now() - started) / 1000
maxSizeSeen = Math.max(maxSizeSeen, store.size)
const heapAtEnd = heap()
const sizeAtEnd = store.size
const result = {
  algorithm,
  limit,
  requests,
  keys,
  maxKeys,
  sizeAtHalf,
  sizeAtEnd,
  maxSizeSeen,
  heapBaselineMB: +(baseline / 2 ** 20).toFixed(1),
  heapAtHalfMB: +(heapAtHalf / 2 ** 20).toFixed(1),
  heapAtEndMB: +(heapAtEnd / 2 ** 20).toFixed(1),
  secondHalfGrowthMB: +((heapAtEnd - heapAtHalf) / 2 ** 20).toFixed(1),
  bytesPerHeldKey: Math.round((heapAtEnd - baseline) / sizeAtEnd),
  seconds: +seconds.toFixed(2),
}
if (values.json) console.log(JSON.stringify(result))
else console.table(result)
