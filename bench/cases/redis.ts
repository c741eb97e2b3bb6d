// The Redis rows of the summary table, ioredis against one redis-server started here on a free
// port: decisions/s with 64 in flight for Sluice (token bucket, default store options),
// rate-limiter-flexible's RateLimiterRedis and a bare ioredis EVALSHA of a minimal token-bucket
// script, next to redis-benchmark running EVALSHA of that script with -c 64 -P 16 (the server's own
// ceiling, no Node.js client); and p50 latency with 1 in flight, Sluice vs rate-limiter-flexible.
// Subjects alternate in rounds; figures are medians over rounds, ratios taken within a round.
// Where the time goes: CPU per decision of this process and of redis-server (read from
// /proc/<pid>/stat), each round; on 2 cores the two share the machine, so decisions/s at 64 in flight
// is bounded by 2 cores over their sum.
// Every algorithm, coalescing off, bytes per key and each script's cost inside Redis: redis-detail.
//   npm run bench -- --only redis [--quick]
import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import { RateLimiterRedis } from 'rate-limiter-flexible'
// The build (dist/), as users run it: tsx's keepNames would add about 1 µs per decision to Sluice.
import { createLimiter, type Decision } from '../../packages/sluice/dist/index.js'
import { redisStore } from '../../packages/sluice/dist/redis.js'
import { startRedis } from '../../test/helpers/redis-harness.js'
import { median } from '../load.js'
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

/** CPU time (µs, user + system) redis-server `pid` has used; undefined where /proc is not there. */
function serverCpu(pid: number): number | undefined {
  try {
    // Fields after the command name: utime and stime are the 12th and 13th, in clock ticks (100/s).
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
    return (Number(fields[11]) + Number(fields[12])) * 10_000
  } catch {
    return undefined
  }
}

export const benchCase: BenchCase = {
  name: 'redis',
  async run({ quick }) {
    const server = await startRedis()
    const client = new Redis(server.port, '127.0.0.1')
    try {
      const pid = Number(/process_id:(\d+)/.exec(await client.info('server'))?.[1])
      // A store timeout far above any latency here, so every decision is Redis's (none degraded).
      const limiter = createLimiter({
        store: redisStore(client),
        policies: { api: { algorithm: 'token-bucket', limit: 1_000_000, window: '1h' } },
        storeTimeout: '60s',
      })
      const sluice: Subject = {
        id: 'sluice',
        name: 'sluice token-bucket (default store options)',
        decide: (key) => limiter.consume('api', key),
        check: (answer) => {
          const decision = answer as Decision
          if (!decision.allowed || decision.degraded === true)
            throw new Error('a decision was not Redis’s allow')
        },
      }
      const rlfLimiter = new RateLimiterRedis({ storeClient: client, points: 1_000_000, duration: 3600 })
      const rlf: Subject = {
        id: 'rate-limiter-flexible',
        name: 'rate-limiter-flexible RateLimiterRedis',
        decide: (key) => rlfLimiter.consume(key),
      }
      await client.script('LOAD', MINIMAL_TOKEN_BUCKET)
      const bare: Subject = {
        id: 'bare-evalsha',
        name: 'ioredis EVALSHA minimal token-bucket script',
        decide: (key) => client.evalsha(MINIMAL_SHA, 1, `min:{${key}}`, '1000000', '3600000', '1000000'),
      }
      const ms = quick ? 400 : 1000
      const rounds = quick ? 3 : 5
      const rows: BenchRow[] = []
      for (const [inFlight, subjects] of [
        [64, [sluice, rlf, bare]],
        [1, [sluice, rlf]],
      ] as const) {
        const rates = new Map<Subject, number[]>(subjects.map((s) => [s, []]))
        const p50s = new Map<Subject, number[]>(subjects.map((s) => [s, []]))
        const nodeCpu = new Map<Subject, number[]>(subjects.map((s) => [s, []]))
        const redisCpu = new Map<Subject, number[]>(subjects.map((s) => [s, []]))
        for (let round = 0; round < rounds; round++) {
          for (let i = 0; i < subjects.length; i++) {
            const subject = subjects[(i + round) % subjects.length]!
            // Both CPU figures cover the measured phase alone (no warm-up, no latency sort).
            let serverBefore: number | undefined
            let serverAfter: number | undefined
            const r = await throughput(subject.decide, inFlight, ms, keys, {
              ...(subject.check === undefined ? {} : { check: subject.check }),
              before: () => {
                serverBefore = serverCpu(pid)
              },
              after: () => {
                serverAfter = serverCpu(pid)
              },
            })
            rates.get(subject)!.push(r.rate)
            p50s.get(subject)!.push(r.p50)
            nodeCpu.get(subject)!.push(r.cpuUs / r.decisions)
            if (serverBefore !== undefined && serverAfter !== undefined)
              redisCpu.get(subject)!.push((serverAfter - serverBefore) / r.decisions)
            await client.flushall()
            await client.script('LOAD', MINIMAL_TOKEN_BUCKET)
          }
        }
        const vs = (s: Subject, other: Subject) =>
          median(rates.get(s)!.map((rate, i) => rate / rates.get(other)![i]!))
        for (const s of subjects) {
          const note = `x RLF, median of ${rounds} rounds x ${ms} ms${inFlight === 64 ? `; ${vs(s, bare).toFixed(2)}x bare EVALSHA` : ''}`
          rows.push({
            id: `redis/${s.id} rate@${inFlight}`,
            subject: s.name,
            metric: `decisions/s @${inFlight}`,
            value: median(rates.get(s)!),
            unit: '/s',
            ratio: vs(s, rlf),
            note,
          })
          rows.push({
            id: `redis/${s.id} p50@${inFlight}`,
            subject: s.name,
            metric: `p50 @${inFlight}`,
            value: median(p50s.get(s)!) * 1000,
            unit: 'µs',
          })
          rows.push({
            id: `redis/${s.id} node-cpu@${inFlight}`,
            subject: s.name,
            metric: `this process's CPU per decision @${inFlight}`,
            value: median(nodeCpu.get(s)!),
            unit: 'µs',
            note: 'user + system over the measured phase, the load loop included',
          })
          if (redisCpu.get(s)!.length > 0)
            rows.push({
              id: `redis/${s.id} redis-cpu@${inFlight}`,
              subject: s.name,
              metric: `redis-server CPU per decision @${inFlight}`,
              value: median(redisCpu.get(s)!),
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
