// What rateLimitHeaders costs per response, from the build (dist/): one allowed token-bucket layer,
// three layers (the shape of docs/http.md's example), and a three-layer denial. Decisions come from
// a memory store ahead of the timed loop, so only the header function is timed. With a baseline
// build (another commit's dist/, copied inside the repo so its dependencies resolve), both run in
// one process, interleaved, so that machine load hits them alike.
// 5 interleaved rounds of 1,000,000 calls per subject; ns per call, median of the rounds.
// Run: npm run build && node --import tsx bench/headers.ts [.tmp/dist-baseline]
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { createLimiter, memoryStore, rateLimitHeaders } from '../packages/sluice/dist/index.js'

type Headers = typeof rateLimitHeaders
const builds: [string, Headers][] = [['dist/', rateLimitHeaders]]
const baseline = process.argv[2]
if (baseline !== undefined) {
  const mod = (await import(pathToFileURL(resolve(baseline, 'index.js')).href)) as {
    rateLimitHeaders: Headers
  }
  builds.unshift([`${baseline} (baseline)`, mod.rateLimitHeaders])
}

const limiter = createLimiter({
  store: memoryStore({ now: () => 1_800_000_000_000 }),
  policies: {
    perIp: { algorithm: 'sliding-window-counter', limit: 300, window: '1m' },
    userFree: { algorithm: 'token-bucket', limit: 60, window: '1m', burst: 20 },
    reports: { algorithm: 'sliding-window-log', limit: 1, window: '1m' },
  },
})
const layers = [
  { policy: 'perIp', key: 'ip:1' },
  { policy: 'userFree', key: 'user:1' },
  { policy: 'reports', key: 'user:1|POST /reports' },
] as const
const one = await limiter.consume('userFree', 'user:2')
const three = await limiter.consume([...layers])
const denied = await limiter.consume([...layers])
if (!three.allowed || denied.allowed) throw new Error('unexpected decisions')
const decisions = [
  ['one layer, allowed', one],
  ['three layers, allowed', three],
  ['three layers, denied', denied],
] as const
const options = { headers: 'both', nowMs: 1_800_000_000_000 } as const

const N = 1_000_000
const results = new Map<string, number[]>()
let sink = 0
for (let round = 0; round < 5; round++) {
  for (const [build, headers] of builds) {
    for (const [name, decision] of decisions) {
      const started = performance.now()
      for (let i = 0; i < N; i++) sink += headers(decision, limiter.policies, options).RateLimit!.length
      const key = `${build} | ${name}`
      results.set(key, [...(results.get(key) ?? []), ((performance.now() - started) / N) * 1e6])
    }
  }
}
if (sink === 0) throw new Error('nothing measured')
console.log('| build | rateLimitHeaders | ns per call (median of 5 rounds) |')
console.log('| --- | --- | ---: |')
for (const [key, v] of results) console.log(`| ${key} | ${[...v].sort((a, b) => a - b)[2]!.toFixed(0)} |`)
