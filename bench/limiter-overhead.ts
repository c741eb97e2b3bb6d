// What limiter.consume costs over the store it calls, with a store that answers at once (an async
// Store whose apply is a resolved promise): failover, deny cache and the decision object, nothing
// else. Run twice in one process: Sluice from the build (dist/, as users run it) and from src/
// compiled by tsx, whose esbuild keepNames wraps every closure created per decision in a
// defineProperty call. 3 interleaved rounds of 400,000 decisions, 64 at a time; µs per decision.
// Run: npm run build && node --import tsx bench/limiter-overhead.ts
import { createLimiter as fromDist } from '../packages/sluice/dist/index.js'
import { createLimiter as fromSrc } from '../packages/sluice/src/limiter.js'
import { unsupportedRecords } from '../packages/sluice/src/records.js'
import type { StepResult, Store } from '../packages/sluice/src/store.js'

const answer: StepResult[] = [{ allowed: true, remaining: 5, resetMs: 10, retryAfterMs: 0, blocked: false }]
const store: Omit<Store, 'apply'> & { apply(...args: unknown[]): Promise<StepResult[]> } = {
  name: 'instant',
  inProcess: false,
  apply: () => Promise.resolve(answer),
  refund: async () => {},
  charge: async () => {},
  block: async () => {},
  reset: async () => {},
  now: Date.now,
  records: unsupportedRecords('instant'),
  close: async () => {},
}
const policies = { tb: { algorithm: 'token-bucket', limit: 1_000_000, window: '1h' } } as const
const dist = fromDist({ store, policies, storeTimeout: '60s' })
const src = fromSrc({ store, policies, storeTimeout: '60s' })
const subjects: [string, (key: string) => Promise<unknown>][] = [
  ['store.apply (the instant store itself)', () => store.apply([], 'consume')],
  ['limiter.consume, dist/', (k) => dist.consume('tb', k)],
  ['limiter.consume, src/ under tsx', (k) => src.consume('tb', k)],
]

const N = 400_000
const results = new Map<string, number[]>()
for (let round = 0; round < 3; round++) {
  for (const [name, decide] of subjects) {
    const started = performance.now()
    for (let i = 0; i < N; i += 64) {
      await Promise.all(Array.from({ length: 64 }, (_, j) => decide(`u${(i + j) % 10_000}`)))
    }
    results.set(name, [...(results.get(name) ?? []), ((performance.now() - started) / N) * 1000])
  }
}
console.log('| subject | µs per decision (median of 3 rounds) |')
console.log('| --- | ---: |')
for (const [name, v] of results) console.log(`| ${name} | ${[...v].sort((a, b) => a - b)[1]!.toFixed(2)} |`)
