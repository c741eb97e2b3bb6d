// The Redis rows of the summary table, ioredis against one redis-server started here on a free
// port: decisions/s with 64 in flight for Sluice (token bucket, default store options; once with
// keys that expire between hits, once with keys read back), rate-limiter-flexible's
// RateLimiterRedis and a bare ioredis EVALSHA of a minimal token-bucket script, next to
// redis-benchmark running EVALSHA of that script with -c 64 -P 16 (the server's own ceiling, no
// Node.js client); and p50 latency with 1 in flight, Sluice vs rate-limiter-flexible.
// Subjects alternate in rounds; figures are medians over rounds, ratios taken within a round. Each
// subject's round runs in a Node.js process of its own (this module again, as a script), as in an
// app that uses one limiter: subjects taking turns in one process measured about twice their CPU
// per decision alone (each one's garbage and type feedback left to the next).
// Where the time goes: CPU per decision of this process and of redis-server (read from
// /proc/<pid>/stat), each round; on 2 cores the two share the machine, so decisions/s at 64 in flight
// is bounded by 2 cores over their sum.
// Every algorithm, coalescing off, bytes per key and each script's cost inside Redis: redis-detail.
//   npm run bench -- --only redis [--quick]
import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import { RateLimiterRedis } from 'rate-limiter-flexible'
// The build (dist/), as users run it: tsx's keepNames would add about 1 µs per decision to Sluice.
import { createLimiter, type Decision } from '../../packages/sluice/dist/index.js'
import { redisStore } from '../../packages/sluice/dist/redis.js'
import { startRedis } from '../../test/helpers/redis-harness.js'
import { inChild } from '../child.js'
import { median, processCpuMicros } from '../load.js'
import { MINIMAL_TOKEN_BUCKET } from '../reference-scripts.js'
import { throughput } from '../throughput.js'
import type { BenchCase, BenchRow } from '../types.js'

const run = promisify(execFile)
const KEYS = 10_000
const keys = Array.from({ length: KEYS }, (_, i) => `user-${String(i).padStart(5, '0')}`)
const MINIMAL_SHA = createHash('sha1').update(MINIMAL_TOKEN_BUCKET).digest('hex')

interface Subject {
  id: string
  name: string
  decide(key: string): Promise<unknown>
  /** Checks each answer (throws when it is not what the run expects), with no promise of its own. */
  check?(answer: unknown): void
}

/** redis-benchmark EVALSHA of the minimal script over 10,000 keys, 64 clients, 16 per round trip. */
async function redisBenchmark(port: number, requests: number): Promise<number> {
  const args = ['-h', '127.0.0.1', '-p', String(port), '-c', '64', '-P', '16', '-n', String(requests)]
  args.push('-r', String(KEYS), '--csv', 'EVALSHA', MINIMAL_SHA, '1', 'min:{__rand_int__}')
  args.push('1000000', '3600000', '1000000')
  const { stdout } = await run('redis-benchmark', args)
  const line = stdout.trim().split('\n').at(-1)!
  return Number(JSON.parse(`[${line}]`)[1])
}

type SubjectId = 'sluice' | 'sluice-kept' | 'rate-limiter-flexible' | 'bare-evalsha'

const NAMES: Record<SubjectId, string> = {
  sluice: 'sluice token-bucket (default store options)',
  'sluice-kept': 'sluice token-bucket, keys kept between hits (1,000,000 per 12 days)',
  'rate-limiter-flexible': 'rate-limiter-flexible RateLimiterRedis',
  'bare-evalsha': 'ioredis EVALSHA minimal token-bucket script',
}

/** One subject over `client`, as its library's README writes it. */
function subjectOf(id: SubjectId, client: Redis): Subject {
  if (id === 'sluice' || id === 'sluice-kept') {
    // A bucket of 1,000,000 per hour is full again 3.6 ms after a hit, so its key has expired when
    // the loop comes back to it 30 ms later: every decision starts a new key. Over 12 days a token
    // takes a second to come back, so the key is still there and its state is read back, as for
    // any key hit more often than its bucket refills (and as the peer's fixed window keys are).
    // A store timeout far above any latency here, so every decision is Redis's (none degraded).
    const limiter = createLimiter({
      store: redisStore(client),
      policies: {
        api: { algorithm: 'token-bucket', limit: 1_000_000, window: id === 'sluice' ? '1h' : '12d' },
      },
      storeTimeout: '60s',
    })
    return {
      id,
      name: NAMES[id],
      decide: (key) => limiter.consume('api', key),
      check: (answer) => {
        const decision = answer as Decision
        if (!decision.allowed || decision.degraded === true)
          throw new Error('a decision was not Redis’s allow')
      },
    }
  }
  if (id === 'rate-limiter-flexible') {
    const rlfLimiter = new RateLimiterRedis({ storeClient: client, points: 1_000_000, duration: 3600 })
    return { id, name: NAMES[id], decide: (key) => rlfLimiter.consume(key) }
  }
  return {
    id,
    name: NAMES[id],
    decide: (key) => client.evalsha(MINIMAL_SHA, 1, `min:{${key}}`, '1000000', '3600000', '1000000'),
  }
}

/** What one round of one subject measured, in its own process. */
interface Round {
  rate: number
  p50: number
  /** This process's CPU per decision, µs. */
  nodeCpu: number
  /** redis-server's CPU per decision, µs; undefined where /proc is not there. */
  redisCpu: number | undefined
}

/** One round of `id` in this process: a warm-up, then the measured phase. */
async function runRound(
  id: SubjectId,
  port: number,
  pid: number,
  inFlight: number,
  ms: number,
): Promise<Round> {
  const client = new Redis(port, '127.0.0.1')
  try {
    const subject = subjectOf(id, client)
    const hooks = subject.check === undefined ? {} : { check: subject.check }
    // A fresh process: its code compiled before the measured phase.
    await throughput(subject.decide, inFlight, Math.max(2 * ms, 800), keys, hooks)
    let serverBefore: number | undefined
    let serverAfter: number | undefined
    const r = await throughput(subject.decide, inFlight, ms, keys, {
      ...hooks,
      before: () => {
        serverBefore = processCpuMicros(pid)
      },
      after: () => {
        serverAfter = processCpuMicros(pid)
      },
    })
    return {
      rate: r.rate,
      p50: r.p50,
      nodeCpu: r.cpuUs / r.decisions,
      redisCpu:
        serverBefore === undefined || serverAfter === undefined
          ? undefined
          : (serverAfter - serverBefore) / r.decisions,
    }
  } finally {
    client.disconnect()
  }
}

/** One round of `id` in a child process (this module, as a script). */
function runRoundIsolated(
  id: SubjectId,
  port: number,
  pid: number,
  inFlight: number,
  ms: number,
): Promise<Round> {
  const args = [id, String(port), String(pid), String(inFlight), String(ms)]
  return inChild<Round>(fileURLToPath(import.meta.url), args, `redis case, ${id}`)
}

export const benchCase: BenchCase = {
  name: 'redis',
  async run({ quick }) {
    const server = await startRedis()
    const client = new Redis(server.port, '127.0.0.1')
    try {
      const pid = Number(/process_id:(\d+)/.exec(await client.info('server'))?.[1])
      await client.script('LOAD', MINIMAL_TOKEN_BUCKET)
      const ms = quick ? 400 : 1000
      const rounds = quick ? 3 : 5
      const rows: BenchRow[] = []
      for (const [inFlight, subjects] of [
        [64, ['sluice', 'sluice-kept', 'rate-limiter-flexible', 'bare-evalsha']],
        [1, ['sluice', 'rate-limiter-flexible']],
      ] as const) {
        const measured = new Map<SubjectId, Round[]>(subjects.map((s) => [s, []]))
        for (let round = 0; round < rounds; round++) {
          for (let i = 0; i < subjects.length; i++) {
            const id = subjects[(i + round) % subjects.length]!
            measured.get(id)!.push(await runRoundIsolated(id, server.port, pid, inFlight, ms))
            await client.flushall()
            await client.script('LOAD', MINIMAL_TOKEN_BUCKET)
          }
        }
        const of = (id: SubjectId, pick: (r: Round) => number | undefined) =>
          measured
            .get(id)!
            .map(pick)
            .filter((v): v is number => v !== undefined)
        const vs = (a: SubjectId, b: SubjectId) =>
          median(measured.get(a)!.map((r, i) => r.rate / measured.get(b)![i]!.rate))
        for (const id of subjects) {
          const note = `x RLF, median of ${rounds} rounds x ${ms} ms, each in a process of its own${inFlight === 64 ? `; ${vs(id, 'bare-evalsha').toFixed(2)}x bare EVALSHA` : ''}`
          rows.push({
            id: `redis/${id} rate@${inFlight}`,
            subject: NAMES[id],
            metric: `decisions/s @${inFlight}`,
            value: median(of(id, (r) => r.rate)),
            unit: '/s',
            ratio: vs(id, 'rate-limiter-flexible'),
            note,
          })
          rows.push({
            id: `redis/${id} p50@${inFlight}`,
            subject: NAMES[id],
            metric: `p50 @${inFlight}`,
            value: median(of(id, (r) => r.p50)) * 1000,
            unit: 'µs',
          })
          rows.push({
            id: `redis/${id} node-cpu@${inFlight}`,
            subject: NAMES[id],
            metric: `this process's CPU per decision @${inFlight}`,
            value: median(of(id, (r) => r.nodeCpu)),
            unit: 'µs',
            note: 'user + system over the measured phase, the load loop included',
          })
          const redisCpu = of(id, (r) => r.redisCpu)
          if (redisCpu.length > 0)
            rows.push({
              id: `redis/${id} redis-cpu@${inFlight}`,
              subject: NAMES[id],
              metric: `redis-server CPU per decision @${inFlight}`,
              value: median(redisCpu),
              unit: 'µs',
              note: '/proc/<pid>/stat, 10 ms ticks',
            })
        }
      }
      const benchmarks: number[] = []
      for (let i = 0; i < (quick ? 1 : 3); i++)
        benchmarks.push(await redisBenchmark(server.port, quick ? 50_000 : 100_000))
      rows.push({
        id: 'redis/redis-benchmark rate@64',
        subject: 'redis-benchmark EVALSHA minimal token-bucket script -c 64 -P 16',
        metric: 'decisions/s @64',
        value: median(benchmarks),
        unit: '/s',
        note: `median of ${benchmarks.length} runs`,
      })
      return rows
    } finally {
      client.disconnect()
      await server.stop()
    }
  },
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [id, port, pid, inFlight, ms, out] = process.argv.slice(2) as [
    SubjectId,
    string,
    string,
    string,
    string,
    string,
  ]
  if (!(id in NAMES)) throw new Error(`redis case: no subject ${id}`)
  writeFileSync(
    out,
    JSON.stringify(await runRound(id, Number(port), Number(pid), Number(inFlight), Number(ms))),
  )
  process.exit(0)
}
