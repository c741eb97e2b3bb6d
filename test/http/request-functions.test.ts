// A rule's policy and a rule's or route's cost as functions of the request (sync or async), the way
// express-rate-limit's `limit: (req) => ...` is written, through real Express and Fastify servers:
// the chosen policy and cost are what the store is charged, and a function's bad answer is a typed
// error at request time (logged, a 500 or a pass with onError: 'open') that charges nothing.
import { once } from 'node:events'
import { createServer } from 'node:http'
import express from 'express'
import Fastify from 'fastify'
import { afterEach, describe, expect, it } from 'vitest'
import { sluice as sluiceExpress } from '../../packages/sluice/src/adapters/express.js'
import { sluice as sluiceFastify } from '../../packages/sluice/src/adapters/fastify.js'
import type { HttpLimiterOptions, RouteOptions } from '../../packages/sluice/src/http/index.js'
import { createHttpLimiter } from '../../packages/sluice/src/http/index.js'
import { createLimiter, type Limiter } from '../../packages/sluice/src/limiter.js'
import { call, type Reply } from './servers.js'

const policies = {
  free: { algorithm: 'fixed-window', limit: 1, window: '1m' },
  premium: { algorithm: 'fixed-window', limit: 3, window: '1m' },
  units: { algorithm: 'fixed-window', limit: 10, window: '1m' },
} as const

type Options = Omit<HttpLimiterOptions, 'limiter'>
type Target = { port: number }

/** Errors logged through the core's logger: their codes. */
function capture() {
  const codes: unknown[] = []
  return {
    codes,
    logger: {
      warn: () => {},
      error: (details: object) => codes.push((details as { err?: { code?: unknown } }).err?.code),
    },
  }
}

let cleanup: (() => Promise<void>)[] = []
afterEach(async () => {
  for (const close of cleanup) await close()
  cleanup = []
})

/** GET /hello, and POST /items whose route cost is `routeCost` (Express route middleware, Fastify route config). */
const frameworks: {
  name: string
  start(limiter: Limiter, options: Options, routeCost: RouteOptions['cost']): Promise<Target>
}[] = [
  {
    name: 'express 5',
    async start(limiter, options, routeCost) {
      const limit = sluiceExpress(createHttpLimiter({ limiter, ...options }))
      const app = express()
      app.get('/hello', limit, (_req, res) => {
        res.send('hello')
      })
      app.post('/items', limit.route({ cost: routeCost ?? 1 }), (_req, res) => {
        res.send('ok')
      })
      const server = createServer(app)
      server.listen(0, '127.0.0.1')
      await once(server, 'listening')
      cleanup.push(async () => {
        server.closeAllConnections()
        await new Promise<void>((resolve) => server.close(() => resolve()))
      })
      const address = server.address()
      return { port: typeof address === 'object' && address !== null ? address.port : 0 }
    },
  },
  {
    name: 'fastify 5',
    async start(limiter, options, routeCost) {
      const app = Fastify()
      await app.register(sluiceFastify, { limiter, ...options })
      app.get('/hello', async () => 'hello')
      app.post('/items', { config: { sluice: { cost: routeCost ?? 1 } } }, async () => 'ok')
      await app.listen({ port: 0, host: '127.0.0.1' })
      cleanup.push(async () => {
        app.server.closeAllConnections()
        await app.close()
      })
      const address = app.server.address()
      return { port: typeof address === 'object' && address !== null ? address.port : 0 }
    },
  },
]

const plan = (name: string) => ({ headers: { 'x-plan': name } })
const items = (count: string, path = '/hello') => ({
  method: path === '/items' ? 'POST' : 'GET',
  headers: { 'x-items': count },
})

async function statuses(target: Target, times: number, path: string, init?: Parameters<typeof call>[2]) {
  const out: number[] = []
  for (let i = 0; i < times; i++) out.push((await call(target, path, init)).status)
  return out
}

for (const framework of frameworks) {
  describe(`limit and cost as functions of the request: ${framework.name}`, () => {
    async function start(options: Options, routeCost?: RouteOptions['cost']) {
      const limiter = createLimiter({ policies })
      return { limiter, target: await framework.start(limiter, options, routeCost) }
    }

    for (const mode of ['sync', 'async'] as const) {
      const answer = <T>(value: T): T | Promise<T> => (mode === 'sync' ? value : Promise.resolve(value))

      it(`${mode}: a rule's policy chosen per request sets that request's limit`, async () => {
        const { target } = await start({
          rules: [
            {
              policy: (req) => answer(req.header('x-plan') === 'premium' ? 'premium' : 'free'),
              key: (req) => req.header('x-user'),
            },
          ],
        })
        const premium = { headers: { 'x-plan': 'premium', 'x-user': 'p' } }
        const free = { headers: { 'x-plan': 'free', 'x-user': 'f' } }
        const first: Reply = await call(target, '/hello', premium)
        expect(first.headers['x-ratelimit-limit']).toBe('3')
        expect(await statuses(target, 3, '/hello', premium)).toEqual([200, 200, 429])
        expect((await call(target, '/hello', free)).headers['x-ratelimit-limit']).toBe('1')
        expect((await call(target, '/hello', free)).status).toBe(429)
      })

      it(`${mode}: a policy function may answer null: no limit on that layer for the request`, async () => {
        const { target } = await start({
          rules: [{ policy: (req) => answer(req.header('x-plan') === 'staff' ? null : 'free'), key: 'ip' }],
        })
        expect(await statuses(target, 3, '/hello', plan('staff'))).toEqual([200, 200, 200])
        expect(await statuses(target, 2, '/hello', plan('free'))).toEqual([200, 429])
      })

      it(`${mode}: a rule's cost from the request is what the layer is charged`, async () => {
        const { target, limiter } = await start({
          rules: [{ policy: 'units', key: 'ip', cost: (req) => answer(Number(req.header('x-items'))) }],
        })
        const r = await call(target, '/hello', items('4'))
        expect(r.status).toBe(200)
        expect(r.headers['x-ratelimit-remaining']).toBe('6')
        expect((await call(target, '/hello', items('4'))).headers['x-ratelimit-remaining']).toBe('2')
        expect((await call(target, '/hello', items('3'))).status).toBe(429)
        expect((await limiter.peek('units', 'ip:127.0.0.1')).remaining).toBe(2)
      })

      it(`${mode}: a route's cost from the request (adapter route options) is charged on its layers`, async () => {
        const { target } = await start({ rules: [{ policy: 'units', key: 'ip' }] }, (req) =>
          answer(Number(req.header('x-items'))),
        )
        const r = await call(target, '/items', items('7', '/items'))
        expect(r.status).toBe(200)
        expect(r.headers['x-ratelimit-remaining']).toBe('3')
        expect((await call(target, '/items', items('4', '/items'))).status).toBe(429)
        expect((await call(target, '/hello')).headers['x-ratelimit-remaining']).toBe('2')
      })

      it(`${mode}: a bad cost is SLUICE_INVALID_COST at request time: logged, a 500, nothing charged`, async () => {
        const { logger, codes } = capture()
        const { target, limiter } = await start({
          logger,
          rules: [
            { policy: 'units', key: 'ip', cost: (req) => answer(JSON.parse(req.header('x-items') ?? '1')) },
          ],
        })
        for (const bad of ['0', '-2', '1.5', '1e400', '"3"', 'null']) {
          const r = await call(target, '/hello', items(bad))
          expect(r.status, bad).toBe(500)
        }
        expect(codes).toEqual(Array(6).fill('SLUICE_INVALID_COST'))
        expect((await limiter.peek('units', 'ip:127.0.0.1')).remaining).toBe(10)
      })

      it(`${mode}: an unknown policy name is SLUICE_UNKNOWN_POLICY at request time; onError: 'open' lets it pass`, async () => {
        const { logger, codes } = capture()
        const { target } = await start({
          logger,
          onError: 'open',
          rules: [{ policy: () => answer('platinum'), key: 'ip' }],
        })
        expect(await statuses(target, 2, '/hello')).toEqual([200, 200])
        expect(codes).toEqual(['SLUICE_UNKNOWN_POLICY', 'SLUICE_UNKNOWN_POLICY'])
      })
    }

    it('a policy and a cost function that both reject fail the request once, with no unhandled rejection', async () => {
      const { logger, codes } = capture()
      const { target, limiter } = await start({
        logger,
        rules: [
          {
            policy: () => Promise.reject(Object.assign(new Error('plans down'), { code: 'PLANS' })),
            key: 'ip',
            cost: () => Promise.reject(Object.assign(new Error('items down'), { code: 'ITEMS' })),
          },
          { policy: 'units', key: 'ip', cost: () => 2 },
        ],
      })
      expect((await call(target, '/hello')).status).toBe(500)
      expect(codes).toEqual(['PLANS'])
      expect((await limiter.peek('units', 'ip:127.0.0.1')).remaining).toBe(10)
    })
  })
}

describe('limit and cost functions at construction', () => {
  const limiter = createLimiter({ policies })

  it('takes a policy function without tiers and cost functions on rules and routes', () => {
    expect(() =>
      createHttpLimiter({
        limiter,
        rules: [{ policy: () => 'free', key: 'ip', cost: () => 2 }],
        routes: { 'POST /items': { cost: async () => 3 } },
      }),
    ).not.toThrow()
  })

  it('refuses a cost that is neither a whole number nor a function', () => {
    const options = (cost: unknown) => ({ limiter, rules: [{ policy: 'units', key: 'ip', cost }] })
    for (const cost of ['2', 0, 1.5, null])
      expect(() => createHttpLimiter(options(cost) as HttpLimiterOptions), String(cost)).toThrow(
        expect.objectContaining({ code: 'SLUICE_INVALID_OPTIONS' }),
      )
    expect(() =>
      createHttpLimiter({ limiter, rules: [], routes: { '/x': { cost: 'many' as unknown as number } } }),
    ).toThrow(expect.objectContaining({ code: 'SLUICE_INVALID_OPTIONS' }))
  })
})
