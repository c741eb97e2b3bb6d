// Heap bytes per memory-store decision of the build: token bucket unless another algorithm is
// named, 10,000 keys cycled (as bench/cases/memory.ts), `consumeSync` and `await consume`. Used
// heap growth over rounds too short for a scavenge, after a full GC, median of 9 rounds. Needs
// --expose-gc:
//   node --expose-gc bench/budgets/memory-decision.mjs [dist dir] [algorithm]
// Prints one JSON line: { sync, awaited, allowed } (bytes per decision; every decision admitted).
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { getHeapStatistics } from 'node:v8'

if (typeof globalThis.gc !== 'function') {
  console.error('run with node --expose-gc')
  process.exit(2)
}
const dist = pathToFileURL(`${resolve(process.argv[2] ?? 'packages/sluice/dist')}/`).href
const { createLimiter, memoryStore } = await import(new URL('index.js', dist).href)
const keys = Array.from({ length: 10_000 }, (_, i) => `user-${i}`)
const limiter = createLimiter({
  store: memoryStore(),
  policies: { p: { algorithm: process.argv[3] ?? 'token-bucket', limit: 1_000_000_000, window: '1s' } },
})
// The decisions escape, as they do to a caller: the optimiser cannot drop them.
const sink = new Array(1024)
let at = 0
const sync = (n) => {
  for (let i = 0; i < n; i++, at++) sink[at & 1023] = limiter.consumeSync('p', keys[at % 10_000])
}
const awaited = async (n) => {
  for (let i = 0; i < n; i++, at++) sink[at & 1023] = await limiter.consume('p', keys[at % 10_000])
}
async function bytes(run) {
  await run(200_000)
  const n = 4_000
  const samples = []
  for (let round = 0; round < 9; round++) {
    globalThis.gc()
    const before = getHeapStatistics().used_heap_size
    await run(n)
    samples.push((getHeapStatistics().used_heap_size - before) / n)
  }
  return samples.sort((a, b) => a - b)[4]
}
const out = { sync: await bytes(sync), awaited: await bytes(awaited), allowed: sink.every((d) => d.allowed) }
console.log(JSON.stringify(out))
