// Decisions per second of the memory store next to rate-limiter-flexible's RateLimiterMemory,
// express-rate-limit's MemoryStore.increment and a plain inline Map fixed-window counter (awaited,
// and synchronous: the floor), 10,000 keys, every request admitted (limits set high so each subject
// does its full work). Subjects run interleaved after a warm-up; every figure is the median over
// rounds, ratios taken within a round, so a busy machine slows them alike. Also reported: decisions
// per CPU second (user + system), which a neighbour stealing the core does not skew.
// Each library runs in a process of its own (this module again, as a script): each Sluice
// algorithm, as in an app that uses one, and the peers, with express-rate-limit's store in every
// process's rounds as the yardstick the others compare through. Sharing one process changed the
// figures: three algorithms through the same limiter and store code leave V8's type feedback there
// mixed, and rate-limiter-flexible's timers and records per key fill the heap that every other
// subject's collections then walk.
import { writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { type Options as ExpressRateLimitOptions, MemoryStore } from 'express-rate-limit'
import { RateLimiterMemory } from 'rate-limiter-flexible'
// What is measured comes from the build (dist/), as users run it: tsx compiles src/ with esbuild's
// keepNames, which adds a defineProperty to every closure created per decision (about 1 µs per
// decision here) that the published build does not have.
import * as built from '../../packages/sluice/dist/index.js'
import { inChild } from '../child.js'
import { median } from '../load.js'
import type { BenchCase, BenchRow } from '../types.js'

/**
 * With SLUICE_BENCH_BASELINE_DIST=<a copy of dist/ from another commit>, the Sluice token-bucket
 * subjects also run over that build (`-baseline`), in a process of their own with the yardstick
 * beside them: a change's before and after from one run, each compared with express-rate-limit's
 * store. Run in the token bucket's process, the two builds' subjects shared the loop functions below
 * (one closure site, so one set of V8 type feedback and compiled code, inlining both builds' calls)
 * and each other's stores, and measured each other rather than themselves.
 */
const baselineDist = process.env.SLUICE_BENCH_BASELINE_DIST
type Build = Pick<typeof built, 'createLimiter' | 'memoryStore'>

const KEYS = 10_000
const keys = Array.from({ length: KEYS }, (_, i) => `user-${i}`)

interface Subject {
  /** Stable short name: the summary table's row ids use it. */
  id: string
  name: string
  /** Which limiter of its process a Sluice subject decides through (they are numbered from 0). */
  limiter?: number
  /** Run `n` decisions; returns how many were allowed (so nothing is optimised away). */
  run(n: number): number | Promise<number>
}

type Algorithm = 'token-bucket' | 'fixed-window' | 'sliding-window-counter'

/** Limiters made in this process, so a subject can say which one it decides through. */
let limitersMade = 0

/**
 * The `await consume` subject and, with `sync`, the `consumeSync` one, both through one limiter, as
 * in an app that uses one. A second limiter in the process slowed the awaited subject: by 5% while
 * it only existed, by 9% while it decided the `consumeSync` subject's calls (medians of six
 * interleaved processes each, 3 Dec 2026).
 */
function sluice(algorithm: Algorithm, sync: boolean, build: Build = built, suffix = ''): Subject[] {
  // A memory store and one policy whose limit no run reaches.
  const limiter = build.createLimiter({
    store: build.memoryStore(),
    policies: { p: { algorithm, limit: 1_000_000_000, window: '1s' } },
  })
  const made = limitersMade++
  const awaited: Subject = {
    id: `sluice-${algorithm}-consume${suffix}`,
    name: `sluice ${algorithm} await consume${suffix}`,
    limiter: made,
    async run(n) {
      let allowed = 0
      for (let i = 0; i < n; i++) if ((await limiter.consume('p', keys[i % KEYS]!)).allowed) allowed++
      return allowed
    },
  }
  if (!sync) return [awaited]
  return [
    awaited,
    {
      id: `sluice-${algorithm}-consumeSync${suffix}`,
      name: `sluice ${algorithm} consumeSync${suffix}`,
      limiter: made,
      run(n) {
        let allowed = 0
        for (let i = 0; i < n; i++) if (limiter.consumeSync('p', keys[i % KEYS]!).allowed) allowed++
        return allowed
      },
    },
  ]
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

type Group = 'token-bucket' | 'token-bucket-baseline' | 'fixed-window' | 'sliding-window-counter' | 'peers'
const GROUPS: readonly Group[] = [
  'token-bucket',
  ...(baselineDist === undefined ? [] : (['token-bucket-baseline'] as const)),
  'fixed-window',
  'sliding-window-counter',
  'peers',
]

/** What one process measured of a subject: per round, its rates and its ratios to express-rate-limit's store. */
interface Measurement {
  id: string
  name: string
  wall: number[]
  cpu: number[]
  vsErlWall: number[]
  vsErlCpu: number[]
  /** A Sluice subject's limiter, numbered within its process. */
  limiter?: number
  /** Which subject of the process ran first. */
  first: First
}

/** One subject's rounds pooled over processes, and each process's own measurement. */
type Pooled = Pick<Measurement, 'id' | 'name' | 'wall' | 'cpu' | 'vsErlWall' | 'vsErlCpu'> & {
  runs: readonly Measurement[]
}

/** Which subject of a Sluice group's process warms up and runs first: Sluice's, or the yardstick. */
export type First = 'sluice' | 'yardstick'

/**
 * The order of process `p` (from 0) of a group: Sluice first in even ones, the yardstick first in
 * odd ones, and each row's median pools both orders alike, so that an order that favours one
 * subject cannot decide a row (one did, by a third, while the processes loaded autocannon:
 * docs/benchmark-cases.md, Memory store). `forced` (SLUICE_BENCH_YARDSTICK_FIRST) sets one order
 * for every process: '1' the yardstick first, '0' Sluice first.
 */
export function firstIn(p: number, forced: string | undefined): First {
  if (forced === '1') return 'yardstick'
  if (forced === '0') return 'sluice'
  return p % 2 === 0 ? 'sluice' : 'yardstick'
}

/** The subjects of one process; express-rate-limit's store is in every one, the yardstick. */
async function subjectsOf(group: Group, erl: Subject, first: First): Promise<Subject[]> {
  if (group === 'peers') return [rateLimiterFlexible(), erl, awaitedMap(), plainMap()]
  let ours: Subject[]
  if (group === 'token-bucket-baseline') {
    const base = (await import(
      new URL('index.js', `file://${baselineDist!.replace(/\/?$/, '/')}`).href
    )) as Build
    ours = sluice('token-bucket', true, base, '-baseline')
  } else ours = sluice(group, group !== 'fixed-window')
  return first === 'yardstick' ? [erl, ...ours] : [...ours, erl]
}

/**
 * Decisions each subject makes before the measured rounds: every key 10 times, or
 * SLUICE_BENCH_MEMORY_WARMUP=<decisions>, to see whether a figure holds once V8 has run the code
 * for longer.
 */
export function warmUpOf(decisions: string | undefined): number {
  if (decisions === undefined || decisions === '') return KEYS * 10
  if (!/^[1-9]\d{0,9}$/.test(decisions))
    throw new Error(
      `SLUICE_BENCH_MEMORY_WARMUP is a whole number of decisions, not ${JSON.stringify(decisions)}`,
    )
  return Number(decisions)
}
const warmUp = warmUpOf(process.env.SLUICE_BENCH_MEMORY_WARMUP)

/** Run one group's interleaved rounds in this process. */
async function runGroup(group: Group, quick: boolean, first: First): Promise<Measurement[]> {
  const erl = expressRateLimitStore()
  const subjects = await subjectsOf(group, erl, first)
  // Many short rounds rather than a few long ones: a subject's round and express-rate-limit's in
  // the same round are then a fraction of a second apart, so a burst of load elsewhere on the
  // machine hits both and their ratio keeps. Every key is still hit 10 times per round.
  const rounds = quick ? 5 : 15
  const n = 100_000
  try {
    // Warm up every subject (JIT, and every key present), then interleave measured rounds.
    for (const s of subjects) await measure(s, warmUp)
    const runs = new Map<Subject, Measured[]>(subjects.map((s) => [s, []]))
    for (let r = 0; r < rounds; r++) {
      for (const s of subjects) runs.get(s)!.push(await measure(s, n))
    }
    const erlRuns = runs.get(erl)!
    return subjects.map((s) => {
      const m = runs.get(s)!
      return {
        id: s.id,
        name: s.name,
        wall: m.map((x) => x.wallPerSec),
        cpu: m.map((x) => x.cpuPerSec),
        vsErlWall: m.map((x, i) => x.wallPerSec / erlRuns[i]!.wallPerSec),
        vsErlCpu: m.map((x, i) => x.cpuPerSec / erlRuns[i]!.cpuPerSec),
        first,
        ...(s.limiter === undefined ? {} : { limiter: s.limiter }),
      }
    })
  } finally {
    erl.shutdown()
  }
}

/**
 * V8's flags for a group's processes: with SLUICE_BENCH_SEMI_SPACE_MB=<n>, each semi-space of the
 * young generation is n MB from the start and stays so. V8 otherwise sizes it by what the process
 * allocated and kept so far, as it does in an app.
 */
export function semiSpaceFlags(mb: string | undefined): string[] {
  if (mb === undefined || mb === '') return []
  if (!/^[1-9]\d{0,3}$/.test(mb))
    throw new Error(
      `SLUICE_BENCH_SEMI_SPACE_MB is a whole number of MB from 1 to 9999, not ${JSON.stringify(mb)}`,
    )
  return [`--min-semi-space-size=${mb}`, `--max-semi-space-size=${mb}`]
}

/** Run `group` in a child process (this module, as a script) and return what it measured. */
function runGroupIsolated(group: Group, quick: boolean, first: First): Promise<Measurement[]> {
  return inChild<Measurement[]>(
    fileURLToPath(import.meta.url),
    [group, quick ? 'quick' : 'full', first],
    `memory case, ${group}, ${first} first`,
    semiSpaceFlags(process.env.SLUICE_BENCH_SEMI_SPACE_MB),
  )
}

/**
 * How many processes each group runs in. One process's rounds agree with each other, and processes
 * can differ by more than the machine moves them: the same subject once measured 0.6x to 1.0x
 * express-rate-limit's store from one process to the next (autocannon loaded in each, and the
 * memory store's sweeper dropping keys in use: docs/benchmark-cases.md, Memory store). The median
 * over rounds pooled from six processes, three of each order (see firstIn), is the figure, and
 * each process's own median is printed beside it, so such a spread shows.
 */
const PROCESSES = { quick: 2, full: 6 }

/** `<order> <what show makes of its processes>` for each order some process ran, joined by `separator`. */
function byOrder(m: Pooled, show: (runs: readonly Measurement[]) => string, separator: string): string {
  return (
    [
      ['Sluice first', 'sluice'],
      ['the store first', 'yardstick'],
    ] as const
  )
    .map(([label, first]) => [label, m.runs.filter((r) => r.first === first)] as const)
    .filter(([, runs]) => runs.length > 0)
    .map(([label, runs]) => `${label} ${show(runs)}`)
    .join(separator)
}

/** Each process's median ratio to express-rate-limit's store, by order: `by process, Sluice first 0.94, 0.90; ...`. */
function processesOf(m: Pooled): string {
  return `by process, ${byOrder(m, (runs) => runs.map((r) => median(r.vsErlWall).toFixed(2)).join(', '), '; ')}`
}

/**
 * A subject's decisions/s in the processes of each order (the median of their rounds): which of
 * the two, Sluice's subjects or the store, the order slows.
 */
function ratesByOrder(m: Pooled): string {
  return `decisions/s by order: ${byOrder(m, (runs) => `${(median(runs.flatMap((r) => r.wall)) / 1e6).toFixed(2)}M`, ', ')}`
}

/** The rounds of several processes' measurements of one subject, pooled. */
function pooled(runs: readonly Measurement[]): Pooled {
  const first = runs[0]!
  return {
    id: first.id,
    name: first.name,
    wall: runs.flatMap((m) => m.wall),
    cpu: runs.flatMap((m) => m.cpu),
    vsErlWall: runs.flatMap((m) => m.vsErlWall),
    vsErlCpu: runs.flatMap((m) => m.vsErlCpu),
    runs,
  }
}

export const benchCase: BenchCase = {
  name: 'memory',
  async run({ quick }) {
    const byProcess = new Map<string, Measurement[]>()
    const add = (m: Measurement) => {
      const runs = byProcess.get(m.id)
      if (runs === undefined) byProcess.set(m.id, [m])
      else runs.push(m)
    }
    const processes = quick ? PROCESSES.quick : PROCESSES.full
    // Process by process through the groups, so a slow minute of the machine falls on every group.
    for (let p = 0; p < processes; p++) {
      const first = firstIn(p, process.env.SLUICE_BENCH_YARDSTICK_FIRST)
      for (const group of GROUPS) {
        const ofGroup = await runGroupIsolated(group, quick, first)
        // express-rate-limit's own rows come from the peers' process; every process has it as yardstick.
        if (group === 'peers') ofGroup.forEach(add)
        else {
          ofGroup.filter((m) => m.id.startsWith('sluice')).forEach(add)
          // The yardstick as this process measured it: the figure its Sluice rows' ratios were taken against.
          const erl = ofGroup.find((m) => m.id === 'express-rate-limit-store')!
          add({ ...erl, id: `express-rate-limit-store@${group}`, name: `${erl.name} (${group}'s process)` })
        }
      }
    }
    const all = [...byProcess.values()].map(pooled)
    const measured = all.filter((m) => !m.id.includes('@'))
    const yardsticks = all.filter((m) => m.id.includes('@'))
    const byId = new Map(measured.map((m) => [m.id, m]))
    const rlf = byId.get('rate-limiter-flexible')!
    const map = byId.get('map')!
    const rounds = rlf.wall.length
    const over = `${rounds} rounds in ${processes} processes`
    const rows: BenchRow[] = []
    for (const [metric, pick, versus, suffix] of [
      [`decisions/s (wall, median of ${over})`, (m: Pooled) => m.wall, (m: Pooled) => m.vsErlWall, 'rate'],
      ['decisions per CPU second', (m: Pooled) => m.cpu, (m: Pooled) => m.vsErlCpu, 'cpu-rate'],
    ] as const) {
      // Subjects of different processes compare through their ratios to express-rate-limit's store.
      const vsErl = (m: Pooled) => median(versus(m))
      for (const s of measured) {
        rows.push({
          id: `memory/${s.id} ${suffix}`,
          subject: s.name,
          metric,
          value: median(pick(s)),
          unit: 'ops/s',
          ratio: vsErl(s) / vsErl(rlf),
          note: `x RLF; ${vsErl(s).toFixed(2)}x express-rate-limit store${suffix === 'rate' ? `; ${processesOf(s)}` : ''}; ${(vsErl(s) / vsErl(map)).toFixed(2)}x plain Map${suffix === 'rate' && s.id.startsWith('sluice') ? `; ${ratesByOrder(s)}` : ''}`,
        })
        if (s.id.startsWith('sluice'))
          rows.push({
            id: `memory/${s.id} vs-erl${suffix === 'rate' ? '' : '-cpu'}`,
            subject: s.name,
            metric: `x express-rate-limit MemoryStore (${suffix === 'rate' ? 'wall' : 'CPU'})`,
            value: vsErl(s),
            unit: 'x',
            ...(suffix === 'rate' ? { note: processesOf(s) } : {}),
          })
      }
      for (const e of yardsticks)
        rows.push({
          id: `memory/${e.id} ${suffix}`,
          subject: e.name,
          metric,
          value: median(pick(e)),
          unit: 'ops/s',
          ...(suffix === 'rate' ? { note: ratesByOrder(e) } : {}),
        })
    }
    return rows
  },
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [group, mode, first, out] = process.argv.slice(2) as [Group, string, First, string]
  if (!GROUPS.includes(group)) throw new Error(`memory case: no group ${group}`)
  if (first !== 'sluice' && first !== 'yardstick')
    throw new Error(`memory case: first is sluice or yardstick, not ${first}`)
  writeFileSync(out, JSON.stringify(await runGroup(group, mode === 'quick', first)))
}
