// `npm run bench -- --check`: measures every budget of bench/budgets/check.ts over the build (packages/sluice/dist/),
// prints each next to its limit, and sets a failing exit code when one is missed. Heap bytes and
// promise counts come from child processes (the scripts beside this file), so that nothing else in
// this process allocates or makes promises while they count; the Redis and failover figures from
// redis-server processes started here on free ports.
import { execFile, spawn } from 'node:child_process'
import { rmSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import { resolvePolicy } from '../../packages/sluice/dist/internal.js'
import { redisStore } from '../../packages/sluice/dist/redis.js'
import type { Step } from '../../packages/sluice/dist/store.js'
import { type RedisServer, startRedis } from '../../test/helpers/redis-harness.js'
import { median } from '../load.js'
import { BUDGETS, budgetTable, exitCodeOf, judge } from './check.js'
import { measureFailover } from './failover.js'

const run = promisify(execFile)
const here = (file: string) => fileURLToPath(new URL(file, import.meta.url))
const root = fileURLToPath(new URL('../..', import.meta.url))
const dist = `${root}packages/sluice/dist`

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
  for (const [algorithm, id] of [
    ['sliding-window-counter', 'memory/swc-consumeSync-bytes'],
    ['gcra', 'memory/gcra-consumeSync-bytes'],
  ] as const) {
    const other = await child<{ sync: number; allowed: boolean }>(
      ['--expose-gc'],
      here('./memory-decision.mjs'),
      [dist, algorithm],
    )
    if (!other.allowed) throw new Error(`a ${algorithm} decision of the measured loop was denied`)
    out.set(id, other.sync)
  }
}

async function memoryKeys(out: Out): Promise<void> {
  const r = await child<{ maxSizeSeen: number; bytesPerHeldKey: number; secondHalfGrowthMB: number }>(
    ['--expose-gc', '--import', 'tsx'],
    fileURLToPath(new URL('../memory-bytes.ts', import.meta.url)),
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

/**
 * Heap bytes per open gRPC call (bench/budgets/grpc-retained.mjs): Sluice's listener less a bare
 * node:http2 handler's, the median of 5 processes each (about one in six reads 100-200 B high, for
 * either server).
 */
async function grpcRetained(out: Out): Promise<void> {
  const held = async (subject: 'sluice' | 'bare') => {
    const runs: number[] = []
    for (let i = 0; i < 5; i++) {
      const r = await child<{ calls: number; bytesPerCall: number }>(
        ['--expose-gc'],
        here('./grpc-retained.mjs'),
        [`${root}packages/sluice-server/dist`, subject],
      )
      runs.push(r.bytesPerCall)
    }
    return median(runs)
  }
  out.set('grpc/open-call-bytes-over-bare', (await held('sluice')) - (await held('bare')))
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

/** Bytes promoted per decision (bench/budgets/redis-promotion.mjs): the scavenges' sum over the decisions. */
async function promoted(out: Out, redis: RedisServer): Promise<void> {
  const { stdout } = await run(
    process.execPath,
    ['--expose-gc', here('./redis-promotion.mjs'), dist, String(redis.port)],
    { cwd: root, timeout: 120_000, maxBuffer: 64 * 2 ** 20 },
  )
  // V8 writes its trace through its own buffer: the JSON line need not come last.
  const answer = stdout.split('\n').find((line) => line.startsWith('{'))
  if (answer === undefined) throw new Error('redis-promotion.mjs printed no answer')
  const r = JSON.parse(answer) as { decisions: number; allowed: boolean }
  if (!r.allowed) throw new Error('a decision of the measured loop was not Redis’s allow')
  let bytes = 0
  let scavenges = 0
  for (const m of stdout.matchAll(/gc=s .*? promoted=(\d+)/g)) {
    bytes += Number(m[1])
    scavenges++
  }
  if (scavenges === 0) throw new Error('no scavenge traced over the measured decisions')
  out.set('redis/promoted-bytes', bytes / r.decisions)
}

/**
 * Redis's own time per sliding-window-log call of cost 1,000,000 (INFO commandstats), flat script
 * and module script alike: the log holds one entry per request, so a big cost costs no more.
 */
async function slidingLogCost(out: Out, redis: RedisServer): Promise<void> {
  const client = new Redis(redis.port, '127.0.0.1')
  try {
    let now = 1_700_000_000_000
    const store = redisStore(client, { prefix: 'budget-log', clock: 'client', now: () => now })
    const log = resolvePolicy('log', { algorithm: 'sliding-window-log', limit: 1_000_000, window: '1h' })
    const other = resolvePolicy('other', { algorithm: 'fixed-window', limit: 10, window: '1h' })
    const pair = (key: string, cost: number): Step[] => [
      { policy: log, key, cost },
      { policy: other, key, cost: 1 },
    ]
    // Scripts loaded first: the first call's NOSCRIPT would count.
    await store.apply([{ policy: log, key: 'warm', cost: 1 }], 'consume')
    await store.apply(pair('warm', 1), 'consume')
    await client.config('RESETSTAT')
    for (let i = 0; i < 10; i++) {
      now += 1
      const [flat] = await store.apply([{ policy: log, key: `f${i}`, cost: 1_000_000 }], 'consume')
      const [layered] = await store.apply(pair(`m${i}`, 1_000_000), 'consume')
      if (!flat!.allowed || !layered!.allowed) throw new Error('a call of cost 1,000,000 was denied')
    }
    const line = (await client.info('commandstats')).split('\n').find((l) => l.startsWith('cmdstat_evalsha:'))
    const calls = Number(/calls=(\d+)/.exec(line ?? '')?.[1])
    const usec = Number(/usec=(\d+)/.exec(line ?? '')?.[1])
    if (calls !== 20) throw new Error(`expected 20 EVALSHA calls, Redis counted ${calls}`)
    out.set('redis/sliding-log-cost-1e6-usec', usec / calls)
  } finally {
    client.disconnect()
  }
}

/** `npm start` from nothing built (no .start/): seconds until the service answers /healthz. */
async function startToHealthz(out: Out): Promise<void> {
  rmSync(`${root}packages/sluice-server/.start`, { recursive: true, force: true })
  const started = performance.now()
  const child = spawn(process.execPath, [`${root}scripts/start.mjs`, '--port', '0'], {
    cwd: root,
    env: { ...process.env, SLUICE_STORE: '', REDIS_URL: '', SLUICE_CONFIG: '', SLUICE_PORT: '' },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  try {
    let printed = ''
    const url = await new Promise<string>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => {
        printed += chunk.toString()
        const found = /sluice serving on (http:\/\/[^ ]+) /.exec(printed)
        if (found?.[1] !== undefined) resolve(found[1])
      })
      child.once('exit', (code) => reject(new Error(`npm start exited with ${code}`)))
      setTimeout(() => reject(new Error('npm start printed no address in 60 s')), 60_000).unref()
    })
    for (;;) {
      const answered = await fetch(`${url}/healthz`).then(
        (response) => response.status === 200,
        () => false,
      )
      if (answered) break
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    out.set('start/healthz-seconds', (performance.now() - started) / 1000)
  } finally {
    child.kill('SIGTERM')
  }
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
  await step('npm start', ['start/healthz-seconds'], () => startToHealthz(out))
  await step(
    'memory store decisions',
    [
      'memory/consumeSync-bytes',
      'memory/consume-bytes',
      'memory/swc-consumeSync-bytes',
      'memory/gcra-consumeSync-bytes',
    ],
    () => memoryDecisions(out),
  )
  await step('memory store, 1,000,000 keys', ['memory/bytes-per-key', 'memory/growth-past-maxKeys'], () =>
    memoryKeys(out),
  )
  await step('HTTP core', ['http/core-bytes'], () => httpCore(out))
  await step('Fastify hook', ['http/fastify-hook-bytes'], () => fastifyHook(out))
  await step('gRPC calls held open', ['grpc/open-call-bytes-over-bare'], () => grpcRetained(out))
  const redisIds = [
    'http/fastify-redis-promises',
    'http/express-redis-promises',
    'redis/decide-promises',
    'redis/promoted-bytes',
    'redis/sliding-log-cost-1e6-usec',
  ]
  let redis: RedisServer | undefined
  await step('Redis: promises, promotion, sliding-window-log cost', redisIds, async () => {
    redis = await startRedis()
    await promises(out, redis)
    await promoted(out, redis)
    await slidingLogCost(out, redis)
  })
  await redis?.stop()
  await step('failover against killed and paused redis-server', [], () => measureFailover(out, notes))

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
