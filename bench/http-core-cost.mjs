// What the HTTP core allocates and costs per request, in process: check() of one request against one
// memory layer (headers both), next to the bare consumeSync it wraps. Heap bytes per check come from
// V8's sampling heap profiler (every 16 bytes, young objects included), split by the function that
// allocated them; time is the median of 7 interleaved rounds of 200,000 calls. Point it at a build
// (or src/ under tsx) to compare two commits:
//   node bench/http-core-cost.mjs packages/sluice/dist/index.js
//   node --import tsx bench/http-core-cost.mjs src/index.ts
//   git worktree add /tmp/old <commit> && (cd /tmp/old && npm ci && npm run build) && node bench/http-core-cost.mjs /tmp/old/packages/sluice/dist/index.js
import { Session } from 'node:inspector/promises'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'

const { createLimiter, createHttpLimiter } = await import(
  pathToFileURL(resolve(process.argv[2] ?? 'packages/sluice/dist/index.js')).href
)
const limiter = createLimiter({
  policies: { perIp: { algorithm: 'fixed-window', limit: 1_000_000_000, window: '1m' } },
})
const http = createHttpLimiter({ limiter, rules: [{ policy: 'perIp', key: 'ip' }] })
const request = {
  method: 'GET',
  route: '/items/:id',
  path: '/items/1',
  remoteAddress: '127.0.0.1',
  header: () => undefined,
  raw: undefined,
}
// The outcomes escape, as they do to an adapter: the optimiser cannot drop them.
const sink = new Array(1024)
const check = (n) => {
  for (let i = 0; i < n; i++) sink[i & 1023] = http.check(request)
}
const bare = (n) => {
  for (let i = 0; i < n; i++) sink[i & 1023] = limiter.consumeSync('perIp', 'ip:127.0.0.1')
}
check(200_000)
bare(200_000)

const session = new Session()
session.connect()
await session.post('HeapProfiler.startSampling', {
  samplingInterval: 16,
  includeObjectsCollectedByMinorGC: true,
  includeObjectsCollectedByMajorGC: true,
})
const sampled = 200_000
check(sampled)
const { profile } = await session.post('HeapProfiler.stopSampling')
const byFunction = new Map()
let total = 0
const walk = (node) => {
  const f = node.callFrame
  const name = `${f.functionName || '(anonymous)'} ${f.url.replace(/.*\//, '')}`
  if (node.selfSize > 0) {
    byFunction.set(name, (byFunction.get(name) ?? 0) + node.selfSize)
    total += node.selfSize
  }
  for (const child of node.children) walk(child)
}
walk(profile.head)

const times = { check: [], bare: [] }
const n = 200_000
for (let round = 0; round < 7; round++)
  for (const [name, run] of [
    ['check', check],
    ['bare', bare],
  ]) {
    const started = process.hrtime.bigint()
    run(n)
    times[name].push(Number(process.hrtime.bigint() - started) / n)
  }
const median = (values) => values.sort((a, b) => a - b)[values.length >> 1]
console.log(`heap bytes per check(): ${Math.round(total / sampled)} (sampled), by allocating function:`)
for (const [name, bytes] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, 8))
  if (bytes / sampled >= 1) console.log(`  ${(bytes / sampled).toFixed(0).padStart(5)}  ${name}`)
console.log(
  `check(): ${median(times.check).toFixed(0)} ns, consumeSync: ${median(times.bare).toFixed(0)} ns, ratio ${(median(times.check) / median(times.bare)).toFixed(2)}x`,
)
