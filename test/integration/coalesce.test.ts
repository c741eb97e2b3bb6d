// Coalescing: decisions issued in the same tick go to Redis as one batch script call, in issue order,
// and give exactly the results the same decisions give one call at a time.
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ALGORITHMS, type AlgorithmName, resolvePolicy } from '../../src/policy.js'
import type { Step } from '../../src/store.js'
import { type RedisClient, redisStore } from '../../src/stores/redis/index.js'
import { type RedisServer, startRedis } from '../helpers/redis-harness.js'
import { freshPrefix, ioredisCluster } from './clients.js'

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
})
