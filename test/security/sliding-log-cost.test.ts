// One request must cost bytes, not megabytes: the sliding window log stores one (time, units) entry
// per admitted request, never one per unit, so its bytes and its script time follow the number of
// requests, not their cost (30 requests of cost 1,000,000 would otherwise grow a service by hundreds
// of MB and hold Redis for tens of ms each). Attacked here on the pure transition, the memory store,
// a private real redis-server (LLEN, MEMORY USAGE, INFO commandstats) through one-step and layered
// decisions and refunds, and a real `sluice serve`.
import type { ChildProcess } from 'node:child_process'
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import v8 from 'node:v8'
import vm from 'node:vm'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  LOG_TOTAL_MODULUS,
  type SlidingWindowLogState,
  slidingWindowLog,
} from '../../packages/sluice/src/algorithms/sliding-window-log.js'
import { resolvePolicy } from '../../packages/sluice/src/policy.js'
import type { Step, StepResult } from '../../packages/sluice/src/store.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { redisStore } from '../../packages/sluice/src/stores/redis/index.js'
import { type RedisServer, startRedis } from '../helpers/redis-harness.js'
import { freePort, post } from '../helpers/service.js'

// The largest limit a sliding-window-log policy may have (src/policy.ts, MAX_LOG_LIMIT), so a single
// request may cost a million units.
const LIMIT = 1_000_000
const BIG = 1_000_000
const REQUESTS = 30
const T0 = 1_700_000_000_000
const log = resolvePolicy('log', { algorithm: 'sliding-window-log', limit: LIMIT, window: '1h' })

/** Entries a state holds: one per admitted request at most. */
const entriesOf = (state: SlidingWindowLogState | undefined): number => state?.times.length ?? 0

describe('sliding-window-log: state is bounded by requests, not units (pure transition)', () => {
  it('30 admitted requests of cost 33,333 at 30 times keep at most 30 entries and a few hundred bytes', () => {
    let state: SlidingWindowLogState | undefined
    const cost = Math.floor(LIMIT / REQUESTS)
    for (let i = 0; i < REQUESTS; i++) {
      const o = slidingWindowLog.consume(state, log, T0 + i * 7, cost, false)
      expect(o.allowed).toBe(true)
      state = o.state
    }
    expect(entriesOf(state)).toBeLessThanOrEqual(REQUESTS)
    // Serialized size is independent of the state's shape: it was about 9 MB (999,990 numbers).
    expect(v8.serialize(state).length).toBeLessThan(REQUESTS * 32)
    // Still exact: the units left and the wait for one more than is left.
    const next = slidingWindowLog.consume(state, log, T0 + 500, LIMIT - cost * REQUESTS + 1, true)
    expect(next).toMatchObject({ allowed: false, remaining: LIMIT - cost * REQUESTS })
    expect(next.retryAfterMs).toBe(3_600_000 - 500)
  })

  it('one request of cost 1,000,000 is one entry; a denied one adds nothing', () => {
    const first = slidingWindowLog.consume(undefined, log, T0, BIG, false)
    expect(first.allowed).toBe(true)
    expect(entriesOf(first.state)).toBe(1)
    const denied = slidingWindowLog.consume(first.state, log, T0 + 1, BIG, false)
    expect(denied).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 3_600_000 - 1 })
    expect(v8.serialize(first.state).length).toBeLessThan(64)
  })
})

describe('sliding-window-log: the memory store under requests of cost 1,000,000', () => {
  it('30 keys, each spent by one request of cost 1,000,000, grow the heap by well under 4 MB', () => {
    v8.setFlagsFromString('--expose-gc')
    const collect = vm.runInNewContext('gc') as () => void
    const store = memoryStore({ now: () => T0 })
    const step = (key: string, cost: number): Step => ({ policy: log, key, cost })
    // Warm the paths first so the measurement sees only what the states hold.
    for (let i = 0; i < REQUESTS; i++) store.apply([step(`warm-${i}`, 1)], 'consume')
    collect()
    const before = process.memoryUsage().heapUsed
    for (let i = 0; i < REQUESTS; i++) {
      expect(store.apply([step(`big-${i}`, BIG)], 'consume')[0]!.allowed).toBe(true)
    }
    collect()
    const grownMb = (process.memoryUsage().heapUsed - before) / 2 ** 20
    expect(grownMb).toBeLessThan(4)
  })
})

describe('sliding-window-log on a real Redis: bytes and script time do not grow with cost', () => {
  let server: RedisServer
  let client: Redis
  beforeAll(async () => {
    server = await startRedis()
    client = new Redis(server.port, '127.0.0.1', { maxRetriesPerRequest: 2 })
  })
  afterAll(async () => {
    client?.disconnect()
    await server?.stop()
  })

  /** EVALSHA calls since the last CONFIG RESETSTAT (this server serves only this test). */
  async function evalshaCalls(): Promise<number> {
    const info = await client.info('commandstats')
    const line = info.split('\n').find((l) => l.startsWith('cmdstat_evalsha:'))
    return line === undefined ? 0 : Number(/calls=(\d+)/.exec(line)![1])
  }

  const entriesInRedis = async (key: string) => {
    const len = await client.llen(key)
    // The list is [start, time 1, units-so-far 1, time 2, units-so-far 2, ...].
    return len === 0 ? 0 : (len - 1) / 2
  }

  it('30 requests of cost 33,333 on one key: at most 30 entries (LLEN) and under 1 KB (MEMORY USAGE)', async () => {
    let now = T0
    const store = redisStore(client, { prefix: 'sec-log-a', clock: 'client', now: () => now })
    const cost = Math.floor(LIMIT / REQUESTS)
    for (let i = 0; i < REQUESTS; i++) {
      now += 3
      const [r] = await store.apply([{ policy: log, key: 'k', cost }], 'consume')
      expect(r!.allowed).toBe(true)
    }
    expect(await entriesInRedis('sec-log-a:{k}:log')).toBeLessThanOrEqual(REQUESTS)
    expect(Number(await client.call('MEMORY', 'USAGE', 'sec-log-a:{k}:log'))).toBeLessThan(1024)
  })

  // Redis's time per such call (INFO commandstats) is a budget of `npm run bench -- --check`.
  it('a call of cost 1,000,000 writes one entry, flat and module scripts', async () => {
    let now = T0
    const store = redisStore(client, { prefix: 'sec-log-b', clock: 'client', now: () => now })
    const other = resolvePolicy('other', { algorithm: 'fixed-window', limit: 10, window: '1h' })
    // Load the scripts first: SCRIPT LOAD is not an EVALSHA, but the first call's NOSCRIPT is.
    await store.apply([{ policy: log, key: 'warm', cost: 1 }], 'consume')
    await store.apply(
      [
        { policy: log, key: 'warm', cost: 1 },
        { policy: other, key: 'warm', cost: 1 },
      ],
      'consume',
    )
    await client.config('RESETSTAT')
    for (let i = 0; i < 10; i++) {
      now += 1
      // Flat script (one step), then the module apply script (a layered decision of two steps).
      const [flat] = await store.apply([{ policy: log, key: `f${i}`, cost: BIG }], 'consume')
      const [layered] = await store.apply(
        [
          { policy: log, key: `m${i}`, cost: BIG },
          { policy: other, key: `m${i}`, cost: 1 },
        ],
        'consume',
      )
      expect(flat!.allowed && layered!.allowed).toBe(true)
      expect(await entriesInRedis(`sec-log-b:{f${i}}:log`)).toBe(1)
      expect(await entriesInRedis(`sec-log-b:{m${i}}:log`)).toBe(1)
    }
    expect(await evalshaCalls()).toBe(20)
    // The whole log of one such key is a couple of hundred bytes, not one entry per unit (megabytes).
    expect(Number(await client.call('MEMORY', 'USAGE', 'sec-log-b:{f0}:log'))).toBeLessThan(400)
  })

  it('large costs decide exactly as the memory store does (flat, module and refund scripts)', async () => {
    let now = T0
    const clock = () => now
    const flat = redisStore(client, { prefix: 'sec-log-c', clock: 'client', now: clock })
    const module = redisStore(client, { prefix: 'sec-log-d', clock: 'client', now: clock })
    const memory = memoryStore({ now: clock })
    const policy = resolvePolicy('p', { algorithm: 'sliding-window-log', limit: LIMIT, window: 1000 })
    const pad = resolvePolicy('pad', { algorithm: 'fixed-window', limit: 1_000_000, window: '1h' })
    // A fixed sequence of (ms to advance, op, cost): merges at one ms, partial expiry, refunds that
    // split the newest entry, denials that wait for several entries to leave.
    const plan: [number, 'consume' | 'peek' | 'refund', number][] = [
      [0, 'consume', 400_000],
      [0, 'consume', 100_000],
      [10, 'consume', 300_000],
      [5, 'peek', 300_000],
      [5, 'consume', 300_000],
      [20, 'refund', 150_000],
      [0, 'consume', 200_000],
      [300, 'consume', 1],
      [700, 'peek', 1],
      [0, 'consume', 600_000],
      [10, 'consume', 500_000],
      [0, 'refund', 250_000],
      [1, 'consume', BIG],
      [1000, 'consume', BIG],
      [500, 'refund', 2 * BIG],
      [0, 'consume', 999_999],
      [0, 'consume', 2],
    ]
    const results: StepResult[][] = []
    for (const [i, [after, op, cost]] of plan.entries()) {
      now += after
      const step: Step = { policy, key: 'k', cost }
      if (op === 'refund') {
        await Promise.all([flat.refund([step]), module.refund([step]), memory.refund([step])])
        continue
      }
      const expected = await memory.apply([step], op)
      expect(await flat.apply([step], op), `flat, step ${i}`).toEqual(expected)
      const layered = await module.apply([step, { policy: pad, key: 'k', cost: 1 }], op)
      expect(layered[0], `module, step ${i}`).toEqual(expected[0])
      results.push(expected)
    }
    // The plan does reach denials that wait for more than the oldest entry.
    expect(results.some((r) => !r[0]!.allowed && r[0]!.retryAfterMs > 0)).toBe(true)
    expect(await entriesInRedis('sec-log-c:{k}:p')).toBeLessThanOrEqual(plan.length)
  })
  it('random sequences of large costs decide as the memory store (flat and module), with few entries', async () => {
    // Many entries, partly expired, so the scripts' binary searches (first live entry, entry that
    // holds the n-th unit, refund's cut) run; same fake clock on both stores.
    const policy = resolvePolicy('p', { algorithm: 'sliding-window-log', limit: 5000, window: 1000 })
    const pad = resolvePolicy('pad', { algorithm: 'fixed-window', limit: 1_000_000, window: '1h' })
    for (let seed = 1; seed <= 4; seed++) {
      let a = seed
      const rand = () => {
        a = (a * 1103515245 + 12345) % 2 ** 31
        return a / 2 ** 31
      }
      let now = T0
      const clock = () => now
      const flat = redisStore(client, { prefix: `sec-log-r${seed}`, clock: 'client', now: clock })
      const module = redisStore(client, { prefix: `sec-log-m${seed}`, clock: 'client', now: clock })
      const memory = memoryStore({ now: clock })
      let admitted = 0
      for (let i = 0; i < 150; i++) {
        now += rand() < 0.3 ? 0 : Math.floor(rand() * 120)
        const cost = 1 + Math.floor(rand() * (rand() < 0.5 ? 5 : 1500))
        const step: Step = { policy, key: 'k', cost }
        const what = `seed ${seed}, step ${i}, t ${now - T0}, cost ${cost}`
        if (rand() < 0.15) {
          await Promise.all([flat.refund([step]), module.refund([step]), memory.refund([step])])
          continue
        }
        const mode = rand() < 0.2 ? 'peek' : 'consume'
        const expected = await memory.apply([step], mode)
        expect(await flat.apply([step], mode), `flat, ${what}`).toEqual(expected)
        const layered = await module.apply([step, { policy: pad, key: 'k', cost: 1 }], mode)
        expect(layered[0], `module, ${what}`).toEqual(expected[0])
        if (expected[0]!.allowed && mode === 'consume') admitted++
        expect(await entriesInRedis(`sec-log-r${seed}:{k}:p`), what).toBeLessThanOrEqual(admitted)
      }
    }
  })
  it('running totals that wrap at 2^39 count exactly in the flat and the module scripts', async () => {
    // A long-lived key whose totals sit just below 2^39: written as the scripts write it, and the
    // same state handed to the pure transition. Every decision after it must agree.
    const policy = resolvePolicy('p', { algorithm: 'sliding-window-log', limit: 100, window: 1000 })
    const pad = resolvePolicy('pad', { algorithm: 'fixed-window', limit: 1_000_000, window: '1h' })
    const high = LOG_TOTAL_MODULUS - 7
    let now = T0
    let state: SlidingWindowLogState | undefined = { times: [now - 10], ends: [high], start: high - 3 }
    for (const prefix of ['sec-log-wf', 'sec-log-wm']) {
      await client.rpush(`${prefix}:{k}:p`, String(high - 3), String(now - 10), String(high))
      await client.pexpire(`${prefix}:{k}:p`, 60_000)
    }
    const flat = redisStore(client, { prefix: 'sec-log-wf', clock: 'client', now: () => now })
    const module = redisStore(client, { prefix: 'sec-log-wm', clock: 'client', now: () => now })
    for (const [i, [after, cost, refund]] of (
      [
        [0, 5, false],
        [10, 40, false],
        [0, 60, false],
        [5, 2, true],
        [400, 55, false],
        [600, 30, false],
        [1, 20, true],
        [0, 80, false],
        [300, 50, false],
      ] as const
    ).entries()) {
      now += after
      const step: Step = { policy, key: 'k', cost }
      if (refund) {
        await Promise.all([flat.refund([step]), module.refund([step])])
        state = slidingWindowLog.refund(state, policy, now, cost)
        continue
      }
      const o = slidingWindowLog.consume(state, policy, now, cost, false)
      if (o.allowed) state = o.state
      const expected = { allowed: o.allowed, remaining: o.remaining, resetMs: o.resetMs, blocked: false }
      expect(await flat.apply([step], 'consume'), `flat, step ${i}`).toEqual([
        { ...expected, retryAfterMs: o.retryAfterMs },
      ])
      const [layered] = await module.apply([step, { policy: pad, key: 'k', cost: 1 }], 'consume')
      expect(layered, `module, step ${i}`).toEqual({ ...expected, retryAfterMs: o.retryAfterMs })
    }
    // The totals did wrap, and both scripts stored the same list.
    expect(state!.ends.some((t) => t < high)).toBe(true)
    expect(await client.lrange('sec-log-wf:{k}:p', 0, -1)).toEqual(
      await client.lrange('sec-log-wm:{k}:p', 0, -1),
    )
  })
  it('a list that starts with a time (not this layout) reads as no state and is replaced, not misread', async () => {
    // A list of one time per unit is not a log of this layout. The scripts must neither fail on it
    // (a script error is a store failure: `closed` policies would deny everyone) nor count it; the
    // key starts over, as after a reset.
    const now = T0
    const policy = resolvePolicy('p', { algorithm: 'sliding-window-log', limit: 10, window: '1m' })
    const pad = resolvePolicy('pad', { algorithm: 'fixed-window', limit: 100, window: '1m' })
    const oldList = (n: number) => Array.from({ length: n }, (_, i) => String(now - 1000 + i))
    const store = redisStore(client, { prefix: 'sec-log-up', clock: 'client', now: () => now })
    for (const n of [1, 2, 3, 4, 7, 10]) {
      const key = `sec-log-up:{k${n}}:p`
      await client.rpush(key, ...oldList(n))
      const [flat] = await store.apply([{ policy, key: `k${n}`, cost: 2 }], 'consume')
      expect(flat, `flat, ${n} old entries`).toMatchObject({ allowed: true, remaining: 8 })
      expect(await client.lrange(key, 0, -1)).toEqual(['0:60000', String(now), '2'])

      await client.del(key)
      await client.rpush(key, ...oldList(n))
      const [layered] = await store.apply(
        [
          { policy, key: `k${n}`, cost: 3 },
          { policy: pad, key: `k${n}`, cost: 1 },
        ],
        'consume',
      )
      expect(layered, `module, ${n} old entries`).toMatchObject({ allowed: true, remaining: 7 })
      expect(await client.lrange(key, 0, -1)).toEqual(['0:60000', String(now), '3'])

      await client.del(key)
      await client.rpush(key, ...oldList(n))
      await store.refund([{ policy, key: `k${n}`, cost: 1 }])
      expect(await client.exists(key), `refund, ${n} old entries`).toBe(0)
    }
  })
})

describe('sliding-window-log in a real `sluice serve`', () => {
  const CLI = fileURLToPath(new URL('../../packages/sluice-server/dist/cli.js', import.meta.url))
  let dir: string
  let child: ChildProcess | undefined
  afterAll(async () => {
    if (child !== undefined && child.exitCode === null) {
      const exited = new Promise((resolve) => child!.once('exit', resolve))
      child.kill('SIGKILL')
      await exited
    }
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  })

  const rssMb = (pid: number) => {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) / 1024
  }

  it('30 POST /v1/check of cost 1,000,000 on a limit-1,000,000 log do not grow the RSS by a unit per unit', async () => {
    dir = mkdtempSync(join(tmpdir(), 'sluice-sec-log-'))
    const file = join(dir, 'sluice.yaml')
    writeFileSync(file, `policies:\n  big: { algorithm: sliding-window-log, limit: ${LIMIT}, window: 1h }\n`)
    const port = await freePort()
    const proc = spawn(process.execPath, [CLI, 'serve', '--config', file, '--port', String(port)], {
      env: { ...process.env, SLUICE_STORE: '', REDIS_URL: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    child = proc
    let out = ''
    proc.stdout.on('data', (c: Buffer) => {
      out += c.toString()
    })
    proc.stderr.on('data', (c: Buffer) => {
      out += c.toString()
    })
    const url = `http://127.0.0.1:${port}`
    const deadline = Date.now() + 10_000
    while (!out.includes(`sluice serving on ${url}`)) {
      if (Date.now() > deadline) throw new Error(`no banner: ${out}`)
      await new Promise((r) => setTimeout(r, 50))
    }
    // Warm up with the same request shape at cost 1, then measure what 30 big requests add.
    for (let i = 0; i < REQUESTS; i++) {
      const res = await post(`${url}/v1/check`, { policy: 'big', key: `warm-${i}`, cost: 1 })
      expect(res.body.allowed).toBe(true)
    }
    const before = rssMb(proc.pid!)
    for (let i = 0; i < REQUESTS; i++) {
      const res = await post(`${url}/v1/check`, { policy: 'big', key: `user-${i}`, cost: BIG })
      expect(res.body).toMatchObject({ allowed: true, remaining: 0 })
    }
    const denied = await post(`${url}/v1/check`, { policy: 'big', key: 'user-0', cost: BIG })
    expect(denied.body).toMatchObject({ allowed: false })
    // One time per unit would be 30 x 1,000,000 numbers, hundreds of MB; an entry per request is a
    // few KB. The bound leaves the allocator and the JIT room.
    const grown = rssMb(proc.pid!) - before
    expect(grown).toBeLessThan(64)
  })
})
