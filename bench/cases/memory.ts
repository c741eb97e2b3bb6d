// Decisions per second of the memory store next to rate-limiter-flexible's RateLimiterMemory and a
// plain inline Map fixed-window counter, 10,000 keys, every request admitted (limits set high so
// each subject does its full work). Subjects run interleaved, best of several rounds, so a busy
// machine slows them alike. Also reported: decisions per CPU second (user + system), which a
// neighbour stealing the core does not skew.
import { RateLimiterMemory } from 'rate-limiter-flexible'
// What is measured comes from the build (dist/), as users run it: tsx compiles src/ with esbuild's
// keepNames, which adds a defineProperty to every closure created per decision (about 1 µs per
// decision here) that the published build does not have.
import { createLimiter, memoryStore } from '../../dist/index.js'
import type { BenchCase, BenchRow } from '../types.js'

const KEYS = 10_000
const keys = Array.from({ length: KEYS }, (_, i) => `user-${i}`)

interface Subject {
  name: string
  /** Run `n` decisions; returns how many were allowed (so nothing is optimised away). */
  run(n: number): number | Promise<number>
}

function sluice(algorithm: 'token-bucket' | 'sliding-window-counter', sync: boolean): Subject {
  const limiter = createLimiter({
    store: memoryStore(),
    policies: { p: { algorithm, limit: 1_000_000_000, window: '1s' } },
  })
  if (sync) {
    return {
      name: `sluice ${algorithm} consumeSync`,
      run(n) {
        let allowed = 0
        for (let i = 0; i < n; i++) if (limiter.consumeSync('p', keys[i % KEYS]!).allowed) allowed++
        return allowed
      },
    }
  }
  return {
    name: `sluice ${algorithm} await consume`,
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

/** The floor: a fixed-window counter in a Map, inline, synchronous, no validation, no eviction. */
function plainMap(): Subject {
  const windows = new Map<string, { start: number; count: number }>()
  return {
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

export const benchCase: BenchCase = {
  name: 'memory',
  async run({ quick }) {
    const subjects = [
      sluice('token-bucket', false),
      sluice('token-bucket', true),
      sluice('sliding-window-counter', false),
      sluice('sliding-window-counter', true),
      rateLimiterFlexible(),
      plainMap(),
    ]
    const rounds = quick ? 3 : 7
    const n = quick ? 200_000 : 1_000_000
    // Warm up every subject (JIT, and every key present), then interleave measured rounds.
    for (const s of subjects) await measure(s, KEYS * 5)
    const best = new Map<Subject, Measured>()
    for (let r = 0; r < rounds; r++) {
      for (const s of subjects) {
        const m = await measure(s, n)
        const b = best.get(s)
        best.set(s, {
          wallPerSec: Math.max(b?.wallPerSec ?? 0, m.wallPerSec),
          cpuPerSec: Math.max(b?.cpuPerSec ?? 0, m.cpuPerSec),
        })
      }
    }
    const rlf = best.get(subjects[4]!)!
    const map = best.get(subjects[5]!)!
    const rows: BenchRow[] = []
    for (const s of subjects) {
      const m = best.get(s)!
      rows.push({
        subject: s.name,
        metric: 'decisions/s (wall, best round)',
        value: m.wallPerSec,
        unit: 'ops/s',
        ratio: m.wallPerSec / rlf.wallPerSec,
        note: `x RLF; ${(m.wallPerSec / map.wallPerSec).toFixed(2)}x plain Map`,
      })
    }
    for (const s of subjects) {
      const m = best.get(s)!
      rows.push({
        subject: s.name,
        metric: 'decisions per CPU second',
        value: m.cpuPerSec,
        unit: 'ops/s',
        ratio: m.cpuPerSec / rlf.cpuPerSec,
        note: `x RLF; ${(m.cpuPerSec / map.cpuPerSec).toFixed(2)}x plain Map`,
      })
    }
    return rows
  },
}
