// Redis store benchmark: bytes per tracked key (MEMORY USAGE and used_memory delta over 10,000 keys)
// and decisions/s with p50/p99 latency at 1, 64 and 512 in flight, for every algorithm with and
// without coalescing, next to rate-limiter-flexible's RateLimiterRedis (ioredis), a bare ioredis
// EVALSHA of a minimal token-bucket script (also through the store's write coalescing), and redis-benchmark running EVALSHA of Sluice's
// token-bucket script (the server's limit for one decision per call); plus each script's own cost
// inside Redis (INFO commandstats usec_per_call).
// All against one redis-server started here on a free port. Run: npm run bench -- --only redis-detail
// (or directly, after npm run build: node --import tsx bench/cases/redis-detail.ts [--quick]).
import { execFile } from 'node:child_process'
import { createHash, randomUUID } from 'node:crypto'
import { pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import { RateLimiterRedis } from 'rate-limiter-flexible'
// What is measured comes from the build (dist/), as users run it: tsx compiles src/ with esbuild's
// keepNames, which wraps every closure Sluice creates per decision in a defineProperty call (about
// 1 µs per decision on this machine) that the published build does not have.
import { createLimiter } from '../../packages/sluice/dist/index.js'
import { resolvePolicy } from '../../packages/sluice/dist/internal.js'
import { redisStore } from '../../packages/sluice/dist/redis.js'
import type { AlgorithmName, Policy } from '../../packages/sluice/src/policy.js'
import { adaptClient } from '../../packages/sluice/src/stores/redis/client.js'
import { luaSources } from '../../packages/sluice/src/stores/redis/lua.generated.js'
import { startRedis } from '../../test/helpers/redis-harness.js'
// The module scripts of main 0a55701 (gone since): the (module) and batch rows measure them.
import { luaSources0a55701 as old } from '../data/lua-0a55701.js'
import { MINIMAL_TOKEN_BUCKET } from '../reference-scripts.js'
import { throughput } from '../throughput.js'
import type { BenchCase, BenchRow } from '../types.js'

const run = promisify(execFile)
const KEYS = 10_000
const subjects = Array.from({ length: KEYS }, (_, i) => `user-${String(i).padStart(5, '0')}`)

// Limits high enough that the throughput runs measure admitted decisions (the full write path).
const policies: Record<AlgorithmName, Policy> = {
  'fixed-window': { algorithm: 'fixed-window', limit: 1_000_000, window: '1h' },
  'sliding-window-log': { algorithm: 'sliding-window-log', limit: 1_000, window: '1h' },
  'sliding-window-counter': { algorithm: 'sliding-window-counter', limit: 1_000_000, window: '1h' },
  'token-bucket': { algorithm: 'token-bucket', limit: 1_000_000, window: '1h' },
  gcra: { algorithm: 'gcra', limit: 1_000_000, window: '1h' },
  concurrency: { algorithm: 'concurrency', limit: 1_000_000, timeout: '1h' },
}

const sha1 = (text: string) => createHash('sha1').update(text).digest('hex')

interface Subject {
  name: string
  decide(key: string): Promise<unknown>
}

async function info(client: Redis, field: string): Promise<number> {
  const text = await client.info('memory')
  return Number(new RegExp(`^${field}:(\\d+)`, 'm').exec(text)![1])
}

/** Write one decision for each of 10,000 keys; bytes per key by used_memory delta and MEMORY USAGE. */
async function bytesPerKey(
  client: Redis,
  subject: Pick<Subject, 'decide'> | RateLimiterRedis,
  keyOf: (s: string) => string,
) {
  await client.flushall()
  const decide = (key: string) => ('decide' in subject ? subject.decide(key) : subject.consume(key))
  await decide('warm-up')
  await client.del(keyOf('warm-up'))
  const before = await info(client, 'used_memory')
  for (let i = 0; i < KEYS; i += 100) await Promise.all(subjects.slice(i, i + 100).map((s) => decide(s)))
  const after = await info(client, 'used_memory')
  const sample = subjects.filter((_, i) => i % 50 === 0)
  const usages = await Promise.all(sample.map((s) => client.memory('USAGE', keyOf(s))))
  const usage = usages.reduce<number>((a, b) => a + Number(b), 0) / usages.length
  return { delta: (after - before) / KEYS, usage }
}

/** The EVALSHA arguments of one decision per call, with `__rand_int__` keys for redis-benchmark. */
const TB_ARGS = ['consume', '', '0', 'token-bucket', '1000000', '3600000', '1000000', '1', '']
/**
 * One decision of a flat script (scripts/one-prelude.lua): limit, windowMs, capacity (token bucket
 * and GCRA only), cost (a consume), and for concurrency the lease id.
 */
const flatDecision = (algorithm: AlgorithmName) =>
  algorithm === 'token-bucket' || algorithm === 'gcra'
    ? ['1000000', '3600000', '1000000', '1']
    : ['1000000', '3600000', '1', ...(algorithm === 'concurrency' ? [''] : [])]
/**
 * The apply scripts' arguments for one decision per call: the clock ('' = Redis TIME), then a run of
 * one decision (its count, 1, then its arguments).
 */
const flatArgs = (algorithm: AlgorithmName) => ['', '1', ...flatDecision(algorithm)]
const evalArgs: Record<string, { source: string; args: string[] }> = {
  'empty script (return 1)': { source: 'return 1', args: ['0'] },
  'minimal token-bucket script': {
    source: MINIMAL_TOKEN_BUCKET,
    args: ['1', 'rb:{__rand_int__}:min', '1000000', '3600000', '1000000'],
  },
  'sluice one-token-bucket (flat)': {
    source: luaSources['apply/token-bucket'],
    args: ['2', 'rb:{__rand_int__}:tb', 'rb:{__rand_int__}:tb:block', ...flatArgs('token-bucket')],
  },
  'sluice one-gcra (flat)': {
    source: luaSources['apply/gcra'],
    args: ['2', 'rb:{__rand_int__}:g', 'rb:{__rand_int__}:g:block', ...flatArgs('gcra')],
  },
  'sluice apply/token-bucket (module)': {
    source: old['apply/token-bucket'],
    args: ['2', 'rb:{__rand_int__}:tbm', 'rb:{__rand_int__}:tbm:block', ...TB_ARGS],
  },
}
for (const algorithm of [
  'fixed-window',
  'sliding-window-counter',
  'sliding-window-log',
  'concurrency',
] as const) {
  evalArgs[`sluice apply/${algorithm} (module)`] = {
    source: old[`apply/${algorithm}`],
    args: [
      '2',
      `rb:{__rand_int__}:${algorithm}`,
      `rb:{__rand_int__}:${algorithm}:block`,
      ...TB_ARGS.map((a) => (a === 'token-bucket' ? algorithm : a)),
    ],
  }
  // Its flat twin, same decision (concurrency adds the lease id).
  evalArgs[`sluice one-${algorithm} (flat)`] = {
    source: luaSources[`apply/${algorithm}`],
    args: [
      '2',
      `rb:{__rand_int__}:f-${algorithm}`,
      `rb:{__rand_int__}:f-${algorithm}:block`,
      ...flatArgs(algorithm),
    ],
  }
}
/** One batch call carrying 16 token-bucket decisions on 16 keys (cost per decision = usec / 16). */
const BATCH = 16
evalArgs[`sluice batch/token-bucket, ${BATCH} decisions per call`] = {
  source: old['batch/token-bucket'],
  args: [
    String(BATCH * 2),
    ...Array.from({ length: BATCH }, (_, i) => [`rb:{${i}}:b`, `rb:{${i}}:b:block`]).flat(),
    '',
    '0',
    ...Array.from({ length: BATCH }, () => ['consume', '1', ...TB_ARGS.slice(3)]).flat(),
  ],
}

evalArgs[`sluice one-token-bucket (flat), ${BATCH} decisions per call`] = {
  source: luaSources['apply/token-bucket'],
  args: [
    String(BATCH * 2),
    ...Array.from({ length: BATCH }, (_, i) => [`rb:{${i}}:f`, `rb:{${i}}:f:block`]).flat(),
    '',
    // One run: the decisions share their arguments (the coalescer's calls at 64 in flight).
    String(BATCH),
    ...flatDecision('token-bucket'),
  ],
}

/** redis-benchmark EVALSHA of a script, 64 clients, `pipeline` commands per round trip; calls/s. */
async function redisBenchmark(
  port: number,
  name: string,
  pipeline: number,
  requests: number,
): Promise<number> {
  const { source, args } = evalArgs[name]!
  const cmd = ['-h', '127.0.0.1', '-p', String(port), '-c', '64', '-n', String(requests), '-r', String(KEYS)]
  cmd.push('-P', String(pipeline), '--csv', 'EVALSHA', sha1(source), ...args)
  const { stdout } = await run('redis-benchmark', cmd)
  const line = stdout.trim().split('\n').at(-1)!
  return Number(JSON.parse(`[${line}]`)[1])
}

/** Microseconds per call inside Redis (INFO commandstats) over `requests` EVALSHA by 8 clients. */
async function usecPerCall(client: Redis, port: number, name: string, requests: number): Promise<number> {
  const { source, args } = evalArgs[name]!
  await client.script('LOAD', source)
  await client.config('RESETSTAT')
  const cmd = [
    '-h',
    '127.0.0.1',
    '-p',
    String(port),
    '-c',
    '8',
    '-n',
    String(requests),
    '-r',
    String(KEYS),
    '-q',
  ]
  await run('redis-benchmark', [...cmd, 'EVALSHA', sha1(source), ...args])
  const stats = await client.info('commandstats')
  // A script that errors on these arguments would pass for a cheap one.
  const failed = Number(/cmdstat_evalsha:.*failed_calls=(\d+)/.exec(stats)?.[1] ?? 0)
  if (failed > 0) throw new Error(`${name}: ${failed} of ${requests} EVALSHA calls failed`)
  return Number(/cmdstat_evalsha:calls=\d+,usec=\d+,usec_per_call=([\d.]+)/.exec(stats)![1])
}

export const benchCase: BenchCase = {
  name: 'redis-detail',
  extra: true,
  async run({ quick }) {
    const server = await startRedis()
    const client = new Redis(server.port, '127.0.0.1')
    const rows: BenchRow[] = []
    try {
      const store = redisStore(client)
      // A store timeout far above any latency here: every decision is Redis's (none degraded).
      const limiter = createLimiter({ store, policies, storeTimeout: '60s' })
      const single = createLimiter({
        store: redisStore(client, { coalesce: false }),
        policies,
        storeTimeout: '60s',
      })
      const sluice = (algorithm: AlgorithmName, coalesce: boolean): Subject => {
        const l = coalesce ? limiter : single
        return {
          name: `sluice ${algorithm}${coalesce ? '' : ' (coalesce: false)'}`,
          decide: (key) =>
            algorithm === 'concurrency' ? l.acquire(algorithm, key) : l.consume(algorithm, key),
        }
      }
      const minimalSha = sha1(MINIMAL_TOKEN_BUCKET)
      await client.script('LOAD', MINIMAL_TOKEN_BUCKET)
      const bare: Subject = {
        name: 'ioredis EVALSHA minimal token-bucket script',
        decide: (key) => client.evalsha(minimalSha, 1, `min:{${key}}`, '1000000', '3600000', '1000000'),
      }
      // The same bare EVALSHA through the store's write coalescing (adaptClient is what the store
      // calls): shows how much of Sluice's one-decision speed comes from sharing socket writes.
      const adapter = adaptClient(client)!
      const bareShared: Subject = {
        name: 'ioredis EVALSHA minimal token-bucket script, shared writes',
        decide: (key) =>
          adapter.evalsha(minimalSha, [`min:{${key}}`], ['1000000', '3600000', '1000000'], true),
      }
      const unshared = createLimiter({
        store: redisStore(client, { coalesce: false, coalesceWrites: false }),
        policies,
        storeTimeout: '60s',
      })
      const tokenBucketUnshared: Subject = {
        name: 'sluice token-bucket (coalesce: false, coalesceWrites: false)',
        decide: (key) => unshared.consume('token-bucket', key),
      }
      const rlf = new RateLimiterRedis({
        storeClient: client,
        points: 1_000_000,
        duration: 3600,
        keyPrefix: 'rlflx',
      })
      const reference: Subject = {
        name: 'rate-limiter-flexible RateLimiterRedis',
        decide: (key) => rlf.consume(key),
      }
      const algorithms = Object.keys(policies) as AlgorithmName[]

      // Bytes per key: one decision on each of 10,000 subjects, policy `api` = 100 per hour.
      const rlfBytes = await bytesPerKey(
        client,
        new RateLimiterRedis({ storeClient: client, points: 100, duration: 3600, keyPrefix: 'rlflx' }),
        (s) => `rlflx:${s}`,
      )
      for (const [metric, value] of [
        ['bytes/key (MEMORY USAGE)', rlfBytes.usage],
        ['bytes/key (used_memory delta)', rlfBytes.delta],
      ] as const) {
        rows.push({ subject: reference.name, metric, value, unit: 'B', ratio: 1 })
      }
      for (const algorithm of algorithms) {
        const policy =
          algorithm === 'concurrency'
            ? resolvePolicy('api', { algorithm, limit: 100, timeout: '1h' })
            : resolvePolicy('api', { algorithm, limit: 100, window: '1h' })
        const one: Subject = {
          name: algorithm,
          decide: (key) => store.apply([{ policy, key, cost: 1, leaseId: randomUUID() }], 'consume'),
        }
        const b = await bytesPerKey(client, one, (s) => `sluice:{${s}}:api`)
        for (const [metric, value, ref] of [
          ['bytes/key (MEMORY USAGE)', b.usage, rlfBytes.usage],
          ['bytes/key (used_memory delta)', b.delta, rlfBytes.delta],
        ] as const) {
          rows.push({
            subject: `sluice ${algorithm}`,
            metric,
            value,
            unit: 'B',
            ratio: value / ref,
            note: 'vs RLF',
          })
        }
      }
      await client.flushall()

      // Decisions per second and latency. This machine's speed drifts by 2-3x from one second to
      // the next (shared cores), so every subject runs once per round, rounds interleave, and each
      // ratio is the median of its per-round ratios to the subjects of the same round.
      const ms = quick ? 400 : 1000
      const rounds = quick ? 3 : 5
      const subjectsToRun: Subject[] = [reference, bare, bareShared]
      for (const algorithm of algorithms) {
        for (const coalesce of [true, false]) subjectsToRun.push(sluice(algorithm, coalesce))
      }
      // Write coalescing's own effect: a full run only (--quick stays short).
      if (!quick) subjectsToRun.push(tokenBucketUnshared)
      const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!
      // --quick measures the goals' point (64 in flight) only; a full run adds 1 and 512.
      for (const inFlight of quick ? [64] : [1, 64, 512]) {
        const runs = new Map<
          string,
          {
            rate: number[]
            vsRlf: number[]
            vsBare: number[]
            vsShared: number[]
            p50: number[]
            p99: number[]
          }
        >()
        for (let round = 0; round < rounds; round++) {
          const rates = new Map<Subject, number>()
          for (const subject of subjectsToRun) {
            const r = await throughput(subject.decide, inFlight, ms, subjects)
            await client.flushall()
            rates.set(subject, r.rate)
            const m = runs.get(subject.name) ?? {
              rate: [],
              vsRlf: [],
              vsBare: [],
              vsShared: [],
              p50: [],
              p99: [],
            }
            runs.set(subject.name, m)
            m.rate.push(r.rate)
            m.p50.push(r.p50)
            m.p99.push(r.p99)
          }
          // Ratios to the references of the same round, once all of them have run.
          for (const [subject, rate] of rates) {
            const m = runs.get(subject.name)!
            m.vsRlf.push(rate / rates.get(reference)!)
            m.vsBare.push(rate / rates.get(bare)!)
            m.vsShared.push(rate / rates.get(bareShared)!)
          }
        }
        for (const [name, m] of runs) {
          const spread = `${Math.min(...m.vsRlf).toFixed(2)}-${Math.max(...m.vsRlf).toFixed(2)}`
          rows.push({
            subject: name,
            metric: `decisions/s @${inFlight}`,
            value: median(m.rate),
            unit: '/s',
            ratio: median(m.vsRlf),
            note:
              name === reference.name
                ? `vs RLF; median of ${rounds} rounds`
                : `vs RLF (rounds ${spread}); ${median(m.vsBare).toFixed(2)}x bare EVALSHA; ${median(m.vsShared).toFixed(2)}x bare with shared writes`,
          })
          rows.push({ subject: name, metric: `p50 @${inFlight}`, value: median(m.p50), unit: 'ms' })
          rows.push({ subject: name, metric: `p99 @${inFlight}`, value: median(m.p99), unit: 'ms' })
        }
      }

      // The server's own limit for one decision per call (no Node.js client in the way).
      const requests = quick ? 50_000 : 300_000
      for (const name of ['minimal token-bucket script', 'sluice one-token-bucket (flat)']) {
        await client.script('LOAD', evalArgs[name]!.source)
        for (const pipeline of [1, 16]) {
          const rate = await redisBenchmark(server.port, name, pipeline, requests)
          rows.push({
            subject: `redis-benchmark EVALSHA ${name} -c 64 -P ${pipeline}`,
            metric: 'decisions/s @64',
            value: rate,
            unit: '/s',
          })
        }
      }
      await client.flushall()

      // Each script's cost inside Redis, median of 3 interleaved rounds (one round with --quick).
      const calls = quick ? 4_000 : 40_000
      const costs: Record<string, number[]> = {}
      for (let round = 0; round < (quick ? 1 : 3); round++) {
        for (const name of Object.keys(evalArgs)) {
          const cost = await usecPerCall(client, server.port, name, calls)
          costs[name] = [...(costs[name] ?? []), cost]
          await client.flushall()
        }
      }
      const minimal = median(costs['minimal token-bucket script']!)
      for (const [name, v] of Object.entries(costs)) {
        rows.push({
          subject: name,
          metric: 'usec per call in Redis',
          value: median(v),
          unit: 'us',
          ratio: median(v) / minimal,
          note: 'vs minimal script',
        })
      }
    } finally {
      client.disconnect()
      await server.stop()
    }
    return rows
  },
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const rows = await benchCase.run({ quick: process.argv.includes('--quick') })
  for (const r of rows) {
    const ratio =
      r.ratio === undefined ? '' : ` (${r.ratio.toFixed(2)}x${r.note === undefined ? '' : ` ${r.note}`})`
    console.log(`${r.subject} | ${r.metric} | ${Number(r.value.toPrecision(4))} ${r.unit}${ratio}`)
  }
}
