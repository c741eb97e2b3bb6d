// skipFailedRequests / skipSuccessfulRequests / requestWasSuccessful through every adapter's real
// server: a request is counted when it arrives, and its units are given back (the store's refund)
// once its response turns out to be of the skipped kind. The tests wait for each refund to reach the
// store before the next request, so an answer never depends on which side of a refund it landed.
import express5 from 'express'
import { Hono } from 'hono'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import { sluice as sluiceHono } from '../../packages/sluice/src/adapters/hono.js'
import type { HttpLimiterOptions, RouteOptions } from '../../packages/sluice/src/http/index.js'
import { createHttpLimiter } from '../../packages/sluice/src/http/index.js'
import { countedOf } from '../../packages/sluice/src/http/outcome-counting.js'
import { createLimiter, type Limiter } from '../../packages/sluice/src/limiter.js'
import type { Policy } from '../../packages/sluice/src/policy.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { redisStore } from '../../packages/sluice/src/stores/redis/index.js'
import { startRedis } from '../helpers/redis-harness.js'
import { type App, abortHanging, expressHarness, harnesses, Refunds, remaining } from './outcome-apps.js'
import { call } from './servers.js'

const KEY = 'ip:127.0.0.1'

const POLICIES = {
  three: { algorithm: 'fixed-window', limit: 3, window: '1m' },
  five: { algorithm: 'fixed-window', limit: 5, window: '1m' },
} as const satisfies Record<string, Policy>

/** A limiter over the memory store whose refunds `refunds` sees. */
function memoryLimiter(refunds: Refunds) {
  return createLimiter({ policies: POLICIES, store: refunds.wrap(memoryStore()) })
}

type Options = Omit<HttpLimiterOptions, 'limiter'>

for (const harness of harnesses) {
  describe(`skipped outcomes: ${harness.name}`, () => {
    let app: App | undefined
    afterEach(async () => {
      await app?.close()
      app = undefined
    })

    async function start(limiter: Limiter, options: Options, route?: RouteOptions): Promise<App> {
      const http = createHttpLimiter({ limiter, headers: 'legacy', ...options })
      app = await harness.start(http, route)
      return app
    }

    it('skipFailedRequests: 500s and 404s give their unit back, 200s keep it', async () => {
      const refunds = new Refunds()
      const { target } = await start(memoryLimiter(refunds), {
        rules: [{ policy: 'three', key: 'ip' }],
        skipFailedRequests: true,
      })
      for (let i = 1; i <= 4; i++) {
        const r = await call(target, '/fail')
        expect(r.status).toBe(500)
        expect(remaining(r)).toBe(2)
        await refunds.reach(i)
      }
      for (let i = 1; i <= 2; i++) {
        expect((await call(target, '/missing')).status).toBe(404)
        await refunds.reach(4 + i)
      }
      const statuses = []
      for (let i = 0; i < 4; i++) statuses.push((await call(target, '/ok')).status)
      expect(statuses).toEqual([200, 200, 200, 429])
      expect(refunds.steps).toHaveLength(6)
      expect(refunds.steps.map((s) => [s.policy.name, s.key, s.cost])).toEqual(
        Array.from({ length: 6 }, () => ['three', KEY, 1]),
      )
    })

    it('skipSuccessfulRequests: 200s give their unit back; failures and refusals do not', async () => {
      const refunds = new Refunds()
      const limiter = memoryLimiter(refunds)
      const { target } = await start(limiter, {
        rules: [{ policy: 'three', key: 'ip' }],
        skipSuccessfulRequests: true,
      })
      for (let i = 1; i <= 5; i++) {
        expect((await call(target, '/ok')).status).toBe(200)
        await refunds.reach(i)
      }
      const statuses = []
      for (let i = 0; i < 5; i++) statuses.push((await call(target, '/fail')).status)
      expect(statuses).toEqual([500, 500, 500, 429, 429])
      expect(refunds.steps).toHaveLength(5)
      expect((await limiter.peek('three', KEY)).remaining).toBe(0)
    })

    it('requestWasSuccessful decides, and may answer with a promise', async () => {
      const refunds = new Refunds()
      const seen: [string | undefined, number][] = []
      const { target } = await start(memoryLimiter(refunds), {
        rules: [{ policy: 'three', key: 'ip' }],
        skipFailedRequests: true,
        // A 404 is the client's answer, not a failure of ours.
        requestWasSuccessful: async (request, response) => {
          seen.push([request.route, response.statusCode])
          return response.statusCode < 500
        },
      })
      for (let i = 1; i <= 2; i++) {
        expect((await call(target, '/fail')).status).toBe(500)
        await refunds.reach(i)
      }
      const statuses = []
      for (let i = 0; i < 4; i++) statuses.push((await call(target, '/missing')).status)
      expect(statuses).toEqual([404, 404, 404, 429])
      // Asked once per admitted request, never for the refusal.
      expect(seen).toEqual([
        ['/fail', 500],
        ['/fail', 500],
        ['/missing', 404],
        ['/missing', 404],
        ['/missing', 404],
      ])
      expect(refunds.steps).toHaveLength(2)
    })

    it('counts a response the client aborted as failed', async () => {
      const refunds = new Refunds()
      const limiter = memoryLimiter(refunds)
      const running = await start(limiter, {
        rules: [{ policy: 'three', key: 'ip' }],
        skipFailedRequests: true,
      })
      await abortHanging(running)
      await refunds.reach(1)
      expect((await limiter.peek('three', KEY)).remaining).toBe(3)
      expect(remaining(await call(running.target, '/ok'))).toBe(2)
    })

    it('gives back on every layer the request was charged on', async () => {
      const refunds = new Refunds()
      const limiter = memoryLimiter(refunds)
      const { target } = await start(limiter, {
        rules: [
          { policy: 'three', key: 'ip' },
          { policy: 'five', key: 'ip', cost: 2 },
        ],
        skipFailedRequests: true,
      })
      expect((await call(target, '/ok')).status).toBe(200)
      for (let i = 1; i <= 3; i++) {
        expect((await call(target, '/fail')).status).toBe(500)
        await refunds.reach(2 * i)
      }
      expect((await limiter.peek('three', KEY)).remaining).toBe(2)
      expect((await limiter.peek('five', KEY)).remaining).toBe(3)
      expect(refunds.steps.map((s) => [s.policy.name, s.cost]).sort()).toEqual([
        ['five', 2],
        ['five', 2],
        ['five', 2],
        ['three', 1],
        ['three', 1],
        ['three', 1],
      ])
    })

    it('never gives back for a request that was itself refused', async () => {
      const refunds = new Refunds()
      const limiter = memoryLimiter(refunds)
      const { target } = await start(limiter, {
        rules: [{ policy: 'three', key: 'ip' }],
        skipFailedRequests: true,
      })
      for (let i = 0; i < 3; i++) expect((await call(target, '/ok')).status).toBe(200)
      // Refused (429, a failed response): nothing was charged, so nothing is given back.
      for (let i = 0; i < 3; i++) expect((await call(target, '/ok')).status).toBe(429)
      // A refund, had there been one, lands before this one: the failure's own.
      expect((await call(target, '/fail')).status).toBe(429)
      expect(refunds.steps).toHaveLength(0)
      expect((await limiter.peek('three', KEY)).remaining).toBe(0)
    })

    it('takes the options per route, over the limiter-wide ones', async () => {
      const refunds = new Refunds()
      const limiter = memoryLimiter(refunds)
      const { target } = await start(
        limiter,
        { rules: [{ policy: 'three', key: 'ip' }], skipSuccessfulRequests: true },
        { skipSuccessfulRequests: false, skipFailedRequests: true },
      )
      for (let i = 1; i <= 4; i++) {
        expect((await call(target, '/fail')).status).toBe(500)
        await refunds.reach(i)
      }
      const statuses = []
      for (let i = 0; i < 4; i++) statuses.push((await call(target, '/ok')).status)
      expect(statuses).toEqual([200, 200, 200, 429])
      expect(refunds.steps).toHaveLength(4)
    })
  })
}

describe('skipped outcomes', () => {
  it('on a real Redis store: failures on both layers given back (Express 5)', async () => {
    const server = await startRedis()
    const client = new Redis({ host: '127.0.0.1', port: server.port })
    const refunds = new Refunds()
    const limiter = createLimiter({
      policies: POLICIES,
      store: refunds.wrap(redisStore(client, { prefix: `skip-${process.pid}` })),
    })
    const app = await expressHarness('express 5', express5).start(
      createHttpLimiter({
        limiter,
        headers: 'legacy',
        rules: [
          { policy: 'three', key: 'ip' },
          { policy: 'five', key: 'ip', cost: 2 },
        ],
        skipFailedRequests: true,
      }),
    )
    try {
      const headline: number[] = []
      for (let i = 1; i <= 4; i++) {
        const r = await call(app.target, '/fail')
        expect(r.status).toBe(500)
        headline.push(remaining(r))
        await refunds.reach(2 * i)
      }
      // Each answer saw the same budget: the one before it was given back first.
      expect(new Set(headline).size).toBe(1)
      await abortHanging(app)
      await refunds.reach(10)
      const statuses = []
      for (let i = 0; i < 3; i++) statuses.push((await call(app.target, '/ok')).status)
      expect(statuses).toEqual([200, 200, 429])
      expect((await limiter.peek('three', KEY)).remaining).toBe(1)
      expect((await limiter.peek('five', KEY)).remaining).toBe(1)
    } finally {
      await app.close()
      client.disconnect()
      await server.stop()
    }
  })

  it("takes a core `routes` entry's options, and adapter route options over them", async () => {
    const refunds = new Refunds()
    const limiter = memoryLimiter(refunds)
    const http = createHttpLimiter({
      limiter,
      rules: [{ policy: 'three', key: 'ip' }],
      routes: { 'GET /fail': { skipFailedRequests: true } },
    })
    const request = (route: string) => ({
      method: 'GET',
      route,
      path: route,
      remoteAddress: '127.0.0.1',
      header: () => undefined,
      raw: undefined,
    })
    const fail = await http.check(request('/fail'))
    const ok = await http.check(request('/ok'))
    // The adapter's options on top of the entry: this route gives back successes only.
    const merged = await http.check(request('/fail'), {
      skipFailedRequests: false,
      skipSuccessfulRequests: true,
    })
    expect(countedOf(ok)).toBeUndefined()
    countedOf(fail)?.ended(500, undefined, true)
    await refunds.reach(1)
    countedOf(merged)?.ended(500, undefined, true)
    countedOf(merged)?.ended(200, undefined, true)
    expect(countedOf(merged)).toBeDefined()
    expect((await limiter.peek('three', KEY)).remaining).toBe(1)
    expect(refunds.steps).toHaveLength(1)
  })

  it('Hono off @hono/node-server (app.request): counted once the handler has answered', async () => {
    const refunds = new Refunds()
    const limiter = memoryLimiter(refunds)
    const app = new Hono()
    const limit = sluiceHono(
      createHttpLimiter({ limiter, rules: [{ policy: 'three', key: 'ip' }], skipFailedRequests: true }),
      { remoteAddress: () => '127.0.0.1' },
    )
    app.get('/ok', limit, (c) => c.text('ok'))
    app.get('/fail', limit, (c) => c.text('fail', 500))
    for (let i = 1; i <= 4; i++) {
      expect((await app.request('/fail')).status).toBe(500)
      await refunds.reach(i)
    }
    const statuses = []
    for (let i = 0; i < 4; i++) statuses.push((await app.request('/ok')).status)
    expect(statuses).toEqual([200, 200, 200, 429])
  })

  it('in shadow mode, gives nothing back for a request that would have been refused', async () => {
    const refunds = new Refunds()
    const limiter = memoryLimiter(refunds)
    const seen: number[] = []
    const app = await expressHarness('express 5', express5).start(
      createHttpLimiter({
        limiter,
        rules: [{ policy: 'three', key: 'ip' }],
        shadow: true,
        logger: { warn() {}, error() {} },
        skipFailedRequests: true,
        requestWasSuccessful: (_request, response) => {
          seen.push(response.statusCode)
          return response.statusCode < 400
        },
      }),
    )
    try {
      for (let i = 0; i < 3; i++) expect((await call(app.target, '/ok')).status).toBe(200)
      // Over the limit: passed by shadow mode, but nothing was charged.
      expect((await call(app.target, '/fail')).status).toBe(500)
      expect((await call(app.target, '/ok')).status).toBe(200)
      expect(seen).toEqual([200, 200, 200])
      expect(refunds.steps).toHaveLength(0)
      expect((await limiter.peek('three', KEY)).remaining).toBe(0)
    } finally {
      await app.close()
    }
  })

  it("gives nothing back once the request's units have expired (its reset has passed)", async () => {
    const refunds = new Refunds()
    const limiter = memoryLimiter(refunds)
    let clock = Date.now()
    let decided = 0
    const app = await expressHarness('express 5', express5).start(
      createHttpLimiter({
        limiter,
        rules: [{ policy: 'three', key: 'ip' }],
        now: () => clock,
        skipFailedRequests: true,
        requestWasSuccessful: (_request, response) => {
          decided++
          // The slow ones end after their window (1 minute) has closed.
          if (decided > 1) clock += 61_000
          return response.statusCode < 400
        },
      }),
    )
    try {
      expect((await call(app.target, '/fail')).status).toBe(500)
      await refunds.reach(1)
      expect((await call(app.target, '/fail')).status).toBe(500)
      expect((await call(app.target, '/fail')).status).toBe(500)
      expect(decided).toBe(3)
      expect(refunds.steps).toHaveLength(1)
      expect((await limiter.peek('three', KEY)).remaining).toBe(1)
    } finally {
      await app.close()
    }
  })

  it('refuses options of the wrong type, limiter-wide and per route', () => {
    const limiter = createLimiter({ policies: POLICIES })
    const rules = [{ policy: 'three', key: 'ip' }] as const
    const refusal = (make: () => unknown) => {
      try {
        make()
      } catch (error) {
        return { code: (error as { code?: unknown }).code, message: (error as Error).message }
      }
      throw new Error('nothing thrown')
    }
    expect(
      refusal(() => createHttpLimiter({ limiter, rules, skipFailedRequests: 'yes' as unknown as boolean })),
    ).toEqual({
      code: 'SLUICE_INVALID_OPTIONS',
      message: expect.stringMatching(/^createHttpLimiter\.skipFailedRequests: true or false$/),
    })
    expect(
      refusal(() =>
        createHttpLimiter({
          limiter,
          rules,
          skipSuccessfulRequests: true,
          requestWasSuccessful: 400 as unknown as () => boolean,
        }),
      ),
    ).toEqual({
      code: 'SLUICE_INVALID_OPTIONS',
      message: expect.stringMatching(/requestWasSuccessful: a function \(request, response\)/),
    })
    const http = createHttpLimiter({ limiter, rules })
    expect(
      refusal(() => http.prepare({ skipSuccessfulRequests: 1 as unknown as boolean }, 'route /a')),
    ).toEqual({
      code: 'SLUICE_INVALID_OPTIONS',
      message: expect.stringMatching(/^route \/a\.skipSuccessfulRequests: true or false$/),
    })
    expect(
      refusal(() => createHttpLimiter({ limiter, rules, skipFailedRequest: true } as HttpLimiterOptions)),
    ).toMatchObject({ code: 'SLUICE_INVALID_OPTIONS', message: expect.stringMatching(/skipFailedRequests/) })
  })
})
