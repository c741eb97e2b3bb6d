// Decisions per second of the memory store next to rate-limiter-flexible's RateLimiterMemory,
// express-rate-limit's MemoryStore.increment and a plain inline Map fixed-window counter (awaited,
// and synchronous: the floor), 10,000 keys, every request admitted (limits set high so each subject
// does its full work). Subjects run interleaved after a warm-up; every figure is the median over
// rounds, ratios taken within a round, so a busy machine slows them alike. Also reported: decisions
// per CPU second (user + system), which a neighbour stealing the core does not skew.
// Each Sluice algorithm runs in a process of its own (this module again, as a script), with
// express-rate-limit's store in the same rounds: as in an app that uses one algorithm. Three
// algorithms through the same store and limiter code in one process leave V8's type feedback there
// mixed, which slowed the token bucket's `await consume` by about a fifth.
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type Options as ExpressRateLimitOptions, MemoryStore } from 'express-rate-limit'
import { RateLimiterMemory } from 'rate-limiter-flexible'
// What is measured comes from the build (dist/), as users run it: tsx compiles src/ with esbuild's
// keepNames, which adds a defineProperty to every closure created per decision (about 1 µs per
// decision here) that the published build does not have.
import * as built from '../../packages/sluice/dist/index.js'
import { median } from '../load.js'
import type { BenchCase, BenchRow } from '../types.js'

/**
 * With SLUICE_BENCH_BASELINE_DIST=<a copy of dist/ from another commit>, the Sluice token-bucket
 * subjects also run over that build (`-baseline`), in the same rounds: a change's before and after
 * from one run.
 */
const baselineDist = process.env.SLUICE_BENCH_BASELINE_DIST
type Build = Pick<typeof built, 'createLimiter' | 'memoryStore'>

const KEYS = 10_000
const keys = Array.from({ length: KEYS }, (_, i) => `user-${i}`)

interface Subject {
  /** Stable short name: the summary table's row ids use it. */
  id: string
  name: string
  /** Run `n` decisions; returns how many were allowed (so nothing is optimised away). */
  run(n: number): number | Promise<number>
}

function sluice(
  algorithm: 'token-bucket' | 'fixed-window' | 'sliding-window-counter',
  sync: boolean,
  build: Build = built,
  suffix = '',
): Subject {
  const limiter = build.createLimiter({
    store: build.memoryStore(),
    policies: { p: { algorithm, limit: 1_000_000_000, window: '1s' } },
  })
  if (sync) {
    return {
      id: `sluice-${algorithm}-consumeSync${suffix}`,
      name: `sluice ${algorithm} consumeSync${suffix}`,
      run(n) {
        let allowed = 0
        for (let i = 0; i < n; i++) if (limiter.consumeSync('p', keys[i % KEYS]!).allowed) allowed++
        return allowed
      },
    }
  }
  return {
    id: `sluice-${algorithm}-consume${suffix}`,
    name: `sluice ${algorithm} await consume${suffix}`,
    async run(n) {
      let allowed = 0
      for (let i = 0; i < n; i++) if ((await limiter.consume('p', keys[i % KEYS]!)).allowed) allowed++
      return allowed
    },
  }
}

function rateLimiterFlexible(): Subject {
  const limiter = new RateLimiterMemory({ points: 1_000_000_000, duration: 1 })
  return {
    id: 'rate-limiter-flexible',
    name: 'rate-limiter-flexible RateLimiterMemory await consume',
    async run(n) {
      let allowed = 0
      for (let i = 0; i < n; i++) {
        try {
          await limiter.consume(keys[i % KEYS]!)
          allowed++
        } catch {
          // Rejected: limited. Counted as a decision all the same.
        }
      }
      return allowed
    },
  }
}

/** express-rate-limit's own store, as its middleware calls it once per request. */
function expressRateLimitStore(): Subject & { shutdown(): void } {
  const store = new MemoryStore()
  store.init({ windowMs: 1000 } as ExpressRateLimitOptions)
  return {
    id: 'express-rate-limit-store',
    name: 'express-rate-limit MemoryStore await increment',
    async run(n) {
      let allowed = 0
      for (let i = 0; i < n; i++)
        if ((await store.increment(keys[i % KEYS]!)).totalHits <= 1_000_000_000) allowed++
      return allowed
    },
    shutdown: () => store.shutdown(),
  }
}

/** A fixed-window counter in a Map: no validation, no eviction. */
function mapCounter(): (key: string) => boolean {
  const windows = new Map<string, { start: number; count: number }>()
  return (key) => {
    const now = Date.now()
    let w = windows.get(key)
    if (w === undefined || now >= w.start + 1000) {
      w = { start: now, count: 0 }
      windows.set(key, w)
    }
    if (w.count >= 1_000_000_000) return false
    w.count++
    return true
  }
}

/** The floor of an awaited API: the Map counter behind one `await` per decision. */
function awaitedMap(): Subject {
  const decide = mapCounter()
  return {
    id: 'awaited-map',
    name: 'plain Map fixed-window, awaited',
    async run(n) {
      let allowed = 0
      for (let i = 0; i < n; i++) if (await decide(keys[i % KEYS]!)) allowed++
      return allowed
    },
  }
}

/** The floor: a fixed-window counter in a Map, inline, synchronous, no validation, no eviction. */
function plainMap(): Subject {
  const windows = new Map<string, { start: number; count: number }>()
  return {
    id: 'map',
    name: 'plain Map fixed-window (inline, sync)',
    run(n) {
      let allowed = 0
      for (let i = 0; i < n; i++) {
        const key = keys[i % KEYS]!
        const now = Date.now()
        let w = windows.get(key)
        if (w === undefined || now >= w.start + 1000) {
          w = { start: now, count: 0 }
          windows.set(key, w)
        }
        if (w.count < 1_000_000_000) {
          w.count++
          allowed++
        }
      }
      return allowed
    },
  }
}

interface Measured {
  wallPerSec: number
  cpuPerSec: number
}

async function measure(subject: Subject, n: number): Promise<Measured> {
  const cpu = process.cpuUsage()
  const started = performance.now()
  const allowed = await subject.run(n)
  const wall = (performance.now() - started) / 1000
  const used = process.cpuUsage(cpu)
  if (allowed !== n)
    throw new Error(`${subject.name}: ${n - allowed} of ${n} denied; limits are meant to admit all`)
  return { wallPerSec: n / wall, cpuPerSec: n / ((used.user + used.system) / 1e6) }
}

type Algorithm = 'token-bucket' | 'fixed-window' | 'sliding-window-counter'
const ALGORITHMS: readonly Algorithm[] = ['token-bucket', 'fixed-window', 'sliding-window-counter']

/**
 * The rows of one process: `algorithm`'s Sluice subjects and express-rate-limit's store, and with the
 * token bucket (the summary's) also rate-limiter-flexible and the plain Map floors. Peer rows come
 * from the token bucket's process only.
 */
async function runGroup(algorithm: Algorithm, quick: boolean): Promise<BenchRow[]> {
  const rlf = rateLimiterFlexible()
  const erl = expressRateLimitStore()
  const map = plainMap()
  const first = algorithm === 'token-bucket'
  const subjects: Subject[] = [sluice(algorithm, false)]
  if (algorithm !== 'fixed-window') subjects.push(sluice(algorithm, true))
  subjects.push(rlf, erl, awaitedMap(), map)
  if (baselineDist !== undefined && first) {
    const base = (await import(
      new URL('index.js', `file://${baselineDist.replace(/\/?$/, '/')}`).href
    )) as Build
    subjects.push(
      sluice('token-bucket', false, base, '-baseline'),
      sluice('token-bucket', true, base, '-baseline'),
    )
  }
  // Many short rounds rather than a few long ones: a subject's round and express-rate-limit's in
  // the same round are then a fraction of a second apart, so a burst of load elsewhere on the
  // machine hits both and their ratio keeps. Every key is still hit 10 times per round.
  const rounds = quick ? 5 : 15
  const n = 100_000
  try {
    // Warm up every subject (JIT, and every key present), then interleave measured rounds.
    for (const s of subjects) await measure(s, KEYS * 10)
    const runs = new Map<Subject, Measured[]>(subjects.map((s) => [s, []]))
    for (let r = 0; r < rounds; r++) {
      for (const s of subjects) runs.get(s)!.push(await measure(s, n))
    }
    const rows: BenchRow[] = []
    /** The median over rounds of a subject's figure over another's in the same round. */
    const vs = (s: Subject, other: Subject, pick: (m: Measured) => number) =>
      median(runs.get(s)!.map((m, i) => pick(m) / pick(runs.get(other)![i]!)))
    for (const [metric, pick, suffix] of [
      [`decisions/s (wall, median of ${rounds} rounds)`, (m: Measured) => m.wallPerSec, 'rate'],
      ['decisions per CPU second', (m: Measured) => m.cpuPerSec, 'cpu-rate'],
    ] as const) {
      for (const s of subjects) {
        if (!first && !s.id.startsWith('sluice')) continue
        rows.push({
          id: `memory/${s.id} ${suffix}`,
          subject: s.name,
          metric,
          value: median(runs.get(s)!.map(pick)),
          unit: 'ops/s',
          ratio: vs(s, rlf, pick),
          note: `x RLF; ${vs(s, erl, pick).toFixed(2)}x express-rate-limit store; ${vs(s, map, pick).toFixed(2)}x plain Map`,
        })
        if (s.id.startsWith('sluice'))
          rows.push({
            id: `memory/${s.id} vs-erl${suffix === 'rate' ? '' : '-cpu'}`,
            subject: s.name,
            metric: `x express-rate-limit MemoryStore (${suffix === 'rate' ? 'wall' : 'CPU'})`,
            value: vs(s, erl, pick),
            unit: 'x',
          })
      }
    }
    return rows
  } finally {
    erl.shutdown()
  }
}

/** Run `algorithm`'s group in a child process (this module, with the same Node.js flags) and return its rows. */
async function runGroupIsolated(algorithm: Algorithm, quick: boolean): Promise<BenchRow[]> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-memory-'))
  const out = join(dir, 'rows.json')
  const args = [...process.execArgv, fileURLToPath(import.meta.url), algorithm, quick ? 'quick' : 'full', out]
  try {
    const code = await new Promise<number | null>((done, fail) => {
      const child = spawn(process.execPath, args, { stdio: ['ignore', 'inherit', 'inherit'] })
      child.on('error', fail)
      child.on('exit', done)
    })
    if (code !== 0) throw new Error(`memory case, ${algorithm}: exited with code ${code}`)
    return JSON.parse(readFileSync(out, 'utf8')) as BenchRow[]
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

export const benchCase: BenchCase = {
  name: 'memory',
  async run({ quick }) {
    const rows: BenchRow[] = []
    for (const algorithm of ALGORITHMS) rows.push(...(await runGroupIsolated(algorithm, quick)))
    // The token bucket's process first in the table: it has the peers' rows.
    return rows
  },
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [algorithm, mode, out] = process.argv.slice(2) as [Algorithm, string, string]
  if (!ALGORITHMS.includes(algorithm)) throw new Error(`memory case: no algorithm ${algorithm}`)
  writeFileSync(out, JSON.stringify(await runGroup(algorithm, mode === 'quick')))
}
