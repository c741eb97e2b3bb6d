// Side by side: Sluice over Redis (exact, hybrid, local deny cache) next to
// every peer on one private redis-server, in one process: rate-limiter-flexible (memory and Redis),
// express-rate-limit's rate-limit-redis store, @fastify/rate-limit's Redis store, a plain Map and
// redis-benchmark EVALSHA of Sluice's own script. Run: npm run bench -- --only scale [--quick]
import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { createRequire } from 'node:module'
import { promisify } from 'node:util'
import v8 from 'node:v8'
import vm from 'node:vm'
import { Redis } from 'ioredis'
import { RedisStore as RateLimitRedisStore } from 'rate-limit-redis'
import { RateLimiterMemory, RateLimiterRedis } from 'rate-limiter-flexible'
// What is measured comes from the build (dist/), as users run it: tsx compiles src/ with esbuild's
// keepNames, which adds a defineProperty to every closure created per decision (about 1 µs per
// decision here) that the published build does not have.
// (The heap-bytes rows use the internal classes from src/: they measure memory, not time.)
import { createLimiter } from '../../packages/sluice/dist/index.js'
import { resolvePolicy } from '../../packages/sluice/dist/internal.js'
import { hybridRedis, redisStore } from '../../packages/sluice/dist/redis.js'
import { type RatePolicy, resolvePolicy as resolveSrcPolicy } from '../../packages/sluice/src/policy.js'
import { LocalDenyCache } from '../../packages/sluice/src/scale/deny-cache.js'
import { HybridPolicy } from '../../packages/sluice/src/scale/hybrid.js'
import { hybridRedis as hybridRedisSrc } from '../../packages/sluice/src/stores/redis/hybrid.js'
import { startRedis } from '../../test/helpers/redis-harness.js'
// The scripts of main 0a55701 (their wire format): bench/lua-cost.ts measures today's next to them.
import { luaSources0a55701 as luaSources } from '../data/lua-0a55701.js'
import { type Decide, type Throughput, throughput } from '../throughput.js'
import type { BenchCase, BenchRow } from '../types.js'

const run = promisify(execFile)
/**
 * A benchmark measures the store, never the fallback: a timeout long enough that a loaded machine
 * does not trip the breaker into `onStoreError` decisions (which would count as fast decisions).
 */
export const benchFailover = { storeTimeout: 60_000, logger: { warn() {} } } as const
const require = createRequire(import.meta.url)
const KEYS = 10_000
const HYBRID_BENCH_ALGORITHMS = ['fixed-window', 'sliding-window-counter', 'token-bucket', 'gcra'] as const
const subjects = Array.from({ length: KEYS }, (_, i) => `user-${String(i).padStart(5, '0')}`)

/** Script calls the server executed so far (EVALSHA + EVAL), from INFO commandstats. */
async function scriptCalls(client: Redis): Promise<number> {
  const text = await client.info('commandstats')
  let total = 0
  for (const m of text.matchAll(/^cmdstat_(evalsha|eval):calls=(\d+)/gm)) total += Number(m[2])
  return total
}

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
  // The server's clock (''), then one run of one decision: limit, window, capacity, cost.
  args.push('', '1', '1000000', '3600000', '1000000', '1')
  const { stdout } = await run('redis-benchmark', args)
  const line = stdout.trim().split('\n').at(-1)!
  return Number(JSON.parse(`[${line}]`)[1])
}

/** Heap bytes per local entry: 100,000 deny-cache entries and 100,000 hybrid keys holding a lease. */
export async function localEntryBytes(): Promise<BenchRow[]> {
  v8.setFlagsFromString('--expose-gc')
  const gc = vm.runInNewContext('gc') as () => void
  const n = 100_000
  const keys = Array.from({ length: n }, (_, i) => `user-${String(i).padStart(6, '0')}`)
  const heap = () => {
    gc()
    gc()
    return process.memoryUsage().heapUsed
  }
  const policy = resolvePolicy('api', { algorithm: 'fixed-window', limit: 1, window: '1h' })
  const denied = { allowed: false, remaining: 0, resetMs: 3_600_000, retryAfterMs: 3_600_000, blocked: false }
  let before = heap()
  const cache = new LocalDenyCache({ maxKeys: n })
  for (const key of keys) cache.remember({ policy, key, cost: 1 }, denied, Date.now(), cache.epoch)
  const cacheBytes = (heap() - before) / n
  const hybridPolicy = resolvePolicy('api', {
    algorithm: 'fixed-window',
    limit: 10,
    window: '1h',
    mode: 'hybrid',
  })
  // Every key holds a lease, as a hot key does.
  const granted = {
    allowed: true,
    grant: 5,
    remaining: 0,
    retryAfterMs: 0,
    resetMs: 0,
    tag: 0,
    underAdmitted: 0,
    denials: 0,
    endsAtMs: Number.MAX_SAFE_INTEGER,
  }
  const backend = { lease: async () => granted, remove: async () => {}, keyOf: () => '' }
  before = heap()
  const hybrid = new HybridPolicy(hybridPolicy, backend)
  for (const key of keys) {
    hybrid.apply({ policy: hybridPolicy, key, cost: 1 }, 'consume')
    await hybrid.apply({ policy: hybridPolicy, key, cost: 1 }, 'consume')
  }
  const hybridBytes = (heap() - before) / n
  void hybrid.close()
  return [
    {
      subject: 'sluice local deny cache entry',
      metric: 'heap bytes/entry',
      value: cacheBytes,
      unit: 'B',
      note: `${cache.entryCount} entries, key strings excluded`,
    },
    {
      subject: 'sluice hybrid leased key entry',
      metric: 'heap bytes/entry',
      value: hybridBytes,
      unit: 'B',
      note: `${hybrid.size} entries, key strings excluded`,
    },
  ]
}

interface FastifyRedisStore {
  incr(
    key: string,
    cb: (err: Error | null, res: { current: number; ttl: number } | null) => void,
    timeWindow: number,
    max: number,
  ): void
}

export const benchCase: BenchCase = {
  name: 'scale',
  extra: true,
  async run({ quick }) {
    const server = await startRedis()
    const client = new Redis(server.port, '127.0.0.1')
    const admin = new Redis(server.port, '127.0.0.1')
    const rows: BenchRow[] = await localEntryBytes()
    const ms = quick ? 500 : 2500
    const high = { limit: 100_000_000, window: '1h' } as const
    try {
      const exact = createLimiter({
        ...benchFailover,
        store: redisStore(client, { prefix: 'bx' }),
        policies: { api: { algorithm: 'token-bucket', ...high } },
      })
      const denyLimiter = createLimiter({
        ...benchFailover,
        store: redisStore(client, { prefix: 'bd' }),
        policies: { api: { algorithm: 'fixed-window', limit: 1, window: '1h' } },
      })
      const rlfRedis = new RateLimiterRedis({
        storeClient: client,
        points: 1e9,
        duration: 3600,
        keyPrefix: 'rlf',
      })
      const rlfMemory = new RateLimiterMemory({ points: 1e9, duration: 3600 })
      const erl = new RateLimitRedisStore({
        sendCommand: (command: string, ...args: string[]) => client.call(command, ...args) as never,
        prefix: 'erl:',
      })
      erl.init({ windowMs: 3_600_000 } as never)
      const FastifyStore = require('@fastify/rate-limit/store/RedisStore.js') as new (
        continueExceeding: boolean,
        exponentialBackoff: boolean,
        redis: Redis,
        key: string,
      ) => FastifyRedisStore
      const fastifyStore = new FastifyStore(false, false, client, 'frl-')
      const fastifyIncr = (key: string) =>
        new Promise((resolve, reject) =>
          fastifyStore.incr(key, (err, res) => (err ? reject(err) : resolve(res)), 3_600_000, 1e9),
        )
      const map = new Map<string, number>()
      const plainMap = (key: string) => {
        const n = (map.get(key) ?? 0) + 1
        map.set(key, n)
        return n <= 1e9
      }

      // Rounds per subject, best kept: a loaded machine steals whole rounds, not fractions of them.
      const rounds = quick ? 1 : 3
      const best = async (decide: Decide, inFlight: number) => {
        let top: Throughput | undefined
        for (let i = 0; i < rounds; i++) {
          const r = await throughput(decide, inFlight, ms, subjects)
          if (top === undefined || r.rate > top.rate) top = r
        }
        return top!
      }
      const measure = async (
        subject: string,
        decide: Decide,
        inFlight: number,
        ref?: Throughput,
        note?: string,
      ) => {
        const r = await best(decide, inFlight)
        const row: BenchRow = { subject, metric: `decisions/s @${inFlight}`, value: r.rate, unit: '/s' }
        if (ref !== undefined) row.ratio = r.rate / ref.rate
        if (note !== undefined) row.note = note
        rows.push(
          row,
          { subject, metric: `p50 @${inFlight}`, value: r.p50, unit: 'ms' },
          { subject, metric: `p99 @${inFlight}`, value: r.p99, unit: 'ms' },
        )
        return r
      }

      // The comparison, interleaved: each Redis-backed subject once per round at 64 in
      // flight, its ratio to rate-limiter-flexible in the same round, the median over rounds. The
      // best-of rows below measure each subject alone, which this machine's drift can skew 2x.
      const contenders: [string, Decide][] = [
        ['rate-limiter-flexible RateLimiterRedis', (k) => rlfRedis.consume(k)],
        ['sluice redis token-bucket consume', (k) => exact.consume('api', k)],
        ['express-rate-limit + rate-limit-redis (store.increment)', (k) => erl.increment(k)],
        ['@fastify/rate-limit RedisStore.incr', fastifyIncr],
      ]
      const interleaved = quick ? 3 : 5
      const ratios = new Map<string, number[]>()
      for (let round = 0; round < interleaved; round++) {
        let reference = 0
        for (const [name, decide] of contenders) {
          const r = await throughput(decide, 64, quick ? 400 : 1000, subjects)
          if (reference === 0) reference = r.rate
          ratios.set(name, [...(ratios.get(name) ?? []), r.rate / reference])
        }
      }
      for (const [name, v] of ratios) {
        const sorted = [...v].sort((a, b) => a - b)
        const median = sorted[Math.floor(sorted.length / 2)]!
        rows.push({
          subject: name,
          metric: 'x RLF Redis @64, interleaved',
          value: median,
          unit: 'x',
          ratio: median,
          note: `median of ${interleaved} rounds (${sorted[0]!.toFixed(2)}-${sorted.at(-1)!.toFixed(2)})`,
        })
      }

      const rlf = await measure('rate-limiter-flexible RateLimiterRedis', (k) => rlfRedis.consume(k), 64)
      rows.at(-3)!.ratio = 1
      rows.at(-3)!.note = 'reference (RLF Redis)'
      // Any decision the fallback made instead of Redis would void the comparison: counted and shown.
      let degradedCount = 0
      const exactRuns: Record<number, Throughput> = {}
      for (const inFlight of [1, 64, 512]) {
        exactRuns[inFlight] = await measure(
          'sluice redis token-bucket consume',
          async (k) => {
            if ((await exact.consume('api', k)).degraded) degradedCount++
          },
          inFlight,
          inFlight === 64 ? rlf : undefined,
          inFlight === 64 ? 'x RLF Redis' : undefined,
        )
      }
      const plain = exactRuns[64]!
      if (degradedCount > 0)
        rows.push({
          subject: 'sluice redis token-bucket consume',
          metric: 'degraded decisions (fallback, not Redis)',
          value: degradedCount,
          unit: '',
          note: 'numbers above are void',
        })
      await measure(
        'express-rate-limit + rate-limit-redis (store.increment)',
        (k) => erl.increment(k),
        64,
        rlf,
        'x RLF Redis',
      )
      await measure('@fastify/rate-limit RedisStore.incr', fastifyIncr, 64, rlf, 'x RLF Redis')
      rows.push(...(await hybridRows(client, server.port, quick)))
      // A denied hot key: one store call to learn the denial, then none.
      await denyLimiter.consume('api', 'hot')
      await denyLimiter.consume('api', 'hot')
      const callsBefore = await scriptCalls(admin)
      const hot = ['hot']
      const denied = await throughput((k) => denyLimiter.consume('api', k), 64, ms, hot)
      const callsDuring = (await scriptCalls(admin)) - callsBefore - 0
      rows.push({
        subject: 'sluice redis, denied hot key (local deny cache)',
        metric: 'decisions/s @64',
        value: denied.rate,
        unit: '/s',
        ratio: denied.rate / plain.rate,
        note: `x sluice plain Redis @64; ${callsDuring} Redis script calls during the run`,
      })

      await measure(
        'rate-limiter-flexible RateLimiterMemory',
        (k) => rlfMemory.consume(k),
        64,
        rlf,
        'x RLF Redis',
      )
      const mapRun = await throughput(plainMap, 1, ms, subjects)
      rows.push({
        subject: 'plain Map counter (inline)',
        metric: 'decisions/s @1',
        value: mapRun.rate,
        unit: '/s',
        ratio: mapRun.rate / rlf.rate,
        note: 'x RLF Redis',
      })

      await admin.script('LOAD', luaSources['apply/token-bucket'])
      const requests = quick ? 50_000 : 300_000
      for (const pipeline of [1, 16]) {
        const rate = await redisBenchmark(server.port, pipeline, requests)
        rows.push({
          subject: `redis-benchmark EVALSHA apply (token-bucket) -c 64 -P ${pipeline}`,
          metric: 'decisions/s @64',
          value: rate,
          unit: '/s',
          ratio: rate / rlf.rate,
          note: 'x RLF Redis; one decision per script call',
        })
      }
      await Promise.all([exact.close(), denyLimiter.close()])
    } finally {
      client.disconnect()
      admin.disconnect()
      await server.stop()
    }
    return rows
  },
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

/**
 * Hybrid mode (leases) against plain Redis mode: decisions/s at 64 in flight on 64 hot keys, per
 * algorithm, in interleaved rounds (goal >= 10x each); under-admission of a 10 s burst against exact
 * Redis in the same scenario (goal <= 5%); and a burst of 3 and 8 instances on a limit of 200 that
 * nothing refills (goal: never above 200).
 */
async function hybridRows(client: Redis, port: number, quick: boolean): Promise<BenchRow[]> {
  const rows: BenchRow[] = []
  const hot = subjects.slice(0, 64)
  const high = { limit: 100_000_000, window: '1h' } as const
  const ms = quick ? 500 : 1500
  const rounds = quick ? 3 : 5
  for (const algorithm of HYBRID_BENCH_ALGORITHMS) {
    const plain = createLimiter({
      ...benchFailover,
      store: redisStore(client, { prefix: `bx-${algorithm}` }),
      policies: { api: { algorithm, ...high } },
    })
    const hybrid = createLimiter({
      hybrid: hybridRedis(client, { prefix: `bh-${algorithm}` }),
      policies: { api: { algorithm, ...high, mode: 'hybrid', syncEvery: '100ms' } },
    })
    const ratios: number[] = []
    const plainRates: number[] = []
    const hybridRates: number[] = []
    for (let round = 0; round < rounds; round++) {
      const p = await throughput((k) => plain.consume('api', k), 64, ms, hot)
      const h = await throughput((k) => hybrid.consume('api', k), 64, ms, hot)
      plainRates.push(p.rate)
      hybridRates.push(h.rate)
      ratios.push(h.rate / p.rate)
    }
    rows.push(
      {
        subject: `sluice redis ${algorithm} consume, 64 hot keys`,
        metric: 'decisions/s @64',
        value: median(plainRates),
        unit: '/s',
      },
      {
        subject: `sluice hybrid ${algorithm} consume, 64 hot keys (syncEvery 100ms)`,
        metric: 'decisions/s @64',
        value: median(hybridRates),
        unit: '/s',
      },
      {
        id: `scale/hybrid-${algorithm} rate-ratio@64`,
        subject: `sluice hybrid ${algorithm} / plain Redis`,
        metric: 'rate ratio @64',
        value: median(ratios),
        unit: 'x',
        note: `median of ${rounds} interleaved rounds (${ratios.map((r) => r.toFixed(1)).join(', ')})`,
      },
    )
    await Promise.all([plain.close(), hybrid.close()])
  }
  rows.push(...(await underAdmission(port, quick ? 2000 : 10_000)))
  for (const instances of [3, 8]) rows.push(...(await burstRows(port, instances, quick ? 1000 : 2000)))
  return rows
}

/** `instances` clients with `lanes` requests each in flight until `stopAt`; admitted per instance. */
async function hammer(
  decide: ((i: number) => Promise<boolean>)[],
  lanes: number,
  stopAt: number,
): Promise<number> {
  const admitted = await Promise.all(
    decide.map(async (one, i) => {
      let n = 0
      const lane = async () => {
        while (Date.now() < stopAt) {
          if (await one(i)) n++
          else await sleep(1)
        }
      }
      await Promise.all(Array.from({ length: lanes }, lane))
      return n
    }),
  )
  return admitted.reduce((a, b) => a + b, 0)
}

/** Policies that refill during the burst: what exact Redis admits grows with time. */
const REFILLING: Record<(typeof HYBRID_BENCH_ALGORITHMS)[number], Omit<RatePolicy, 'mode' | 'syncEvery'>> = {
  'fixed-window': { algorithm: 'fixed-window', limit: 400, window: '2s' },
  'sliding-window-counter': { algorithm: 'sliding-window-counter', limit: 400, window: '2s' },
  'token-bucket': { algorithm: 'token-bucket', limit: 100, window: '1s', burst: 200 },
  gcra: { algorithm: 'gcra', limit: 100, window: '1s', burst: 200 },
}

/**
 * 3 instances (each its own Redis connection) hammer one key of each algorithm for `runMs`, once in
 * hybrid mode and once in exact Redis mode, interleaved per algorithm: how many fewer hybrid admits.
 */
async function underAdmission(port: number, runMs: number): Promise<BenchRow[]> {
  const rows: BenchRow[] = []
  const clients = Array.from({ length: 3 }, () => new Redis(port, '127.0.0.1'))
  try {
    for (const algorithm of HYBRID_BENCH_ALGORITHMS) {
      const base = REFILLING[algorithm]
      const tag = `${algorithm}-${Date.now()}`
      const hybrids = clients.map(
        (c) =>
          new HybridPolicy(
            resolveSrcPolicy('u', { ...base, mode: 'hybrid', syncEvery: '100ms' } as RatePolicy),
            hybridRedisSrc(c, { prefix: `bu-${tag}` }),
          ),
      )
      const exacts = clients.map((c) =>
        createLimiter({
          ...benchFailover,
          store: redisStore(c, { prefix: `bue-${tag}` }),
          policies: { u: base },
        }),
      )
      // Both runs start and end in the middle of a window (windows of 2 s): a request decided a
      // moment after the end (it waited for a lease) then falls in the same window, as in exact mode.
      const edge = () => Math.ceil((Date.now() + 50) / 2000) * 2000 + 1000
      let start = edge()
      await sleep(start - Date.now())
      const hybridAdmitted = await hammer(
        hybrids.map(
          (h) => async () => (await h.apply({ policy: h.policy, key: 'burst', cost: 1 }, 'consume')).allowed,
        ),
        8,
        start + runMs,
      )
      await Promise.all(hybrids.map((h) => h.close()))
      const leased = hybrids.reduce((n, h) => n + h.stats.unitsLeased, 0)
      const returned = hybrids.reduce((n, h) => n + h.stats.unitsReturned, 0)
      const under = hybrids.reduce((n, h) => n + h.stats.unitsUnderAdmitted, 0)
      start = edge()
      await sleep(start - Date.now())
      const exactAdmitted = await hammer(
        exacts.map((l) => async () => (await l.consume('u', 'burst')).allowed),
        8,
        start + runMs,
      )
      await Promise.all(exacts.map((l) => l.close()))
      const missing = Math.max(0, (exactAdmitted - hybridAdmitted) / exactAdmitted)
      rows.push({
        id: `scale/hybrid-${algorithm} under-admission`,
        subject: `sluice hybrid ${algorithm}, 3 instances, ${runMs / 1000} s burst`,
        metric: 'under-admission vs exact',
        value: missing * 100,
        unit: '%',
        note: `hybrid ${hybridAdmitted}, exact ${exactAdmitted}; ${leased} units leased, ${returned} returned, ${under} counted under-admitted`,
      })
    }
  } finally {
    for (const c of clients) c.disconnect()
  }
  return rows
}

/** `instances` instances at once on a limit of 200 nothing refills during the run: admitted. */
async function burstRows(port: number, instances: number, runMs: number): Promise<BenchRow[]> {
  const rows: BenchRow[] = []
  const clients = Array.from({ length: instances }, () => new Redis(port, '127.0.0.1'))
  const fixed: Record<(typeof HYBRID_BENCH_ALGORITHMS)[number], Omit<RatePolicy, 'mode' | 'syncEvery'>> = {
    'fixed-window': { algorithm: 'fixed-window', limit: 200, window: '1d' },
    'sliding-window-counter': { algorithm: 'sliding-window-counter', limit: 200, window: '1d' },
    'token-bucket': { algorithm: 'token-bucket', limit: 1, window: '1d', burst: 200 },
    gcra: { algorithm: 'gcra', limit: 1, window: '1d', burst: 200 },
  }
  try {
    for (const algorithm of HYBRID_BENCH_ALGORITHMS) {
      const prefix = `bb${instances}-${algorithm}-${Date.now()}`
      const hybrids = clients.map(
        (c) =>
          new HybridPolicy(
            resolveSrcPolicy('b', { ...fixed[algorithm], mode: 'hybrid', syncEvery: '100ms' } as RatePolicy),
            hybridRedisSrc(c, { prefix }),
          ),
      )
      const admitted = await hammer(
        hybrids.map(
          (h) => async () => (await h.apply({ policy: h.policy, key: 'burst', cost: 1 }, 'consume')).allowed,
        ),
        8,
        Date.now() + runMs,
      )
      await Promise.all(hybrids.map((h) => h.close()))
      rows.push({
        id: `scale/hybrid-${algorithm} burst-N${instances}`,
        subject: `sluice hybrid ${algorithm}, ${instances} instances at once, limit 200`,
        metric: 'admitted',
        value: admitted,
        unit: 'requests',
        note: `over-admitted ${Math.max(0, admitted - 200)}`,
      })
    }
  } finally {
    for (const c of clients) c.disconnect()
  }
  return rows
}
