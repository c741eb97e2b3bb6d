// Script-cache losses on a real redis-server: a second client runs SCRIPT FLUSH every 5 ms while a
// bounded load decides on two keys (single and layered decisions), so some flushes land between a
// call's SCRIPT LOAD and its retry. Every decision still comes from Redis (none degraded: the limiter's
// timeout is long, so a degraded one could only be a script call that gave up) and each key admits
// exactly its limit. And `ready()` loads every script before the first decision.
import { createHash } from 'node:crypto'
import { Redis } from 'ioredis'
import { describe, expect, inject, it } from 'vitest'
import { createLimiter } from '../../../packages/sluice/src/index.js'
import { redisStore } from '../../../packages/sluice/src/stores/redis/index.js'
import { luaSources } from '../../../packages/sluice/src/stores/redis/lua.generated.js'
import { ioredisCluster, nodeRedisCluster } from '../../helpers/redis-clients.js'
import { startRedis } from '../../helpers/redis-harness.js'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Calls of a command in INFO commandstats (`script|load`, `evalsha`), and errors by code. */
async function stats(client: Redis): Promise<{ calls(name: string): number; errors(code: string): number }> {
  const text = `${await client.info('commandstats')}\n${await client.info('errorstats')}`
  const find = (prefix: string, field: string): number => {
    const line = text.split('\n').find((l) => l.startsWith(prefix))
    return line === undefined ? 0 : Number(new RegExp(`${field}=(\\d+)`).exec(line)![1])
  }
  return {
    calls: (name) => find(`cmdstat_${name}:`, 'calls'),
    errors: (code) => find(`errorstat_${code}:`, 'count'),
  }
}

describe('NOSCRIPT', () => {
  it('SCRIPT FLUSH every 5 ms under load: nothing degraded, exactly the limit admitted', async () => {
    const server = await startRedis()
    const client = new Redis(server.port, '127.0.0.1')
    const admin = new Redis(server.port, '127.0.0.1')
    try {
      const limiter = createLimiter({
        store: redisStore(client, { scriptRetryMs: 10_000 }),
        storeTimeout: '10s',
        onStoreError: 'open',
        localDenyCache: false, // every decision goes to Redis, denied ones too
        policies: {
          api: { algorithm: 'fixed-window', limit: 1500, window: '1h' },
          user: { algorithm: 'token-bucket', limit: 1000, window: '1h' },
          burst: { algorithm: 'sliding-window-log', limit: 5000, window: '1h' },
        },
      })
      const DECISIONS = 4000
      // Decisions go on until this many flushes have landed among them, however fast the machine
      // decides (a bound, not a time: 200,000 decisions at the most).
      const MIN_FLUSHES = 40
      const IN_FLIGHT = 32
      let flushing = true
      let flushes = 0
      const flusher = (async () => {
        while (flushing && flushes < 5000) {
          await admin.script('FLUSH')
          flushes++
          await sleep(5)
        }
      })()
      let issued = 0
      let degraded = 0
      const admitted = { single: 0, layered: 0 }
      await Promise.all(
        Array.from({ length: IN_FLIGHT }, async (_, worker) => {
          while ((issued < DECISIONS || flushes < MIN_FLUSHES) && issued < 200_000) {
            issued++
            const d =
              worker % 2 === 0
                ? await limiter.consume('api', 'one-key')
                : await limiter.consume([
                    { policy: 'user', key: 'other-key' },
                    { policy: 'burst', key: 'other-key' },
                  ])
            if (d.degraded === true) degraded++
            if (d.allowed) admitted[worker % 2 === 0 ? 'single' : 'layered']++
          }
        }),
      )
      flushing = false
      await flusher
      const seen = await stats(admin)
      expect({ degraded, admitted }).toEqual({ degraded: 0, admitted: { single: 1500, layered: 1000 } })
      // The flushes did land under load: many NOSCRIPT replies, each followed by a load.
      expect(flushes).toBeGreaterThanOrEqual(MIN_FLUSHES)
      expect(seen.errors('NOSCRIPT')).toBeGreaterThan(20)
      expect(seen.calls('script|load')).toBeGreaterThan(20)
    } finally {
      client.disconnect()
      admin.disconnect()
      await server.stop()
    }
  })
})

describe('scriptRetryMs', () => {
  it('is a whole number of ms from 0 to 60000', () => {
    const client = new Redis(inject('redis').port, '127.0.0.1', { lazyConnect: true })
    for (const scriptRetryMs of [-1, 1.5, 60_001, '100', Number.NaN])
      expect(() => redisStore(client, { scriptRetryMs } as never)).toThrow(
        expect.objectContaining({
          code: 'SLUICE_INVALID_OPTIONS',
          message: expect.stringContaining('scriptRetryMs'),
        }),
      )
    for (const scriptRetryMs of [0, 100, 60_000])
      expect(redisStore(client, { scriptRetryMs }).name).toBe('redis')
    client.disconnect()
  })
})

describe('ready()', () => {
  const storeScripts = Object.entries(luaSources)
    .filter(([name]) => !name.startsWith('hybrid/'))
    .map(([name, source]) => ({ name, sha: createHash('sha1').update(source).digest('hex') }))

  it('standalone: loads every script, so the first decision is one EVALSHA that meets no NOSCRIPT', async () => {
    const server = await startRedis()
    const client = new Redis(server.port, '127.0.0.1', { lazyConnect: true })
    const admin = new Redis(server.port, '127.0.0.1')
    try {
      const store = redisStore(client)
      expect(await admin.script('EXISTS', ...storeScripts.map((s) => s.sha))).toEqual(
        storeScripts.map(() => 0),
      )
      await store.ready()
      expect(await admin.script('EXISTS', ...storeScripts.map((s) => s.sha))).toEqual(
        storeScripts.map(() => 1),
      )
      const limiter = createLimiter({
        store,
        policies: { api: { algorithm: 'gcra', limit: 10, window: '1m' } },
      })
      expect(await limiter.consume('api', 'first')).toMatchObject({ allowed: true, remaining: 9 })
      const seen = await stats(admin)
      expect(seen.calls('evalsha')).toBe(1)
      expect(seen.errors('NOSCRIPT')).toBe(0)
      // Again (a readiness probe): nothing is missing, nothing is loaded.
      const loads = seen.calls('script|load')
      await store.ready()
      expect((await stats(admin)).calls('script|load')).toBe(loads)
    } finally {
      client.disconnect()
      admin.disconnect()
      await server.stop()
    }
  })

  it('Cluster, ioredis (not connected yet) and node-redis: every master holds every script afterwards', async () => {
    const admin = ioredisCluster()
    await admin.ping() // connected: its list of masters is known
    const shas = storeScripts.map((s) => s.sha)
    try {
      const ioredisStore = async () => {
        const client = ioredisCluster()
        return { store: redisStore(client), close: async () => client.disconnect() }
      }
      const nodeRedisStore = async () => {
        const client = await nodeRedisCluster()
        return { store: redisStore(client), close: () => client.close() }
      }
      for (const make of [ioredisStore, nodeRedisStore]) {
        for (const node of admin.nodes('master')) await node.script('FLUSH')
        const { store, close } = await make()
        try {
          await store.ready()
        } finally {
          await close()
        }
        for (const node of admin.nodes('master'))
          expect(await node.script('EXISTS', ...shas)).toEqual(shas.map(() => 1))
      }
    } finally {
      admin.disconnect()
    }
  })

  it('rejects with StoreError when Redis does not answer', async () => {
    const server = await startRedis()
    const client = new Redis(server.port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0 })
    client.on('error', () => {})
    await server.stop()
    try {
      await expect(redisStore(client).ready()).rejects.toMatchObject({ code: 'SLUICE_STORE_ERROR' })
    } finally {
      client.disconnect()
    }
  })
})
