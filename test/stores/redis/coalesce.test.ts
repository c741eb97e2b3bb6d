// Coalescing: decisions issued in the same tick go to Redis as one batch script call, in issue order,
// and give exactly the results the same decisions give one call at a time.
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ALGORITHMS, type AlgorithmName, resolvePolicy } from '../../../packages/sluice/src/policy.js'
import type { Step } from '../../../packages/sluice/src/store.js'
import { type RedisClient, redisStore } from '../../../packages/sluice/src/stores/redis/index.js'
import { freshPrefix, ioredisCluster } from '../../helpers/redis-clients.js'
import { type RedisServer, startRedis } from '../../helpers/redis-harness.js'
import { startRedisProcess } from '../../helpers/redis-process.js'

let server: RedisServer
let client: Redis
beforeAll(async () => {
  // A private server: INFO commandstats counts only this file's calls.
  server = await startRedis()
  client = new Redis(server.port, '127.0.0.1')
})
afterAll(async () => {
  client.disconnect()
  await server.stop()
})

async function evalshaCalls(): Promise<number> {
  const text = await client.info('commandstats')
  return Number(/cmdstat_evalsha:calls=(\d+)/.exec(text)?.[1] ?? 0)
}

/** Socket reads Redis has processed (INFO stats), this INFO command's own read included. */
async function readsProcessed(): Promise<number> {
  const text = await client.info('stats')
  return Number(/total_reads_processed:(\d+)/.exec(text)![1])
}

/**
 * Count the writes the client's socket hands to the system until `stop()`: one entry per write,
 * the number of commands (chunks) it carries. Observes the real socket; nothing is replaced.
 */
function watchWrites(redis: Redis): { sizes: number[]; stop(): void } {
  const socket = redis.stream as unknown as {
    _write(chunk: unknown, encoding: string, cb: () => void): void
    _writev(chunks: unknown[], cb: () => void): void
  }
  const write = socket._write
  const writev = socket._writev
  const sizes: number[] = []
  socket._write = function (this: unknown, chunk, encoding, cb) {
    sizes.push(1)
    write.call(this, chunk, encoding, cb)
  }
  socket._writev = function (this: unknown, chunks, cb) {
    sizes.push(chunks.length)
    writev.call(this, chunks, cb)
  }
  return {
    sizes,
    stop() {
      socket._write = write
      socket._writev = writev
    },
  }
}

const policyOf = (algorithm: AlgorithmName, name: string, limit: number) =>
  algorithm === 'concurrency'
    ? resolvePolicy(name, { algorithm, limit, timeout: '10s' })
    : resolvePolicy(name, { algorithm, limit, window: '10s' })

/** A seeded mix of single-step and layered decisions over a few keys and every algorithm. */
function decisions(
  seed: number,
  count: number,
  only?: AlgorithmName,
): { steps: Step[]; mode: 'consume' | 'peek' }[] {
  let x = seed
  const rand = (n: number) => {
    x = (x * 1103515245 + 12345) % 2147483648
    return x % n
  }
  const out: { steps: Step[]; mode: 'consume' | 'peek' }[] = []
  for (let i = 0; i < count; i++) {
    const layers = only === undefined && rand(4) === 0 ? 2 : 1
    const key = `k${rand(3)}`
    const steps: Step[] = []
    for (let l = 0; l < layers; l++) {
      const algorithm = only ?? ALGORITHMS[rand(ALGORITHMS.length)]!
      steps.push({
        policy: policyOf(algorithm, `${algorithm}-${l}`, 3 + l),
        key,
        cost: 1 + rand(2),
        leaseId: `lease-${rand(5)}`,
      })
    }
    out.push({ steps, mode: rand(5) === 0 ? 'peek' : 'consume' })
  }
  return out
}

/** One store that coalesces and one that sends each decision alone, on the same client clock. */
function storePair(client: RedisClient, prefix: string, clock: () => number) {
  return {
    together: redisStore(client, { prefix: freshPrefix(prefix), clock: 'client', now: clock }),
    alone: redisStore(client, { prefix: freshPrefix(prefix), clock: 'client', now: clock, coalesce: false }),
  }
}

/** Load the apply and batch scripts (a first call meets NOSCRIPT, which commandstats counts). */
async function warm(store: ReturnType<typeof redisStore>, policy: Step['policy']): Promise<void> {
  await store.apply([{ policy, key: 'warm', cost: 1 }], 'peek')
  // Eight at once from idle go as four calls of two: the batch script.
  await Promise.all(Array.from({ length: 8 }, () => store.apply([{ policy, key: 'warm', cost: 1 }], 'peek')))
}

describe('coalescing', () => {
  it('sends decisions of one tick as four script calls, in issue order', async () => {
    const store = redisStore(client, { prefix: freshPrefix('co'), clock: 'client', now: () => 1_000_000 })
    const policy = policyOf('token-bucket', 'tb', 10)
    await warm(store, policy)
    const before = await evalshaCalls()
    const results = await Promise.all(
      Array.from({ length: 25 }, () => store.apply([{ policy, key: 'hot', cost: 1 }], 'consume')),
    )
    // From idle, 25 decisions go as calls of ceil(25 / 4) = 7, 7, 7 and 4: about four calls in
    // flight, so Redis runs one while this process reads the reply of another.
    expect(await evalshaCalls()).toBe(before + 4)
    expect(results.map((r) => r[0]!.allowed)).toEqual(Array.from({ length: 25 }, (_, i) => i < 10))
    expect(results.slice(0, 10).map((r) => r[0]!.remaining)).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0])
  })

  it('once 64 decisions are in flight, a call carries at least 32 of them', async () => {
    const store = redisStore(client, { prefix: freshPrefix('co'), clock: 'client', now: () => 1_000_000 })
    const policy = policyOf('token-bucket', 'tb', 1000)
    await warm(store, policy)
    const tick = async (count: number): Promise<number> => {
      const before = await evalshaCalls()
      const results = await Promise.all(
        Array.from({ length: count }, (_, i) =>
          store.apply([{ policy, key: `k${i % 5}`, cost: 1 }], 'consume'),
        ),
      )
      expect(results.every((r) => r[0]!.allowed)).toBe(true)
      return (await evalshaCalls()) - before
    }
    // 63 from idle: four calls (16, 16, 16, 15), as always below 64.
    expect(await tick(63)).toBe(4)
    // 64 from idle: two calls of 32, where four of 16 would each pay the call's fixed cost in Redis.
    expect(await tick(64)).toBe(2)
    // 96 from idle: three calls of 32, not four of 24.
    expect(await tick(96)).toBe(3)
  })

  it('counts the decisions already in flight toward that floor', async () => {
    // A server of its own, paused: the first calls stay in flight, whatever this process's loop does.
    const paused = await startRedisProcess()
    const own = new Redis(paused.port, '127.0.0.1')
    try {
      const store = redisStore(own, { prefix: freshPrefix('co'), clock: 'client', now: () => 1_000_000 })
      const policy = policyOf('token-bucket', 'tb', 1000)
      await warm(store, policy)
      const calls = async () =>
        Number(/cmdstat_evalsha:calls=(\d+)/.exec(await own.info('commandstats'))?.[1] ?? 0)
      const before = await calls()
      const consume = (i: number) => store.apply([{ policy, key: `k${i % 5}`, cost: 1 }], 'consume')
      paused.signal('SIGSTOP')
      // 32 from idle: four calls of 8, held in flight.
      const first = Array.from({ length: 32 }, (_, i) => consume(i))
      await new Promise((resolve) => setImmediate(resolve))
      // 32 more with 32 in flight: 64 in all, so one call of 32, not two of 16.
      const second = Array.from({ length: 32 }, (_, i) => consume(i))
      await new Promise((resolve) => setImmediate(resolve))
      paused.signal('SIGCONT')
      const results = await Promise.all([...first, ...second])
      expect(results.every((r) => r[0]!.allowed)).toBe(true)
      expect((await calls()) - before).toBe(5)
    } finally {
      paused.signal('SIGCONT')
      own.disconnect()
      await paused.stop()
    }
  })

  it('with coalesce: false sends one call per decision', async () => {
    const store = redisStore(client, { prefix: freshPrefix('co'), coalesce: false })
    const policy = policyOf('gcra', 'g', 10)
    await store.apply([{ policy, key: 'warm', cost: 1 }], 'peek')
    const before = await evalshaCalls()
    await Promise.all(
      Array.from({ length: 7 }, () => store.apply([{ policy, key: 'hot', cost: 1 }], 'consume')),
    )
    expect(await evalshaCalls()).toBe(before + 7)
  })

  it('with coalesce: false, the single calls of one tick share socket writes of at most 16 calls', async () => {
    const store = redisStore(client, { prefix: freshPrefix('cw'), coalesce: false })
    const policy = policyOf('token-bucket', 'tb', 100)
    await store.apply([{ policy, key: 'warm', cost: 1 }], 'peek')
    const calls = await evalshaCalls()
    const reads = await readsProcessed()
    const writes = watchWrites(client)
    const results = await Promise.all(
      Array.from({ length: 40 }, () => store.apply([{ policy, key: 'hot', cost: 1 }], 'consume')),
    )
    writes.stop()
    const readsAfter = await readsProcessed()
    // 40 EVALSHA calls, each with its own reply, in issue order...
    expect(await evalshaCalls()).toBe(calls + 40)
    expect(results.map((r) => r[0]!.remaining)).toEqual(Array.from({ length: 40 }, (_, i) => 99 - i))
    // ...that left this process in three socket writes of 16, 16 and 8 calls, and reached Redis
    // in at most those three reads (plus the read of the INFO command that asks).
    expect(writes.sizes).toEqual([16, 16, 8])
    expect(readsAfter - reads).toBeLessThanOrEqual(4)
  })

  it('with coalesceWrites: false, every call is its own socket write', async () => {
    const store = redisStore(client, { prefix: freshPrefix('cw'), coalesce: false, coalesceWrites: false })
    const policy = policyOf('token-bucket', 'tb', 100)
    await store.apply([{ policy, key: 'warm', cost: 1 }], 'peek')
    const writes = watchWrites(client)
    const results = await Promise.all(
      Array.from({ length: 40 }, () => store.apply([{ policy, key: 'hot', cost: 1 }], 'consume')),
    )
    writes.stop()
    expect(results.map((r) => r[0]!.remaining)).toEqual(Array.from({ length: 40 }, (_, i) => 99 - i))
    expect(writes.sizes).toEqual(Array.from({ length: 40 }, () => 1))
  })

  it('splits a tick with more than 128 decisions into calls of at most 128', async () => {
    // The first 128 leave at once as 4 calls of 32; the next 128 find 128 in flight and go as 2
    // calls of ceil(256 / 4) = 64; the last 44 leave at the end of the tick as one call.
    const store = redisStore(client, { prefix: freshPrefix('co') })
    const policy = policyOf('fixed-window', 'fw', 1000)
    await warm(store, policy)
    const before = await evalshaCalls()
    const results = await Promise.all(
      Array.from({ length: 300 }, (_, i) => store.apply([{ policy, key: `u${i % 7}`, cost: 1 }], 'consume')),
    )
    expect(await evalshaCalls()).toBe(before + 7)
    expect(results.every((r) => r[0]!.allowed)).toBe(true)
  })

  for (const seed of [1, 2, 3]) {
    it(`gives the results of one call at a time (mixed algorithms, layers, peeks; seed ${seed})`, async () => {
      let now = 5_000_000
      const clock = () => now
      const { together, alone } = storePair(client, 'co', clock)
      for (let round = 0; round < 4; round++) {
        const batch = decisions(seed * 100 + round, 40)
        const coalesced = await Promise.all(batch.map((d) => together.apply(d.steps, d.mode)))
        const sequential = []
        for (const d of batch) sequential.push(await alone.apply(d.steps, d.mode))
        expect(coalesced).toEqual(sequential)
        now += 1_500
      }
    })
  }

  for (const only of ALGORITHMS) {
    it(`${only} only: one flat script call per tick gives the results of one call at a time`, async () => {
      let now = 9_000_000
      const clock = () => now
      const { together, alone } = storePair(client, 'co', clock)
      for (let round = 0; round < 4; round++) {
        const batch = decisions(round + 7, 40, only)
        const coalesced = await Promise.all(batch.map((d) => together.apply(d.steps, d.mode)))
        const sequential = []
        for (const d of batch) sequential.push(await alone.apply(d.steps, d.mode))
        expect(coalesced).toEqual(sequential)
        now += 700
      }
    })
  }

  it('a batch reads its keys in one MGET; a key named again, and blocked keys, decide as one call at a time', async () => {
    let now = 13_000_000
    const clock = () => now
    const { together, alone } = storePair(client, 'co', clock)
    const policy = policyOf('token-bucket', 'mget', 4)
    await warm(together, policy)
    // k1 and k3 are blocked; k0 and k2 come back within a call, so their second reads must see the
    // first decision's write.
    for (const store of [together, alone])
      await store.block(
        [
          { policy, key: 'k1', cost: 1 },
          { policy, key: 'k3', cost: 1 },
        ],
        60_000,
      )
    const keys = [
      'k0',
      'k1',
      'k0',
      'k2',
      'k4',
      'k2',
      'k3',
      'k2',
      'k0',
      'k5',
      'k0',
      'k0',
      'k1',
      'k6',
      'k7',
      'k2',
      'k2',
      'k8',
      'k9',
      'k2',
    ]
    const stats = async () => {
      const text = await client.info('commandstats')
      const count = (name: string) => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(text)?.[1] ?? 0)
      return { mget: count('mget'), get: count('get'), evalsha: count('evalsha') }
    }
    const before = await stats()
    const coalesced = await Promise.all(
      keys.map((key) => together.apply([{ policy, key, cost: 1 }], 'consume')),
    )
    const after = await stats()
    // From idle, 20 decisions go as 4 calls of 5, each with one MGET; a key named again in its call
    // reads its state and its block with GET.
    let again = 0
    for (let i = 0; i < keys.length; i += 5) {
      const call = keys.slice(i, i + 5)
      again += call.filter((key, j) => call.indexOf(key) < j).length
    }
    expect(after.evalsha - before.evalsha).toBe(4)
    expect(after.mget - before.mget).toBe(4)
    expect(after.get - before.get).toBe(2 * again)
    const sequential = []
    for (const key of keys) sequential.push(await alone.apply([{ policy, key, cost: 1 }], 'consume'))
    expect(coalesced).toEqual(sequential)
    expect(coalesced.filter((r) => r[0]!.blocked)).toHaveLength(3)
    // Limit 4: k0's fifth decision, k2's fifth and sixth.
    expect(coalesced.filter((r) => !r[0]!.allowed && !r[0]!.blocked)).toHaveLength(3)
    now += 100
  })

  it('while a call is in flight, decisions of separate ticks of one event-loop turn share a call', async () => {
    const store = redisStore(client, { prefix: freshPrefix('turn') })
    const policy = policyOf('fixed-window', 'turn', 100)
    await warm(store, policy)
    const before = await evalshaCalls()
    // One call in flight; then twelve decisions, each from its own setImmediate callback: separate
    // ticks of one turn (the check phase), as an HTTP server's requests of one poll are. They leave
    // together at the end of the turn, sized to keep about four calls in flight: 4 per call while
    // the first is unanswered, 3 if its reply was read first, so three or four calls (twelve, one
    // each, without it).
    const first = store.apply([{ policy, key: 'first', cost: 1 }], 'consume')
    const rest = await new Promise<Promise<unknown>[]>((resolve) => {
      const out: Promise<unknown>[] = []
      for (let i = 0; i < 12; i++)
        setImmediate(() => {
          out.push(store.apply([{ policy, key: `k${i}`, cost: 1 }], 'consume'))
          if (out.length === 12) resolve(out)
        })
    })
    await Promise.all([first, ...rest])
    const calls = (await evalshaCalls()) - before - 1
    expect(calls).toBeGreaterThanOrEqual(3)
    expect(calls).toBeLessThanOrEqual(4)
  })

  it('a refund, block or reset issued after a waiting decision reaches Redis after it', async () => {
    const store = redisStore(client, { prefix: freshPrefix('order') })
    const policy = policyOf('fixed-window', 'order', 1)
    await warm(store, policy)
    const step = { policy, key: 'k', cost: 1 }
    // The consume waits for the end of the tick; the refund must not overtake it.
    const consumed = store.apply([step], 'consume')
    const refunded = store.refund([step])
    expect((await consumed)[0]!.allowed).toBe(true)
    await refunded
    expect((await store.apply([step], 'consume'))[0]!.allowed).toBe(true)
    // A reset after a waiting consume leaves nothing charged; a block after it is in force.
    const again = store.apply([step], 'consume')
    const reset = store.reset([step])
    expect((await again)[0]!.allowed).toBe(false)
    await reset
    const third = store.apply([step], 'consume')
    const blocked = store.block([step], 60_000)
    expect((await third)[0]!.allowed).toBe(true)
    await blocked
    expect((await store.apply([step], 'peek'))[0]!.blocked).toBe(true)
  })

  it('a flat batch that alternates policies of one algorithm re-reads each policy (token bucket)', async () => {
    let now = 11_000_000
    const clock = () => now
    const { together, alone } = storePair(client, 'co', clock)
    // Different limit, window and capacity: each decision must use its own policy's packed layout.
    const small = resolvePolicy('small', { algorithm: 'token-bucket', limit: 3, window: '1s' })
    const large = resolvePolicy('large', { algorithm: 'token-bucket', limit: 50, window: '1h', burst: 7 })
    const batch = Array.from({ length: 24 }, (_, i) => ({
      policy: i % 3 === 0 ? large : small,
      key: `k${i % 4}`,
      cost: 1 + (i % 2),
    }))
    for (let round = 0; round < 3; round++) {
      const coalesced = await Promise.all(batch.map((s) => together.apply([s], 'consume')))
      const sequential = []
      for (const s of batch) sequential.push(await alone.apply([s], 'consume'))
      expect(coalesced).toEqual(sequential)
      now += 400
    }
  })

  it('a failing call rejects every decision of its batch with a StoreError', async () => {
    const store = redisStore(client, { prefix: freshPrefix('co') })
    const policy = policyOf('token-bucket', 'tb', 10)
    const results = await Promise.allSettled(
      Array.from({ length: 3 }, (_, i) =>
        // A non-numeric limit makes the script fail inside Redis.
        store.apply([{ policy: { ...policy, limit: Number.NaN }, key: `e${i}`, cost: 1 }], 'consume'),
      ),
    )
    for (const r of results) {
      expect(r.status).toBe('rejected')
      expect((r as PromiseRejectedResult).reason).toMatchObject({ code: 'SLUICE_STORE_ERROR' })
    }
  })

  it('Cluster: decisions coalesce per hash tag and match one call at a time', async () => {
    const cluster = ioredisCluster()
    try {
      let now = 7_000_000
      const clock = () => now
      const { together, alone } = storePair(cluster, 'co-c', clock)
      for (let round = 0; round < 3; round++) {
        const batch = decisions(round + 50, 30)
        const coalesced = await Promise.all(batch.map((d) => together.apply(d.steps, d.mode)))
        const sequential = []
        for (const d of batch) sequential.push(await alone.apply(d.steps, d.mode))
        expect(coalesced).toEqual(sequential)
        now += 1_500
      }
    } finally {
      cluster.disconnect()
    }
  })
  it('Cluster: single calls that share socket writes on every node match one call at a time', async () => {
    const cluster = ioredisCluster()
    try {
      await cluster.ping()
      const clock = () => 9_000_000
      const shared = redisStore(cluster, {
        prefix: freshPrefix('cw-c'),
        clock: 'client',
        now: clock,
        coalesce: false,
      })
      const { alone } = storePair(cluster, 'cw-c', clock)
      // Subjects spread over the three masters; each decision is its own EVALSHA.
      const batch = decisions(77, 60).map((d, i) => ({
        ...d,
        steps: d.steps.map((step) => ({ ...step, key: `${step.key}-${i % 12}` })),
      }))
      const together = await Promise.all(batch.map((d) => shared.apply(d.steps, d.mode)))
      const sequential = []
      for (const d of batch) sequential.push(await alone.apply(d.steps, d.mode))
      expect(together).toEqual(sequential)
    } finally {
      cluster.disconnect()
    }
  })
})
