// The memory store's decision path allocates little: heap bytes per `consumeSync` and per
// `await consume` (token bucket, 10,000 keys cycled, as bench/cases/memory.ts), measured in a child
// `node --expose-gc` over dist/ (needs `npm run build` first; `npm test` does it). Before the
// single-check path and in-place states (main 53958d0): 445-500 and 675-745 bytes; after: 140-220
// and 370-465 (two figures: whether V8 scalar-replaces the algorithm's outcome object), of which the
// `await` itself is about 265 (what awaiting express-rate-limit's async increment costs too).
import { execFileSync } from 'node:child_process'
import { describe, expect, it } from 'vitest'

const root = new URL('../..', import.meta.url).pathname

// argv: the built index.js to load.
const SCRIPT = `
import { getHeapStatistics } from 'node:v8'
const { createLimiter, memoryStore } = await import(process.argv[1])
const keys = Array.from({ length: 10_000 }, (_, i) => 'user-' + i)
const limiter = createLimiter({
  store: memoryStore(),
  policies: { p: { algorithm: 'token-bucket', limit: 1_000_000_000, window: '1s' } },
})
// The decisions escape, as they do to a caller: the optimiser cannot drop them.
const sink = new Array(1024)
let at = 0
const sync = (n) => { for (let i = 0; i < n; i++, at++) sink[at & 1023] = limiter.consumeSync('p', keys[at % 10_000]) }
const awaited = async (n) => { for (let i = 0; i < n; i++, at++) sink[at & 1023] = await limiter.consume('p', keys[at % 10_000]) }
async function bytes(run) {
  await run(200_000)
  // Few enough decisions per round that no scavenge runs inside it.
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
`

const BUILT = new URL('../../dist/index.js', import.meta.url).href

describe('memory store decision allocations (built package)', () => {
  it('token bucket: at most 300 heap bytes per consumeSync, 600 per await consume', () => {
    const out = execFileSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', SCRIPT, BUILT], {
      cwd: root,
      encoding: 'utf8',
      timeout: 20_000,
    })
    const result = JSON.parse(out.trim()) as { sync: number; awaited: number; allowed: boolean }
    expect(result.allowed).toBe(true)
    expect(result.sync).toBeLessThanOrEqual(300)
    expect(result.awaited).toBeLessThanOrEqual(600)
  })
})
