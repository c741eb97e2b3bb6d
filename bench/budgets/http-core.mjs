// Heap bytes the built HTTP core allocates per request on the memory store: `check()` of one request
// against one `ip` layer, both header families. The request object is built once, so only Sluice's
// own allocations count (the limiter's step, decision and memory-store entry included). Used heap
// growth over rounds too short for a scavenge, after a full GC, median of 9 rounds. Needs --expose-gc:
//   node --expose-gc bench/budgets/http-core.mjs [dist dir]
// Prints one JSON line: { bytes, action, headers }.
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { getHeapStatistics } from 'node:v8'

if (typeof globalThis.gc !== 'function') {
  console.error('run with node --expose-gc')
  process.exit(2)
}
const dist = pathToFileURL(`${resolve(process.argv[2] ?? 'packages/sluice/dist')}/`).href
const { createLimiter, createHttpLimiter } = await import(new URL('index.js', dist).href)
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
function loop(n) {
  for (let i = 0; i < n; i++) sink[i & 1023] = http.check(request)
}
loop(200_000)
const n = 5_000
const samples = []
for (let round = 0; round < 9; round++) {
  globalThis.gc()
  const before = getHeapStatistics().used_heap_size
  loop(n)
  samples.push((getHeapStatistics().used_heap_size - before) / n)
}
samples.sort((a, b) => a - b)
const out = http.check(request)
console.log(JSON.stringify({ bytes: samples[4], action: out.action, headers: Object.keys(out.headers) }))
