// Two builds of the memory store, each alone in processes of its own, taken in turns: ns per token
// bucket `consumeSync` and `await consume` (10,000 keys cycled, 7 rounds of 1,000,000 after a warm-up,
// each process's median), and the median over pairs of B's time over A's. Nothing else decides in a
// process, so which subject warms up first cannot move the figures, as it does in the memory case.
// B may be `express-rate-limit`: its `MemoryStore.increment`, awaited, alone in its processes; B's
// time over A's `await consume` is then A's decisions/s as a share of the store's, issue 27's measure.
//   node bench/memory-builds.mjs <dist A> <dist B | express-rate-limit> [pairs, default 12]
import { spawnSync } from 'node:child_process'
import { resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const KEYS = 10_000
const N = 1_000_000

const STORE = 'express-rate-limit'
const keys = Array.from({ length: KEYS }, (_, i) => `user-${i}`)

/** express-rate-limit's store alone: `await increment`, as its middleware calls it per request. */
async function measureStore() {
  const { MemoryStore } = await import('express-rate-limit')
  const store = new MemoryStore()
  store.init({ windowMs: 1000 })
  const awaited = async () => {
    let allowed = 0
    for (let i = 0; i < N; i++)
      if ((await store.increment(keys[i % KEYS])).totalHits <= 1_000_000_000) allowed++
    return allowed
  }
  await ns(awaited)
  const awaitNs = []
  for (let round = 0; round < 7; round++) awaitNs.push(await ns(awaited))
  store.shutdown()
  return { sync: null, await: median(awaitNs) }
}

async function ns(run) {
  const started = process.hrtime.bigint()
  if ((await run()) !== N) throw new Error('a decision was denied; the limit is meant to admit all')
  return Number(process.hrtime.bigint() - started) / N
}

async function measure(dist) {
  if (dist === STORE) return measureStore()
  const { createLimiter, memoryStore } = await import(pathToFileURL(resolve(dist, 'index.js')).href)
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
  const usage = 'usage: node bench/memory-builds.mjs <dist A> <dist B | express-rate-limit> [pairs]'
  if (first === undefined || second === undefined) throw new Error(usage)
  if (third !== undefined && !/^[1-9]\d{0,2}$/.test(third))
    throw new Error(`pairs is a whole number from 1 to 999, not ${JSON.stringify(third)}; ${usage}`)
  const pairs = Number(third ?? 12)
  const a = []
  const b = []
  for (let i = 0; i < pairs; i++) {
    a.push(inProcess(first))
    b.push(inProcess(second))
  }
  // The store has no `consumeSync` (null): its cells say so.
  const ratio = (kind) =>
    b[0][kind] === null ? '-' : `${median(a.map((x, i) => b[i][kind] / x[kind])).toFixed(3)}x`
  const nsOf = (runs, kind) => (runs[0][kind] === null ? '-' : median(runs.map((x) => x[kind])).toFixed(1))
  console.log(`| build | consumeSync ns | await consume ns |`)
  console.log(`| --- | ---: | ---: |`)
  console.log(`| A ${first} | ${nsOf(a, 'sync')} | ${nsOf(a, 'await')} |`)
  console.log(`| B ${second} | ${nsOf(b, 'sync')} | ${nsOf(b, 'await')} |`)
  console.log(`| B / A, median of ${pairs} pairs | ${ratio('sync')} | ${ratio('await')} |`)
}
