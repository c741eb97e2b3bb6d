// Before/after for the Redis store, in one run on one private redis-server, interleaved rounds:
// the store at an earlier commit (its whole src/ extracted with `git archive`) against this tree's
// store with and without coalescing, and rate-limiter-flexible's RateLimiterRedis for scale. Prints
// medians and ratios. Run: node --import tsx bench/redis-before-after.ts [--before <commit>]
// [--ms 1000] [--rounds 2] [--algorithms token-bucket,gcra,fixed-window]
import { execFileSync } from 'node:child_process'
import { mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { Redis } from 'ioredis'
import { RateLimiterRedis } from 'rate-limiter-flexible'
import { createLimiter, type Limiter } from '../packages/sluice/src/limiter.js'
import { type AlgorithmName, resolvePolicy } from '../packages/sluice/src/policy.js'
import type { Store } from '../packages/sluice/src/store.js'
import { redisStore } from '../packages/sluice/src/stores/redis/index.js'
import { startRedis } from '../test/helpers/redis-harness.js'

const { values } = parseArgs({
  options: {
    before: { type: 'string', default: '78e1522' },
    ms: { type: 'string', default: '1000' },
    rounds: { type: 'string', default: '2' },
    algorithms: { type: 'string', default: 'token-bucket,gcra,fixed-window' },
  },
})
const root = fileURLToPath(new URL('..', import.meta.url))
const dir = join(root, 'node_modules/.cache/sluice-before')
rmSync(dir, { recursive: true, force: true })
mkdirSync(dir, { recursive: true })
execFileSync('sh', ['-c', `git -C "${root}" archive ${values.before} src | tar -x -C "${dir}"`])
const old = (await import(pathToFileURL(join(dir, 'src/stores/redis/index.ts')).href)) as {
  redisStore: (client: Redis) => Store
}

const KEYS = 10_000
const subjects = Array.from({ length: KEYS }, (_, i) => `user-${String(i).padStart(5, '0')}`)
const ms = Number(values.ms)
const algorithms = values.algorithms.split(',') as AlgorithmName[]

async function rate(decide: (key: string) => Promise<unknown>, inFlight: number): Promise<number> {
  const lane = async (until: number) => {
    let i = Math.floor(Math.random() * KEYS)
    let n = 0
    while (performance.now() < until) {
      await decide(subjects[i++ % KEYS]!)
      n++
    }
    return n
  }
  await Promise.all(Array.from({ length: inFlight }, () => lane(performance.now() + 200)))
  const start = performance.now()
  const counts = await Promise.all(Array.from({ length: inFlight }, () => lane(start + ms)))
  return (counts.reduce((a, b) => a + b, 0) / (performance.now() - start)) * 1000
}

const server = await startRedis()
const client = new Redis(server.port, '127.0.0.1')
try {
  const policies = Object.fromEntries(
    algorithms.map((a) => [a, { algorithm: a, limit: 1_000_000, window: '1h' }]),
  ) as Record<string, { algorithm: Exclude<AlgorithmName, 'concurrency'>; limit: number; window: string }>
  // storeTimeout far above any latency here: every decision is Redis's, none degraded.
  const limiter = (store: Store): Limiter => createLimiter({ store, policies, storeTimeout: '60s' })
  const subjectsUnderTest: [string, Limiter][] = [
    [`before (${values.before})`, limiter(old.redisStore(client))],
    ['after, coalesce: false', limiter(redisStore(client, { coalesce: false }))],
    ['after, coalesce: true', limiter(redisStore(client))],
  ]
  const rlf = new RateLimiterRedis({
    storeClient: client,
    points: 1_000_000,
    duration: 3600,
    keyPrefix: 'rlflx',
  })
  const results = new Map<string, number[]>()
  const add = (key: string, v: number) => results.set(key, [...(results.get(key) ?? []), v])
  for (let round = 0; round < Number(values.rounds); round++) {
    for (const inFlight of [1, 64, 512]) {
      add(`RateLimiterRedis @${inFlight}`, await rate((k) => rlf.consume(k), inFlight))
      for (const algorithm of algorithms) {
        for (const [name, l] of subjectsUnderTest) {
          const decide = async (key: string) => {
            const d = await l.consume(algorithm, key)
            if (d.degraded) throw new Error(`${name}: a decision was degraded`)
          }
          add(`${algorithm} ${name} @${inFlight}`, await rate(decide, inFlight))
          await client.flushall()
        }
      }
    }
  }
  const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!
  console.log('| subject | in flight | decisions/s (median) | vs RateLimiterRedis | vs before |')
  console.log('| --- | --- | --- | --- | --- |')
  for (const [key, v] of results) {
    const [label, at] = key.split(' @') as [string, string]
    const ref = median(results.get(`RateLimiterRedis @${at}`)!)
    const algorithm = label.split(' ')[0]
    const before = results.get(`${algorithm} before (${values.before}) @${at}`)
    const vsBefore =
      before === undefined || label.startsWith('RateLimiter')
        ? ''
        : `${(median(v) / median(before)).toFixed(2)}x`
    console.log(
      `| ${label} | ${at} | ${Math.round(median(v))} | ${(median(v) / ref).toFixed(2)}x | ${vsBefore} |`,
    )
  }
  // Bytes per token-bucket key (100 per hour), before and after.
  const policy = resolvePolicy('api', { algorithm: 'token-bucket', limit: 100, window: '1h' })
  for (const [name, store] of [
    ['before', old.redisStore(client)],
    ['after', redisStore(client)],
  ] as const) {
    await client.flushall()
    for (const s of subjects.slice(0, 200)) await store.apply([{ policy, key: s, cost: 1 }], 'consume')
    const usage = await Promise.all(
      subjects.slice(0, 200).map((s) => client.memory('USAGE', `sluice:{${s}}:api`)),
    )
    console.log(
      `token-bucket 100/h, MEMORY USAGE per key, ${name}: ${usage.reduce<number>((a, b) => a + Number(b), 0) / 200} B`,
    )
  }
} finally {
  client.disconnect()
  await server.stop()
  rmSync(dir, { recursive: true, force: true })
}
