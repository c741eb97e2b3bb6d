// The Redis store's own promises: key safety, TTLs (nothing leaks), NOSCRIPT recovery, layered
// decisions across Cluster slots, the server clock, both client libraries, and option errors.
import { Redis } from 'ioredis'
import { afterAll, describe, expect, inject, it } from 'vitest'
import { type Policy, resolvePolicy } from '../../../packages/sluice/src/policy.js'
import type { Step } from '../../../packages/sluice/src/store.js'
import { redisStore } from '../../../packages/sluice/src/stores/redis/index.js'
import { stepKeys } from '../../../packages/sluice/src/stores/redis/keys.js'
import {
  freshPrefix,
  ioredis,
  ioredisCluster,
  nodeRedis,
  nodeRedisCluster,
} from '../../helpers/redis-clients.js'
import { startRedis } from '../../helpers/redis-harness.js'

const standalone = ioredis()
const cluster = ioredisCluster()
afterAll(() => {
  standalone.disconnect()
  cluster.disconnect()
})

const policy = (name: string, p: Policy) => resolvePolicy(name, p)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe('keys', () => {
  const odd = [
    'plain',
    'user:42',
    'a{b}c',
    '{',
    '}',
    '{}',
    '}{',
    '#hashed-looking',
    'ключ-🔑-鍵',
    '\uD800',
    '\uDBFF',
    ':',
    'x'.repeat(10 * 1024),
    `${'x'.repeat(10 * 1024)}y`,
  ]

  for (const [label, client] of [
    ['standalone', standalone],
    ['cluster', cluster],
  ] as const) {
    it(`${label}: unicode, braces, colons and 10 KB keys never collide and stay short`, async () => {
      const prefix = freshPrefix('keys')
      const store = redisStore(client, { prefix })
      const one = policy('one', { algorithm: 'fixed-window', limit: 1, window: '1m' })
      const other = policy('other', { algorithm: 'fixed-window', limit: 1, window: '1m' })
      for (const key of odd) {
        // Two policies on one subject: one call, one slot (no cross-slot error in Cluster).
        const first = await store.apply(
          [
            { policy: one, key, cost: 1 },
            { policy: other, key, cost: 1 },
          ],
          'consume',
        )
        expect(first.map((r) => r.allowed)).toEqual([true, true])
      }
      for (const key of odd) {
        const [again] = await store.apply([{ policy: one, key, cost: 1 }], 'consume')
        expect(again!.allowed, JSON.stringify(key.slice(0, 20))).toBe(false)
      }
      const names = odd.flatMap((key) => [
        stepKeys(prefix, { policy: one, key, cost: 1 }).state,
        stepKeys(prefix, { policy: other, key, cost: 1 }).state,
      ])
      expect(new Set(names).size).toBe(names.length)
      for (const name of names) expect(Buffer.byteLength(name)).toBeLessThan(200)
      for (const key of odd)
        await store.reset([
          { policy: one, key, cost: 1 },
          { policy: other, key, cost: 1 },
        ])
    })
  }

  it('every key of one subject shares a slot; the tag is the subject', async () => {
    const a = stepKeys('sluice', {
      policy: policy('a', { algorithm: 'gcra', limit: 1, window: 1000 }),
      key: 'u{1}',
      cost: 1,
    })
    const b = stepKeys('sluice', {
      policy: policy('b', { algorithm: 'gcra', limit: 1, window: 1000 }),
      key: 'u{1}',
      cost: 1,
    })
    const node = new Redis(inject('redisCluster').ports[0]!, '127.0.0.1')
    const real = await Promise.all(
      [a.state, a.block, b.state, b.block].map((k) => node.call('CLUSTER', 'KEYSLOT', k)),
    )
    node.disconnect()
    expect(new Set(real).size).toBe(1)
  })
})

describe('TTL on every key', () => {
  // Long enough that the writes below finish inside one window even on a loaded machine.
  const WINDOW = 1500

  it('server clock: after every window passes, DBSIZE is 0', async () => {
    const client = new Redis(inject('redis').port, '127.0.0.1', { db: 3 })
    try {
      await client.flushdb()
      const store = redisStore(client)
      const policies = [
        policy('fw', { algorithm: 'fixed-window', limit: 3, window: WINDOW }),
        policy('swl', { algorithm: 'sliding-window-log', limit: 3, window: WINDOW }),
        policy('swc', { algorithm: 'sliding-window-counter', limit: 3, window: WINDOW / 2 }),
        policy('tb', { algorithm: 'token-bucket', limit: 3, window: WINDOW }),
        policy('gcra', { algorithm: 'gcra', limit: 3, window: WINDOW }),
        policy('conc', { algorithm: 'concurrency', limit: 3, timeout: WINDOW }),
      ]
      const steps: Step[] = policies.flatMap((p) =>
        ['a', 'b', 'c'].map((key) => ({ policy: p, key, cost: 1, leaseId: `lease-${key}` })),
      )
      for (let round = 0; round < 4; round++) {
        await store.apply(steps, 'consume')
        for (const s of steps) await store.apply([s], 'consume')
      }
      await store.refund(steps.slice(0, 6))
      await store.block(steps.slice(6, 9), WINDOW - 100)
      const keys = await client.keys('*')
      expect(keys.length).toBeGreaterThan(18)
      const ttls = await Promise.all(keys.map((k) => client.pttl(k)))
      for (const [i, ttl] of ttls.entries()) {
        expect(ttl, keys[i]).toBeGreaterThan(0)
        expect(ttl, keys[i]).toBeLessThanOrEqual(WINDOW)
      }
      // Every TTL is at most one window: the database empties by itself. Polled rather than slept, so
      // a loaded machine only makes the test slower.
      const emptyBy = Date.now() + WINDOW + 5_000
      while ((await client.dbsize()) > 0 && Date.now() < emptyBy) await sleep(50)
      expect(await client.dbsize()).toBe(0)
    } finally {
      client.disconnect()
    }
  })

  it('client clock: keys live their meaningful time plus 1 s of clock-skew slack', async () => {
    const client = new Redis(inject('redis').port, '127.0.0.1', { db: 4 })
    try {
      await client.flushdb()
      const store = redisStore(client, { clock: 'client', now: Date.now })
      const p = policy('tb', { algorithm: 'token-bucket', limit: 2, window: 200 })
      await store.apply([{ policy: p, key: 'k', cost: 2 }], 'consume')
      const ttl = await client.pttl('sluice:{k}:tb')
      expect(ttl).toBeGreaterThan(1000)
      expect(ttl).toBeLessThanOrEqual(1200)
      await sleep(1300)
      expect(await client.dbsize()).toBe(0)
    } finally {
      client.disconnect()
    }
  })
})

async function flushClusterScripts(): Promise<void> {
  for (const port of inject('redisCluster').ports) {
    const node = new Redis(port, '127.0.0.1')
    await node.script('FLUSH')
    node.disconnect()
  }
}

describe('scripts', () => {
  it('EVALSHA only; NOSCRIPT after SCRIPT FLUSH is recovered by SCRIPT LOAD and one retry (ioredis)', async () => {
    const server = await startRedis()
    const client = new Redis(server.port, '127.0.0.1')
    try {
      const store = redisStore(client)
      const p = policy('p', { algorithm: 'gcra', limit: 10, window: '1m' })
      const step = { policy: p, key: 'k', cost: 1 }
      expect((await store.apply([step], 'consume'))[0]!.remaining).toBe(9)
      await client.script('FLUSH')
      expect((await store.apply([step], 'consume'))[0]!.remaining).toBe(8)
      const stats = (await client.info('commandstats')).split('\n')
      const calls = (name: string) => {
        const line = stats.find((l) => l.startsWith(`cmdstat_${name}:`))
        return line === undefined ? 0 : Number(/calls=(\d+)/.exec(line)![1])
      }
      expect(calls('eval')).toBe(0)
      expect(calls('script|load')).toBe(2)
      // Two decisions: each an EVALSHA that met NOSCRIPT, then its one retry.
      expect(calls('evalsha')).toBe(4)
    } finally {
      client.disconnect()
      await server.stop()
    }
  })

  it('NOSCRIPT recovery with node-redis, standalone and cluster', async () => {
    const p = policy('p', { algorithm: 'sliding-window-log', limit: 5, window: '1m' })
    const single = await nodeRedis()
    const many = await nodeRedisCluster()
    try {
      for (const client of [single, many]) {
        const store = redisStore(client, { prefix: freshPrefix('nr') })
        const step = { policy: p, key: 'k', cost: 2 }
        expect((await store.apply([step], 'consume'))[0]!.remaining).toBe(3)
        if (client === single) await single.scriptFlush()
        else await flushClusterScripts()
        expect((await store.apply([step], 'consume'))[0]!.remaining).toBe(1)
        expect(store.client.library).toBe('node-redis')
        await store.reset([step])
      }
    } finally {
      await single.close()
      await many.close()
    }
  })
})

describe('layered steps across Cluster slots (reserve, then compensate)', () => {
  const perUser = policy('per-user', { algorithm: 'fixed-window', limit: 1000, window: '1m' })
  const shared = policy('shared', { algorithm: 'fixed-window', limit: 10, window: '1m' })

  async function differentSlots(a: string, b: string): Promise<void> {
    const node = new Redis(inject('redisCluster').ports[0]!, '127.0.0.1')
    const slots = await Promise.all([a, b].map((k) => node.call('CLUSTER', 'KEYSLOT', `{${k}}`)))
    node.disconnect()
    expect(slots[0]).not.toBe(slots[1])
  }

  it('a denying group leaves the other groups as they were', async () => {
    await differentSlots('alice', 'all')
    // The subject as the tag, so that the slots checked above are the store's.
    const store = redisStore(cluster, { prefix: freshPrefix('xslot'), slotSecret: false })
    const small = policy('small', { algorithm: 'token-bucket', limit: 2, window: '1m' })
    const steps: Step[] = [
      { policy: perUser, key: 'alice', cost: 1 },
      { policy: small, key: 'all', cost: 1 },
    ]
    expect((await store.apply(steps, 'consume')).map((r) => r.allowed)).toEqual([true, true])
    expect((await store.apply(steps, 'consume')).map((r) => r.allowed)).toEqual([true, true])
    const denied = await store.apply(steps, 'consume')
    expect(denied.map((r) => r.allowed)).toEqual([true, false])
    // The per-user layer was reserved then refunded: it reports, and holds, 998 left (not 997).
    expect(denied[0]!.remaining).toBe(998)
    expect((await store.apply([steps[0]!], 'peek'))[0]!.remaining).toBe(998)
    await store.reset(steps)
  })

  it('under concurrency: exactly the shared limit admitted, and every compensation lands', async () => {
    const store = redisStore(cluster, { prefix: freshPrefix('xslot') })
    const users = Array.from({ length: 20 }, (_, i) => `user-${i}`)
    const attempts = users.flatMap((user) =>
      Array.from({ length: 10 }, () => [
        { policy: perUser, key: user, cost: 1 },
        { policy: shared, key: 'everyone', cost: 1 },
      ]),
    )
    const results = await Promise.all(attempts.map((steps) => store.apply(steps, 'consume')))
    const admitted = results.filter((r) => r.every((x) => x.allowed)).length
    expect(admitted).toBe(10)
    // Each user's layer holds exactly the admissions that went through for that user.
    let charged = 0
    for (const user of users) {
      const [peek] = await store.apply([{ policy: perUser, key: user, cost: 1 }], 'peek')
      charged += 1000 - peek!.remaining
    }
    expect(charged).toBe(admitted)
    await store.reset([{ policy: shared, key: 'everyone', cost: 1 }])
    for (const user of users) await store.reset([{ policy: perUser, key: user, cost: 1 }])
  })
})

describe('clock', () => {
  it('server clock (the default) uses Redis TIME, whatever the host clock says', async () => {
    const prefix = freshPrefix('clock')
    const store = redisStore(standalone, { prefix })
    expect(() => redisStore(standalone, { clock: 'server', now: () => 0 })).toThrow(
      expect.objectContaining({ code: 'SLUICE_INVALID_OPTIONS' }),
    )
    const p = policy('fw', { algorithm: 'fixed-window', limit: 2, window: '10s' })
    const step = { policy: p, key: 'k', cost: 1 }
    const [first] = await store.apply([step], 'consume')
    expect(first).toMatchObject({ allowed: true, remaining: 1 })
    expect(first!.resetMs).toBeGreaterThan(9000)
    expect(first!.resetMs).toBeLessThanOrEqual(10_000)
    const [seconds = 0, micros = 0] = (await standalone.time()).map(Number)
    const redisNow = seconds * 1000 + Math.floor(micros / 1000)
    // The window's end is the key's expiry on the Redis clock (the compact layout); its value the count.
    const key = stepKeys(prefix, step).state
    expect(await standalone.get(key)).toBe('1')
    const end = Number(await standalone.call('PEXPIRETIME', key))
    expect(Math.abs(redisNow + 10_000 - end)).toBeLessThan(2000)
    // A second store (another host, in production) decides on the same Redis clock and window.
    const skewed = redisStore(standalone, { prefix })
    expect((await skewed.apply([step], 'consume'))[0]).toMatchObject({ allowed: true, remaining: 0 })
    expect((await store.apply([step], 'consume'))[0]).toMatchObject({ allowed: false, blocked: false })
    await store.reset([step])
  })
})

describe('options and lifecycle', () => {
  it('rejects what it cannot use, with stable codes', async () => {
    const bad = [
      () => redisStore({} as never),
      () => redisStore(standalone, { prefix: 'a{b' }),
      () => redisStore(standalone, { prefix: '' }),
      () => redisStore(standalone, { clock: 'sundial' as never }),
      () => redisStore(standalone, { coalesceWrites: 'yes' as never }),
      () => redisStore(standalone, { extra: 1 } as never),
    ]
    for (const make of bad) expect(make).toThrow(expect.objectContaining({ code: 'SLUICE_INVALID_OPTIONS' }))
  })

  it('reports its client and topology, and refuses calls after close (the client stays open)', async () => {
    const store = redisStore(cluster)
    expect(store.name).toBe('redis-cluster')
    expect(store.client).toEqual({ library: 'ioredis', cluster: true })
    expect(redisStore(standalone).name).toBe('redis')
    await store.close()
    const step = { policy: policy('p', { algorithm: 'gcra', limit: 1, window: 1000 }), key: 'k', cost: 1 }
    await expect(store.apply([step], 'consume')).rejects.toMatchObject({ code: 'SLUICE_STORE_CLOSED' })
    expect(await standalone.ping()).toBe('PONG')
  })

  it('wraps client failures in StoreError with the cause', async () => {
    const dead = new Redis(1, '127.0.0.1', {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    })
    dead.on('error', () => {})
    const store = redisStore(dead)
    const step = { policy: policy('p', { algorithm: 'gcra', limit: 1, window: 1000 }), key: 'k', cost: 1 }
    await expect(store.apply([step], 'consume')).rejects.toMatchObject({ code: 'SLUICE_STORE_ERROR' })
    dead.disconnect()
  })
})
