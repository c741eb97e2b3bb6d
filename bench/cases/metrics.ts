// What the metrics hook costs on the hot path: memory-store decisions per second with no listener,
// with an empty listener (the limiter's own event cost), with the Prometheus metrics only, and with everything (metrics, top-K, spikes, dashboard series).
// Then layered (address, user) decisions, where the abuse patterns count pairs: observability with
// `abuse: false` next to observability with the abuse patterns on.
// Run alone: npm run build && node --import tsx bench/cases/metrics.ts [--quick]
import { pathToFileURL } from 'node:url'
// What is measured comes from the build (dist/), as users run it: tsx compiles src/ with esbuild's
// keepNames, which adds a defineProperty to every closure created per decision (about 1 µs per
// decision here) that the published build does not have.
import { createLimiter, type Limiter } from '../../packages/sluice/dist/index.js'
import { createMetrics, createObservability } from '../../packages/sluice/dist/metrics.js'
import type { BenchRow } from '../types.js'

type Setup = 'none' | 'empty' | 'metrics' | 'observability' | 'observability-no-abuse'

const KEYS = Array.from({ length: 1000 }, (_, i) => `user-${i}`)

interface Built {
  limiter: Limiter<'api' | 'perIp' | 'perUser'>
  done(): void
  /** Deferred work that belongs to the measured cost (observability applies its batches here). */
  flush?: () => void
}

/** Decisions between two flushes in the loop: 10 000 is 10-100 ms here, as often as the 100 ms timer. */
const FLUSH_EVERY = 10_000

function build(setup: Setup): Built {
  const limiter = createLimiter({
    // 1000 keys round robin against 100/s each: mostly allowed, some denied in a long run.
    policies: {
      api: { algorithm: 'token-bucket', limit: 100, window: '1s' },
      perIp: { algorithm: 'token-bucket', limit: 1000, window: '1s' },
      perUser: { algorithm: 'token-bucket', limit: 100, window: '1s' },
    },
  })
  if (setup === 'empty') {
    // What the limiter's own event path costs (timing, the event object): the floor under any hook.
    return { limiter, done: limiter.subscribe(() => {}) }
  }
  if (setup === 'metrics') {
    const metrics = createMetrics()
    const off = limiter.subscribe(metrics.observe)
    return { limiter, done: off }
  }
  if (setup === 'observability' || setup === 'observability-no-abuse') {
    const obs = createObservability({ limiter, ...(setup === 'observability' ? {} : { abuse: false }) })
    return { limiter, done: () => obs.close(), flush: () => obs.flush() }
  }
  return { limiter, done: () => {} }
}

const SETUPS: readonly Setup[] = ['none', 'empty', 'metrics', 'observability-no-abuse', 'observability']
const LAYERED_SETUPS: readonly Setup[] = ['none', 'observability-no-abuse', 'observability']
const NAMES: Record<Setup, string> = {
  none: 'no listener',
  empty: 'empty listener',
  metrics: 'createMetrics',
  'observability-no-abuse': 'createObservability, abuse off',
  observability: 'createObservability (abuse on)',
}

type Mode = 'consume' | 'consumeSync' | 'layered'
/** Layered traffic: 1000 users over 1000 addresses, each user on a few of them. */
const LAYERS = Array.from({ length: 1000 }, (_, i) => [
  { policy: 'perIp' as const, key: `ip:10.0.${(i * 7) % 250}.${i % 200}` },
  { policy: 'perUser' as const, key: `user:${i % 700}` },
])

interface Sample {
  /** Decisions per wall-clock second. */
  wall: number
  /** Decisions per second of this process's CPU time (user + system): steadier on a shared machine. */
  cpu: number
}

/** Throughput of `ops` calls on a warmed-up limiter. */
async function measure({ limiter, flush }: Built, mode: Mode, ops: number): Promise<Sample> {
  const start = performance.now()
  const cpuStart = process.cpuUsage()
  for (let done = 0; done < ops; done += FLUSH_EVERY) {
    const n = Math.min(FLUSH_EVERY, ops - done)
    if (mode === 'consumeSync')
      for (let i = done; i < done + n; i++) limiter.consumeSync('api', KEYS[i % KEYS.length]!)
    else if (mode === 'layered')
      for (let i = done; i < done + n; i++) await limiter.consume(LAYERS[i % LAYERS.length]!)
    else for (let i = done; i < done + n; i++) await limiter.consume('api', KEYS[i % KEYS.length]!)
    flush?.()
  }
  const cpu = process.cpuUsage(cpuStart)
  return { wall: ops / ((performance.now() - start) / 1000), cpu: ops / ((cpu.user + cpu.system) / 1e6) }
}

/**
 * The setups take turns, round after round, and each reports its median: on a shared machine the
 * load drifts, and taking turns spreads that drift over every setup alike.
 */
async function compare(mode: Mode, ops: number, rounds: number): Promise<Map<Setup, Sample>> {
  const setups = mode === 'layered' ? LAYERED_SETUPS : SETUPS
  const built = new Map(setups.map((setup) => [setup, build(setup)]))
  for (const b of built.values()) await measure(b, mode, Math.min(20_000, ops)) // JIT warm-up
  const samples = new Map<Setup, Sample[]>(setups.map((setup) => [setup, []]))
  for (let round = 0; round < rounds; round++)
    for (const setup of setups) samples.get(setup)!.push(await measure(built.get(setup)!, mode, ops))
  for (const { done } of built.values()) done()
  const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  return new Map(
    setups.map((setup) => {
      const xs = samples.get(setup)!
      return [setup, { wall: median(xs.map((x) => x.wall)), cpu: median(xs.map((x) => x.cpu)) }]
    }),
  )
}

export const benchCase = {
  name: 'metrics hook overhead (memory store)',
  extra: true,
  async run({ quick }: { quick: boolean }): Promise<BenchRow[]> {
    const ops = quick ? 50_000 : 200_000
    const rounds = quick ? 3 : 7
    const rows: BenchRow[] = []
    for (const mode of ['consume', 'consumeSync', 'layered'] as const) {
      const call = mode === 'layered' ? 'consume(ip + user layers)' : mode
      const results = await compare(mode, ops, rounds)
      const baseline = results.get('none')!
      for (const kind of ['cpu', 'wall'] as const) {
        for (const setup of results.keys()) {
          const value = results.get(setup)![kind]
          const row: BenchRow = {
            subject: `${call}, ${NAMES[setup]}`,
            metric: kind === 'cpu' ? 'throughput per CPU second' : 'throughput (wall clock)',
            value,
            unit: kind === 'cpu' ? 'ops/cpu-s' : 'ops/s',
          }
          if (setup !== 'none') {
            row.ratio = value / baseline[kind]
            row.note = `+${(1e6 / value - 1e6 / baseline[kind]).toFixed(2)} us per decision`
          }
          rows.push(row)
        }
      }
    }
    return rows
  },
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const rows = await benchCase.run({ quick: process.argv.includes('--quick') })
  for (const r of rows) {
    const ratio = r.ratio === undefined ? '' : `  x${r.ratio.toFixed(2)}`
    console.log(
      `${r.metric.padEnd(26)} ${r.subject.padEnd(62)} ${Math.round(r.value).toLocaleString('en-US').padStart(12)} ${r.unit}${ratio}  ${r.note ?? ''}`,
    )
  }
}
