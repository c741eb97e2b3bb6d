// Two builds of the memory store, each alone in processes of its own, taken in turns: ns per token
// bucket `consumeSync` and `await consume` (10,000 keys cycled, 7 rounds of 1,000,000 after a warm-up,
// each process's median), and the median over pairs of B's time over A's. Nothing else decides in a
// process, so which subject warms up first cannot move the figures, as it does in the memory case.
//   node bench/memory-builds.mjs <dist A> <dist B> [pairs, default 12]
import { spawnSync } from 'node:child_process'
import { resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const KEYS = 10_000
const N = 1_000_000

async function measure(dist) {
  const { createLimiter, memoryStore } = await import(pathToFileURL(resolve(dist, 'index.js')).href)
  const keys = Array.from({ length: KEYS }, (_, i) => `user-${i}`)
  const limiter = createLimiter({
    store: memoryStore(),
    policies: { p: { algorithm: 'token-bucket', limit: 1_000_000_000, window: '1s' } },
  })
  const sync = () => {
    let allowed = 0
    for (let i = 0; i < N; i++) if (limiter.consumeSync('p', keys[i % KEYS]).allowed) allowed++
    return allowed
  }
  const awaited = async () => {
    let allowed = 0
    for (let i = 0; i < N; i++) if ((await limiter.consume('p', keys[i % KEYS])).allowed) allowed++
    return allowed
  }
  const ns = async (run) => {
    const started = process.hrtime.bigint()
    if ((await run()) !== N) throw new Error('a decision was denied; the limit is meant to admit all')
    return Number(process.hrtime.bigint() - started) / N
  }
  await ns(sync)
  await ns(awaited)
  const syncNs = []
  const awaitNs = []
  for (let round = 0; round < 7; round++) {
    syncNs.push(await ns(sync))
    awaitNs.push(await ns(awaited))
  }
  return { sync: median(syncNs), await: median(awaitNs) }
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[sorted.length >> 1]
}

function inProcess(dist) {
  const run = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--measure', dist], {
    encoding: 'utf8',
  })
  if (run.status !== 0) throw new Error(`${dist}: ${run.stderr}`)
  return JSON.parse(run.stdout)
}

const [first, second, third] = process.argv.slice(2)
if (first === '--measure') {
  process.stdout.write(JSON.stringify(await measure(second)))
} else {
  if (first === undefined || second === undefined)
    throw new Error('usage: node bench/memory-builds.mjs <dist A> <dist B> [pairs]')
  const pairs = Number(third ?? 12)
  const a = []
  const b = []
  for (let i = 0; i < pairs; i++) {
    a.push(inProcess(first))
    b.push(inProcess(second))
  }
  const ratio = (kind) => median(a.map((x, i) => b[i][kind] / x[kind])).toFixed(3)
  const ns = (runs, kind) => median(runs.map((x) => x[kind])).toFixed(1)
  console.log(`| build | consumeSync ns | await consume ns |`)
  console.log(`| --- | ---: | ---: |`)
  console.log(`| A ${first} | ${ns(a, 'sync')} | ${ns(a, 'await')} |`)
  console.log(`| B ${second} | ${ns(b, 'sync')} | ${ns(b, 'await')} |`)
  console.log(`| B / A, median of ${pairs} pairs | ${ratio('sync')}x | ${ratio('await')}x |`)
}
