// Redis store benchmark: bytes per tracked key (MEMORY USAGE and used_memory delta over 10,000 keys)
// and decisions/s with p50/p99 latency at 1 and 64 in flight, for every algorithm, next to
// rate-limiter-flexible's RateLimiterRedis (ioredis) and to redis-benchmark running EVALSHA of
// Sluice's own apply script with a token-bucket step (the server's limit for that script).
// All against one redis-server started here on a free port. Run: npm run bench -- --only redis
// (or directly: node --import tsx bench/cases/redis.ts [--quick]).
import { execFile } from 'node:child_process'
import { createHash, randomUUID } from 'node:crypto'
import { pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import { RateLimiterRedis } from 'rate-limiter-flexible'
import { createLimiter } from '../../src/limiter.js'
import { type AlgorithmName, type Policy, resolvePolicy } from '../../src/policy.js'
import { redisStore } from '../../src/stores/redis/index.js'
import { luaSources } from '../../src/stores/redis/lua.generated.js'
import { startRedis } from '../../test/helpers/redis-harness.js'
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

/** Keep `inFlight` decisions outstanding for `ms`; decisions/s and latency percentiles. */
async function throughput(subject: Subject, inFlight: number, ms: number) {
  const lane = async (until: number, latencies: number[] | undefined) => {
    let i = Math.floor(Math.random() * KEYS)
    while (performance.now() < until) {
      const t = performance.now()
      await subject.decide(subjects[i++ % KEYS]!)
      latencies?.push(performance.now() - t)
    }
  }
  const warm = performance.now() + Math.min(300, ms / 4)
  await Promise.all(Array.from({ length: inFlight }, () => lane(warm, undefined)))
  const latencies: number[] = []
  const start = performance.now()
  await Promise.all(Array.from({ length: inFlight }, () => lane(start + ms, latencies)))
  const elapsed = performance.now() - start
  latencies.sort((a, b) => a - b)
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))]!
  return { rate: (latencies.length / elapsed) * 1000, p50: pct(0.5), p99: pct(0.99) }
}

/** redis-benchmark EVALSHA of the token-bucket apply script (what the store sends), 64 clients. */
async function redisBenchmark(port: number, pipeline: number, requests: number): Promise<number> {
  const sha = createHash('sha1').update(luaSources['apply/token-bucket']).digest('hex')
  const args = ['-h', '127.0.0.1', '-p', String(port), '-c', '64', '-n', String(requests), '-r', String(KEYS)]
  args.push(
    '-P',
    String(pipeline),
    '--csv',
    'EVALSHA',
    sha,
    '2',
    'rb:{__rand_int__}:tb',
    'rb:{__rand_int__}:tb:block',
  )
  args.push('consume', '', '0', 'token-bucket', '1000000', '3600000', '1000000', '1', '')
  const { stdout } = await run('redis-benchmark', args)
  const line = stdout.trim().split('\n').at(-1)!
  return Number(JSON.parse(`[${line}]`)[1])
}

export const benchCase: BenchCase = {
  name: 'redis',
  async run({ quick }) {
    const server = await startRedis()
    const client = new Redis(server.port, '127.0.0.1')
    const rows: BenchRow[] = []
    try {
      const store = redisStore(client)
      const limiter = createLimiter({ store, policies })
      const sluice = (algorithm: AlgorithmName): Subject => ({
        name: `sluice ${algorithm}`,
        decide: (key) =>
          algorithm === 'concurrency' ? limiter.acquire(algorithm, key) : limiter.consume(algorithm, key),
      })
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

      // Decisions per second and latency.
      const ms = quick ? 500 : 2500
      for (const inFlight of [1, 64]) {
        const ref = await throughput(reference, inFlight, ms)
        rows.push({
          subject: reference.name,
          metric: `decisions/s @${inFlight}`,
          value: ref.rate,
          unit: '/s',
          ratio: 1,
        })
        rows.push({ subject: reference.name, metric: `p50 @${inFlight}`, value: ref.p50, unit: 'ms' })
        rows.push({ subject: reference.name, metric: `p99 @${inFlight}`, value: ref.p99, unit: 'ms' })
        for (const algorithm of algorithms) {
          const r = await throughput(sluice(algorithm), inFlight, ms)
          const name = `sluice ${algorithm}`
          rows.push({
            subject: name,
            metric: `decisions/s @${inFlight}`,
            value: r.rate,
            unit: '/s',
            ratio: r.rate / ref.rate,
            note: 'vs RLF',
          })
          rows.push({ subject: name, metric: `p50 @${inFlight}`, value: r.p50, unit: 'ms' })
          rows.push({ subject: name, metric: `p99 @${inFlight}`, value: r.p99, unit: 'ms' })
          await client.flushall()
        }
      }

      // The server's own limit for Sluice's script (no Node.js client in the way).
      await client.script('LOAD', luaSources['apply/token-bucket'])
      const requests = quick ? 50_000 : 300_000
      for (const pipeline of [1, 16]) {
        const rate = await redisBenchmark(server.port, pipeline, requests)
        rows.push({
          subject: `redis-benchmark EVALSHA apply (token-bucket) -c 64 -P ${pipeline}`,
          metric: 'decisions/s @64',
          value: rate,
          unit: '/s',
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
