// CPU time and heap bytes per memory-store decision of one or more builds, side by side in one
// process beside express-rate-limit's MemoryStore (the goal's reference): token bucket `await
// consume` and `consumeSync`, 10,000 keys cycled, with fixed-window and sliding-window-counter
// limiters of the same build running too (as bench/cases/memory.ts has them, so the shared decision
// code sees every algorithm). CPU ns are medians of interleaved rounds; `x ERL` is express-rate-limit's
// CPU time over the subject's, within a round, then the median. Heap bytes per decision: used heap
// growth over a round too short for a scavenge (as bench/budgets/memory-decision.mjs).
//   node --expose-gc bench/memory-cost.mjs dist /tmp/main/dist
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { getHeapStatistics } from 'node:v8'
import { MemoryStore } from 'express-rate-limit'

const builds = process.argv.slice(2)
if (builds.length === 0) builds.push('packages/sluice/dist')
const KEYS = 10_000
const keys = Array.from({ length: KEYS }, (_, i) => `user-${i}`)
const sink = new Array(1024)
const subjects = []
for (const build of builds) {
  const { createLimiter, memoryStore } = await import(pathToFileURL(resolve(build, 'index.js')).href)
  const make = (algorithm) =>
    createLimiter({
      store: memoryStore(),
      policies: { p: { algorithm, limit: 1_000_000_000, window: '1s' } },
    })
  const bucket = make('token-bucket')
  const others = [make('fixed-window'), make('sliding-window-counter')]
  subjects.push({
    name: `${build}: await consume`,
    async run(n) {
      for (let i = 0; i < n; i++) sink[i & 1023] = await bucket.consume('p', keys[i % KEYS])
    },
  })
  subjects.push({
    name: `${build}: consumeSync`,
    run(n) {
      for (let i = 0; i < n; i++) sink[i & 1023] = bucket.consumeSync('p', keys[i % KEYS])
    },
  })
  subjects.push({
    name: `${build}: other algorithms, await consume`,
    hidden: true,
    async run(n) {
      for (const limiter of others)
        for (let i = 0; i < n / 2; i++) sink[i & 1023] = await limiter.consume('p', keys[i % KEYS])
    },
  })
}
const store = new MemoryStore()
store.init({ windowMs: 1000 })
const erl = {
  name: 'express-rate-limit MemoryStore: await increment',
  async run(n) {
    for (let i = 0; i < n; i++) sink[i & 1023] = await store.increment(keys[i % KEYS])
  },
}
subjects.push(erl)

const median = (values) => values.slice().sort((a, b) => a - b)[values.length >> 1]
for (const s of subjects) await s.run(KEYS * 20)
const n = 200_000
const cpu = new Map(subjects.map((s) => [s, []]))
for (let round = 0; round < 7; round++)
  for (const s of subjects) {
    const started = process.cpuUsage()
    await s.run(n)
    const used = process.cpuUsage(started)
    cpu.get(s).push(((used.user + used.system) * 1000) / n)
  }

async function heapBytes(s) {
  if (typeof globalThis.gc !== 'function') return undefined
  const samples = []
  for (let round = 0; round < 9; round++) {
    globalThis.gc()
    const before = getHeapStatistics().used_heap_size
    await s.run(4_000)
    samples.push((getHeapStatistics().used_heap_size - before) / 4_000)
  }
  return median(samples)
}

console.log('| subject | CPU ns per decision | x ERL (CPU) | heap bytes per decision |')
console.log('| --- | --- | --- | --- |')
for (const s of subjects) {
  if (s.hidden) continue
  const ratio = median(cpu.get(s).map((v, i) => cpu.get(erl)[i] / v))
  const bytes = await heapBytes(s)
  console.log(
    `| ${s.name} | ${median(cpu.get(s)).toFixed(0)} | ${ratio.toFixed(2)} | ${bytes === undefined ? 'run with --expose-gc' : bytes.toFixed(0)} |`,
  )
}
store.shutdown()
