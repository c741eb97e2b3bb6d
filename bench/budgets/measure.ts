// `npm run bench -- --check`: measures every budget of bench/budgets/check.ts over the build (dist/),
// prints each next to its limit, and sets a failing exit code when one is missed. Heap bytes and
// promise counts come from child processes (the scripts beside this file), so that nothing else in
// this process allocates or makes promises while they count; Redis is a redis-server started here on
// a free port.
import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { type RedisServer, startRedis } from '../../test/helpers/redis-harness.js'
import { BUDGETS, budgetTable, exitCodeOf, judge } from './check.js'

const run = promisify(execFile)
const here = (file: string) => fileURLToPath(new URL(file, import.meta.url))
const root = fileURLToPath(new URL('../..', import.meta.url))
const dist = `${root}dist`

/** Run a node script, with node flags, that prints one JSON line. */
async function child<T>(flags: string[], script: string, args: string[]): Promise<T> {
  const { stdout } = await run(process.execPath, [...flags, script, ...args], {
    cwd: root,
    timeout: 120_000,
    maxBuffer: 16 * 2 ** 20,
  })
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as T
}

type Out = Map<string, number>
type Notes = Map<string, string>

async function memoryDecisions(out: Out): Promise<void> {
  const r = await child<{ sync: number; awaited: number; allowed: boolean }>(
    ['--expose-gc'],
    here('./memory-decision.mjs'),
    [dist],
  )
  if (!r.allowed) throw new Error('a decision of the measured loop was denied')
  out.set('memory/consumeSync-bytes', r.sync)
  out.set('memory/consume-bytes', r.awaited)
}

async function memoryKeys(out: Out): Promise<void> {
  const r = await child<{ maxSizeSeen: number; bytesPerHeldKey: number; secondHalfGrowthMB: number }>(
    ['--expose-gc', '--import', 'tsx'],
    here('../memory-bytes.ts'),
    ['--keys', '1000000', '--max-keys', '100000', '--json'],
  )
  if (r.maxSizeSeen > 100_000) throw new Error(`the store held ${r.maxSizeSeen} keys, above maxKeys`)
  out.set('memory/bytes-per-key', r.bytesPerHeldKey)
  out.set('memory/growth-past-maxKeys', r.secondHalfGrowthMB)
}

async function httpCore(out: Out): Promise<void> {
  const r = await child<{ bytes: number; action: string }>(['--expose-gc'], here('./http-core.mjs'), [dist])
  if (r.action !== 'continue') throw new Error(`the HTTP core answered ${r.action}`)
  out.set('http/core-bytes', r.bytes)
}

async function fastifyHook(out: Out): Promise<void> {
  const r = await child<{ bytes: number; headers: string[] }>(
    ['--no-turbo-inlining'],
    here('./adapter-allocations.mjs'),
    ['fastify', dist],
  )
  if (r.headers.length !== 5) throw new Error(`the hook sent ${r.headers.length} rate-limit headers, not 5`)
  out.set('http/fastify-hook-bytes', r.bytes)
}

async function promises(out: Out, redis: RedisServer): Promise<void> {
  let decide = 0
  for (const framework of ['fastify', 'express'] as const) {
    const r = await child<{ httpSide: number; decide: number }>([], here('./adapter-promises.mjs'), [
      framework,
      dist,
      String(redis.port),
    ])
    out.set(`http/${framework}-redis-promises`, r.httpSide)
    decide = Math.max(decide, r.decide)
  }
  out.set('redis/decide-promises', decide)
}

/** Measure every budget, print the table, and return the exit code (1 when one is missed). */
export async function checkBudgets(): Promise<number> {
  const began = performance.now()
  const out: Out = new Map()
  const notes: Notes = new Map()
  const step = async (name: string, ids: string[], measure: () => Promise<void>) => {
    const started = performance.now()
    process.stderr.write(`measuring ${name}... `)
    try {
      await measure()
    } catch (error) {
      for (const id of ids) if (!out.has(id)) notes.set(id, `not measured: ${(error as Error).message}`)
    }
    process.stderr.write(`${((performance.now() - started) / 1000).toFixed(1)} s\n`)
  }
  await step('memory store decisions', ['memory/consumeSync-bytes', 'memory/consume-bytes'], () =>
    memoryDecisions(out),
  )
  await step('memory store, 1,000,000 keys', ['memory/bytes-per-key', 'memory/growth-past-maxKeys'], () =>
    memoryKeys(out),
  )
  await step('HTTP core', ['http/core-bytes'], () => httpCore(out))
  await step('Fastify hook', ['http/fastify-hook-bytes'], () => fastifyHook(out))
  const redisIds = ['http/fastify-redis-promises', 'http/express-redis-promises', 'redis/decide-promises']
  let redis: RedisServer | undefined
  await step('Redis: promises', redisIds, async () => {
    redis = await startRedis()
    await promises(out, redis)
  })
  await redis?.stop()

  const judged = judge(BUDGETS, out, notes)
  for (const line of budgetTable(judged)) console.log(line)
  const missed = judged.filter((j) => !j.met).length
  const seconds = Math.round((performance.now() - began) / 1000)
  console.log(
    `\n${missed === 0 ? 'every budget met' : `${missed} of ${judged.length} budgets missed`}; ` +
      `node ${process.version}, ${process.platform}/${process.arch}, ${new Date().toISOString()}, ${seconds} s`,
  )
  return exitCodeOf(judged)
}
