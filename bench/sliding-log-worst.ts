// Sliding window log, worst case per key: bytes per key and Redis script time per call
// as the cost of a request grows, on a private redis-server and in the memory store. A policy of
// limit 1,000,000 (the most sliding-window-log takes) per hour; per cost, `--keys` keys each get one
// admitted request of that cost (flat script, then the module apply script in a layered call), one
// key gets 30 admitted requests at 30 ms, and one key with 1,000 entries is asked for a cost that
// cannot fit (the denied call searches for the entry that must leave). Redis time per call is
// INFO commandstats usec / calls of EVALSHA, reset before each case.
// With --before <commit>, the same cases run on that commit's src/ too (extracted with git archive).
// Run: npm run build && node --expose-gc --import tsx bench/sliding-log-worst.ts [--keys 200]
//      [--memory-keys 10000] [--before <commit>] [--before-keys 5] [--json]
// (--before-keys: keys per case for the earlier commit, in Redis and in memory: a per-unit log of
// cost 1,000,000 is about 10 MB per key.)
import { execFileSync } from 'node:child_process'
import { mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { Redis } from 'ioredis'
import { type ResolvedPolicy, resolvePolicy } from '../packages/sluice/src/policy.js'
import type { Step, Store } from '../packages/sluice/src/store.js'
import { type MemoryStore, memoryStore } from '../packages/sluice/src/stores/memory.js'
import { redisStore } from '../packages/sluice/src/stores/redis/index.js'
import { startRedis } from '../test/helpers/redis-harness.js'

const { values } = parseArgs({
  options: {
    keys: { type: 'string', default: '200' },
    'memory-keys': { type: 'string', default: '10000' },
    before: { type: 'string' },
    'before-keys': { type: 'string', default: '5' },
    json: { type: 'boolean', default: false },
  },
})

const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) {
  console.error('run with node --expose-gc')
  process.exit(2)
}

interface Implementation {
  label: string
  redisStore: (client: Redis, options: object) => Store
  memoryStore: (options: object) => MemoryStore
}

const T0 = 1_700_000_000_000
const LIMIT = 1_000_000
const COSTS = [1, 1000, 1_000_000]
const policy: ResolvedPolicy = resolvePolicy('log', {
  algorithm: 'sliding-window-log',
  limit: LIMIT,
  window: '1h',
})
const pad: ResolvedPolicy = resolvePolicy('pad', {
  algorithm: 'fixed-window',
  limit: 1_000_000,
  window: '1h',
})

function heap(): number {
  gc!()
  gc!()
  return process.memoryUsage().heapUsed
}

async function evalshaStats(client: Redis): Promise<{ calls: number; usecPerCall: number }> {
  const info = await client.info('commandstats')
  const line = info.split('\n').find((l) => l.startsWith('cmdstat_evalsha:'))
  if (line === undefined) return { calls: 0, usecPerCall: 0 }
  const calls = Number(/calls=(\d+)/.exec(line)![1])
  return { calls, usecPerCall: Number(/usec=(\d+)/.exec(line)![1]) / calls }
}

interface Row {
  implementation: string
  cost: number
  flatUsecPerCall: number
  moduleUsecPerCall: number
  /** MEMORY USAGE of a key after one request of `cost`. */
  redisBytesOneRequest: number
  /** LLEN after 30 requests of `cost` (at most limit / 30 each) at 30 distinct ms. */
  redisLlen30: number
  redisBytes30: number
  /** A denied call of `cost` on a key holding 1,000 entries (1,000 requests of cost 1). */
  deniedUsecPerCall: number
  /** MEMORY USAGE of that key of 1,000 requests (plus one filling it), per request. */
  redisBytesPerRequest: number
  /** Memory store: heap bytes per key after one request of `cost` (key strings included). */
  memoryBytesPerKey: number
  /** Memory store: heap bytes per request of 100 keys x 1,000 requests of cost 1 at distinct ms. */
  memoryBytesPerRequest: number
}

async function measure(
  impl: Implementation,
  client: Redis,
  keys: number,
  memoryKeys: number,
  prefix: string,
): Promise<Row[]> {
  const rows: Row[] = []
  const perRequest = impl.memoryStore({ now: () => clock, maxKeys: 1000 })
  let clock = T0
  for (let i = 0; i < 100; i++) perRequest.apply([{ policy, key: `warm-${i}`, cost: 1 }], 'consume')
  const start = heap()
  for (let r = 0; r < 1000; r++) {
    clock++
    for (let i = 0; i < 100; i++) perRequest.apply([{ policy, key: `many-${i}`, cost: 1 }], 'consume')
  }
  const memoryBytesPerRequest = Math.round(((heap() - start) / 100_000) * 10) / 10
  await perRequest.close()
  for (const cost of COSTS) {
    let now = T0
    const store = impl.redisStore(client, { prefix: `${prefix}-${cost}`, clock: 'client', now: () => now })
    const step = (key: string, c = cost, p = policy): Step => ({ policy: p, key, cost: c })
    // Load the scripts outside the measured calls.
    await store.apply([step('warm', 1)], 'consume')
    await store.apply([step('warm', 1), step('warm', 1, pad)], 'consume')

    await client.config('RESETSTAT')
    for (let i = 0; i < keys; i++) await store.apply([step(`f${i}`)], 'consume')
    const flat = await evalshaStats(client)
    await client.config('RESETSTAT')
    for (let i = 0; i < keys; i++) await store.apply([step(`m${i}`), step(`m${i}`, 1, pad)], 'consume')
    const module = await evalshaStats(client)
    const redisBytesOneRequest = Number(await client.call('MEMORY', 'USAGE', `${prefix}-${cost}:{f0}:log`))

    const share = Math.min(cost, Math.floor(LIMIT / 30))
    for (let i = 0; i < 30; i++) {
      now += 1
      await store.apply([step('thirty', share)], 'consume')
    }
    const redisLlen30 = await client.llen(`${prefix}-${cost}:{thirty}:log`)
    const redisBytes30 = Number(await client.call('MEMORY', 'USAGE', `${prefix}-${cost}:{thirty}:log`))

    for (let i = 0; i < 1000; i++) {
      now += 1
      await store.apply([step('full', 1)], 'consume')
    }
    // Cost 1 fits here (1,000 of 1,000,000 used): fill the rest at one ms so that it cannot.
    now += 1
    await store.apply([step('full', LIMIT - 1000)], 'consume')
    await client.config('RESETSTAT')
    for (let i = 0; i < 20; i++) await store.apply([step('full')], 'consume')
    const denied = await evalshaStats(client)
    const redisBytesPerRequest =
      Number(await client.call('MEMORY', 'USAGE', `${prefix}-${cost}:{full}:log`)) / 1001
    await client.del(`${prefix}-${cost}:{full}:log`, `${prefix}-${cost}:{thirty}:log`)
    for (let i = 0; i < keys; i++)
      await client.del(
        `${prefix}-${cost}:{f${i}}:log`,
        `${prefix}-${cost}:{m${i}}:log`,
        `${prefix}-${cost}:{m${i}}:pad`,
      )

    const memory = impl.memoryStore({ now: () => T0, maxKeys: memoryKeys * 4 })
    const names = Array.from({ length: memoryKeys }, (_, i) => `user-${String(i).padStart(6, '0')}`)
    // Warm the path on other keys first, so the measurement sees only what the states hold.
    for (let i = 0; i < 100; i++) memory.apply([step(`warm-${i}`, 1)], 'consume')
    const before = heap()
    for (const name of names) memory.apply([step(name)], 'consume')
    const memoryBytesPerKey = Math.round((heap() - before) / memoryKeys)
    await memory.close()

    rows.push({
      implementation: impl.label,
      cost,
      flatUsecPerCall: Math.round(flat.usecPerCall * 10) / 10,
      moduleUsecPerCall: Math.round(module.usecPerCall * 10) / 10,
      redisBytesOneRequest,
      redisLlen30,
      redisBytes30,
      deniedUsecPerCall: Math.round(denied.usecPerCall * 10) / 10,
      redisBytesPerRequest: Math.round(redisBytesPerRequest * 10) / 10,
      memoryBytesPerKey,
      memoryBytesPerRequest,
    })
  }
  return rows
}

const implementations: [Implementation, number, number][] = [
  [
    { label: 'this tree', redisStore, memoryStore } as unknown as Implementation,
    Number(values.keys),
    Number(values['memory-keys']),
  ],
]
if (values.before !== undefined) {
  const root = fileURLToPath(new URL('..', import.meta.url))
  const dir = join(root, 'node_modules/.cache/sluice-log-before')
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(dir, { recursive: true })
  execFileSync('sh', ['-c', `git -C "${root}" archive ${values.before} src | tar -x -C "${dir}"`])
  const redis = await import(pathToFileURL(join(dir, 'src/stores/redis/index.ts')).href)
  const memory = await import(pathToFileURL(join(dir, 'src/stores/memory.ts')).href)
  implementations.unshift([
    { label: values.before, redisStore: redis.redisStore, memoryStore: memory.memoryStore },
    Number(values['before-keys']),
    Number(values['before-keys']),
  ])
}

const server = await startRedis()
const client = new Redis(server.port, '127.0.0.1')
const rows: Row[] = []
try {
  for (const [i, [impl, keys, memoryKeys]] of implementations.entries())
    rows.push(...(await measure(impl, client, keys, memoryKeys, `w${i}`)))
} finally {
  client.disconnect()
  await server.stop()
}
if (values.json) console.log(JSON.stringify(rows, null, 2))
else console.table(rows)
