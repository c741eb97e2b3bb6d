// A rule's countIf through every adapter's real server: the request is charged when it arrives, and
// once its response has ended, the units of each rule whose countIf says no to the status are given
// back (the store's refund); the other rules keep theirs. A key over its limit is refused before the
// handler runs, whatever its responses would have been. The tests wait for each refund to reach the
// store before the next request, so an answer never depends on which side of a refund it landed.
import express5 from 'express'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import type { HttpLimiterOptions, RouteOptions } from '../../packages/sluice/src/http/index.js'
import { createHttpLimiter } from '../../packages/sluice/src/http/index.js'
import { countedOf } from '../../packages/sluice/src/http/outcome-counting.js'
import { createLimiter, type Limiter } from '../../packages/sluice/src/limiter.js'
import type { Policy } from '../../packages/sluice/src/policy.js'
import type { Store } from '../../packages/sluice/src/store.js'
import { memcachedStore } from '../../packages/sluice/src/stores/memcached/index.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { redisStore } from '../../packages/sluice/src/stores/redis/index.js'
import { memcachedClient, freshPrefix as memcachedPrefix } from '../helpers/memcached-clients.js'
import { freshPostgresStore, postgresPool } from '../helpers/postgres-clients.js'
import { freshPrefix, ioredisCluster } from '../helpers/redis-clients.js'
import { startRedis } from '../helpers/redis-harness.js'
import { type App, abortHanging, expressHarness, harnesses, Refunds, remaining } from './outcome-apps.js'
import { call } from './servers.js'

const KEY = 'ip:127.0.0.1'

const POLICIES = {
  logins: { algorithm: 'fixed-window', limit: 3, window: '15m' },
  perIp: { algorithm: 'fixed-window', limit: 5, window: '1m' },
} as const satisfies Record<string, Policy>

const only401 = (status: number): boolean => status === 401

function memoryLimiter(refunds: Refunds) {
  return createLimiter({ policies: POLICIES, store: refunds.wrap(memoryStore()) })
}

type Options = Omit<HttpLimiterOptions, 'limiter'>

async function statuses(app: App, path: string, times: number): Promise<number[]> {
  const out: number[] = []
  for (let i = 0; i < times; i++) out.push((await call(app.target, path)).status)
  return out
}

for (const harness of harnesses) {
  describe(`countIf: ${harness.name}`, () => {
    let app: App | undefined
    afterEach(async () => {
      await app?.close()
      app = undefined
    })

    async function start(limiter: Limiter, options: Options, route?: RouteOptions): Promise<App> {
      app = await harness.start(createHttpLimiter({ limiter, headers: 'legacy', ...options }), route)
      return app
    }

    it('a login rule counting only 401s: successes give their unit back, failures keep it', async () => {
      const refunds = new Refunds()
      const limiter = memoryLimiter(refunds)
      const running = await start(limiter, { rules: [{ policy: 'logins', key: 'ip', countIf: only401 }] })
      for (let i = 1; i <= 5; i++) {
        const r = await call(running.target, '/ok')
        expect(r.status).toBe(200)
        expect(remaining(r)).toBe(2)
        await refunds.reach(i)
      }
      expect(await statuses(running, '/unauthorized', 4)).toEqual([401, 401, 401, 429])
      // Over its limit, the key is refused before the handler runs, though a 200 would not count.
      expect(await statuses(running, '/ok', 2)).toEqual([429, 429])
      expect(refunds.steps).toHaveLength(5)
      expect((await limiter.peek('logins', KEY)).remaining).toBe(0)
    })

    it('layered: gives back only on the rule whose countIf says no', async () => {
      const refunds = new Refunds()
      const limiter = memoryLimiter(refunds)
      const running = await start(limiter, {
        rules: [
          { policy: 'perIp', key: 'ip' },
          { policy: 'logins', key: 'ip', countIf: only401 },
        ],
      })
      for (let i = 1; i <= 4; i++) {
        expect((await call(running.target, '/ok')).status).toBe(200)
        await refunds.reach(i)
      }
      expect((await limiter.peek('perIp', KEY)).remaining).toBe(1)
      expect((await limiter.peek('logins', KEY)).remaining).toBe(3)
      expect(await statuses(running, '/unauthorized', 2)).toEqual([401, 429])
      // The refusal came from perIp: nothing of it is given back, on either rule.
      expect(refunds.steps.map((s) => s.policy.name)).toEqual(['logins', 'logins', 'logins', 'logins'])
      expect((await limiter.peek('logins', KEY)).remaining).toBe(2)
    })

    it('an aborted response is status 0 to countIf', async () => {
      const refunds = new Refunds()
      const limiter = memoryLimiter(refunds)
      const seen: number[] = []
      const running = await start(limiter, {
        rules: [
          {
            policy: 'logins',
            key: 'ip',
            countIf: (status) => {
              seen.push(status)
              return status >= 400
            },
          },
        ],
      })
      await abortHanging(running)
      await refunds.reach(1)
      expect(seen).toEqual([0])
      expect((await limiter.peek('logins', KEY)).remaining).toBe(3)
    })

    it("a route's own rule with countIf", async () => {
      const refunds = new Refunds()
      const limiter = memoryLimiter(refunds)
      const running = await start(
        limiter,
        { rules: [{ policy: 'perIp', key: 'ip' }] },
        { rules: [{ policy: 'logins', key: 'ip', countIf: (status) => status >= 500 }] },
      )
      expect((await call(running.target, '/ok')).status).toBe(200)
      await refunds.reach(1)
      expect((await call(running.target, '/fail')).status).toBe(500)
      expect((await limiter.peek('logins', KEY)).remaining).toBe(2)
      expect((await limiter.peek('perIp', KEY)).remaining).toBe(3)
    })
  })
}

describe('countIf', () => {
  it('on a real Redis store: only 401s count, and a key over its limit is refused (Express 5)', async () => {
    const server = await startRedis()
    const client = new Redis({ host: '127.0.0.1', port: server.port })
    const refunds = new Refunds()
    const limiter = createLimiter({
      policies: POLICIES,
      store: refunds.wrap(redisStore(client, { prefix: `countif-${process.pid}` })),
    })
    const app = await expressHarness('express 5', express5).start(
      createHttpLimiter({
        limiter,
        headers: 'legacy',
        rules: [
          { policy: 'perIp', key: 'ip' },
          { policy: 'logins', key: 'ip', countIf: only401 },
        ],
      }),
    )
    try {
      expect((await call(app.target, '/ok')).status).toBe(200)
      await refunds.reach(1)
      expect(await statuses(app, '/unauthorized', 3)).toEqual([401, 401, 401])
      // Refused by logins (perIp has a unit left), though a 200 would not have counted there.
      const refused = await call(app.target, '/ok')
      expect([refused.status, refused.headers['x-ratelimit-remaining']]).toEqual([429, '0'])
      expect((await limiter.peek('logins', KEY)).remaining).toBe(0)
      expect((await limiter.peek('perIp', KEY)).remaining).toBe(1)
      expect(refunds.steps.map((s) => [s.policy.name, s.key, s.cost])).toEqual([['logins', KEY, 1]])
    } finally {
      await app.close()
      client.disconnect()
      await server.stop()
    }
  })

  /** A layered login through the core on `store`: a 200 gives back on logins only, a 401 keeps both. */
  async function layeredOn(store: Store): Promise<unknown[]> {
    const refunds = new Refunds()
    const limiter = createLimiter({ policies: POLICIES, store: refunds.wrap(store) })
    const http = createHttpLimiter({
      limiter,
      rules: [
        { policy: 'perIp', key: 'ip' },
        { policy: 'logins', key: 'ip', countIf: only401 },
      ],
    })
    const request = {
      method: 'POST',
      route: '/login',
      path: '/login',
      remoteAddress: '127.0.0.1',
      header: () => undefined,
      raw: undefined,
    }
    countedOf(await http.check(request))?.ended(200, undefined, true)
    await refunds.reach(1)
    countedOf(await http.check(request))?.ended(401, undefined, true)
    return [
      (await limiter.peek('logins', KEY)).remaining,
      (await limiter.peek('perIp', KEY)).remaining,
      refunds.steps.map((s) => s.policy.name),
    ]
  }

  it('on Redis Cluster, PostgreSQL and memcached: gives back on the rule whose countIf says no', async () => {
    const cluster = ioredisCluster()
    const pool = postgresPool(2)
    const memcached = memcachedClient()
    try {
      const onCluster = redisStore(cluster, { prefix: freshPrefix('countif-cluster') })
      expect(await layeredOn(onCluster)).toEqual([2, 3, ['logins']])
      expect(await layeredOn(await freshPostgresStore(pool, 'countif'))).toEqual([2, 3, ['logins']])
      const onMemcached = memcachedStore(memcached, { prefix: memcachedPrefix('countif') })
      expect(await layeredOn(onMemcached)).toEqual([2, 3, ['logins']])
    } finally {
      cluster.disconnect()
      await pool.end()
      memcached.close()
    }
  })

  it('a countIf that throws is logged and the units stay spent', async () => {
    const refunds = new Refunds()
    const limiter = memoryLimiter(refunds)
    const errors: string[] = []
    const http = createHttpLimiter({
      limiter,
      logger: { warn() {}, error: (_details, message) => errors.push(message) },
      rules: [
        {
          policy: 'logins',
          key: 'ip',
          countIf: () => {
            throw new Error('broken')
          },
        },
      ],
    })
    const outcome = await http.check({
      method: 'POST',
      route: '/login',
      path: '/login',
      remoteAddress: '127.0.0.1',
      header: () => undefined,
      raw: undefined,
    })
    countedOf(outcome)?.ended(200, undefined, true)
    expect(errors).toEqual(['sluice: counting a response failed'])
    expect(refunds.steps).toHaveLength(0)
    expect((await limiter.peek('logins', KEY)).remaining).toBe(2)
  })

  it('refuses a countIf that is not a function, and countIf with the skip options on one route', () => {
    const limiter = createLimiter({ policies: POLICIES })
    const refusal = (make: () => unknown) => {
      try {
        make()
      } catch (error) {
        return { code: (error as { code?: unknown }).code, message: (error as Error).message }
      }
      throw new Error('nothing thrown')
    }
    expect(
      refusal(() =>
        createHttpLimiter({
          limiter,
          rules: [{ policy: 'logins', key: 'ip', countIf: [401] as unknown as () => boolean }],
        }),
      ),
    ).toEqual({
      code: 'SLUICE_INVALID_OPTIONS',
      message: expect.stringMatching(/^rules\[0\]\.countIf: a function \(status\) => boolean/),
    })
    expect(
      refusal(() =>
        createHttpLimiter({
          limiter,
          rules: [{ policy: 'logins', key: 'ip', countIf: only401 }],
          skipFailedRequests: true,
        }),
      ),
    ).toEqual({
      code: 'SLUICE_INVALID_OPTIONS',
      message: expect.stringMatching(/countIf.*skipFailedRequests/),
    })
    const http = createHttpLimiter({ limiter, rules: [{ policy: 'perIp', key: 'ip', countIf: only401 }] })
    expect(refusal(() => http.prepare({ skipSuccessfulRequests: true }, 'route /login'))).toEqual({
      code: 'SLUICE_INVALID_OPTIONS',
      message: expect.stringMatching(/^route \/login: .*countIf/),
    })
    // The skip options on a route whose rules have no countIf stay allowed.
    const plain = createHttpLimiter({ limiter, rules: [{ policy: 'perIp', key: 'ip' }] })
    expect(() =>
      plain.prepare({ skipSuccessfulRequests: true, rules: [{ policy: 'logins', key: 'ip' }] }, 'route /a'),
    ).not.toThrow()
  })
})
