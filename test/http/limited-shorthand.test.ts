// The `message` and `statusCode` shorthands: the refusal's body and status without writing
// `onLimited`, for the whole limiter and per route, through every adapter's real server.
import { once } from 'node:events'
import { createServer } from 'node:http'
import express from 'express'
import Fastify from 'fastify'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import { sluice as sluiceExpress } from '../../packages/sluice/src/adapters/express.js'
import { sluice as sluiceFastify } from '../../packages/sluice/src/adapters/fastify.js'
import type { HttpLimiterOptions, RouteOptions } from '../../packages/sluice/src/http/index.js'
import { createHttpLimiter } from '../../packages/sluice/src/http/index.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { redisStore } from '../../packages/sluice/src/stores/redis/index.js'
import { startRedis } from '../helpers/redis-harness.js'
import { adapters, call, type Running } from './servers.js'

const policies = {
  one: { algorithm: 'fixed-window', limit: 1, window: '1m' },
  closed: { algorithm: 'fixed-window', limit: 1, window: '1m', onStoreError: 'closed' },
} as const

type Options = Omit<HttpLimiterOptions, 'limiter'>

function limiter() {
  return createLimiter({ policies })
}

/** The code and message of what `make` throws. */
function refusal(make: () => unknown): { code: unknown; message: string } {
  try {
    make()
  } catch (error) {
    return { code: (error as { code?: unknown }).code, message: (error as Error).message }
  }
  throw new Error('nothing thrown')
}

for (const adapter of adapters) {
  describe(`message and statusCode: ${adapter.name}`, () => {
    let running: Running | undefined
    afterEach(async () => {
      await running?.close()
      running = undefined
    })

    async function secondReply(options: Options, path = '/hello') {
      const http = createHttpLimiter({ limiter: limiter(), ...options })
      running = await adapter.start(http, { port: 0 })
      const first = await call(running.target, path)
      expect(first.status).toBe(200)
      return call(running.target, path)
    }

    it('sends a string message as text/plain, with the rate-limit headers', async () => {
      const r = await secondReply({
        rules: [{ policy: 'one', key: 'ip' }],
        message: 'Too many requests, please try again later.',
      })
      expect(r.status).toBe(429)
      expect(r.headers['content-type']).toMatch(/^text\/plain; charset=utf-8/)
      expect(r.body).toBe('Too many requests, please try again later.')
      expect(r.headers['retry-after']).toBe('60')
      expect(r.headers['ratelimit-policy']).toBe('"one";q=1;w=60')
    })

    it('sends an object message as JSON with the given status', async () => {
      const r = await secondReply({
        rules: [{ policy: 'one', key: 'ip' }],
        message: { error: 'slow down', docs: 'https://example.com/limits' },
        statusCode: 503,
      })
      expect(r.status).toBe(503)
      expect(r.headers['content-type']).toMatch(/^application\/json/)
      expect(JSON.parse(r.body)).toEqual({ error: 'slow down', docs: 'https://example.com/limits' })
      expect(r.headers['retry-after']).toBe('60')
    })

    it('takes a route entry over the limiter-wide shorthand, field by field', async () => {
      const r = await secondReply({
        rules: [{ policy: 'one', key: 'ip' }],
        message: 'everywhere',
        statusCode: 420,
        routes: { 'GET /users/:id': { message: 'users only' } },
      })
      expect(r.status).toBe(420)
      const user = await secondReply(
        {
          rules: [{ policy: 'one', key: 'ip' }],
          message: 'everywhere',
          statusCode: 420,
          routes: { 'GET /users/:id': { message: 'users only' } },
        },
        '/users/7',
      )
      expect(r.body).toBe('everywhere')
      expect(user.status).toBe(420)
      expect(user.body).toBe('users only')
    })
  })
}

describe('message and statusCode', () => {
  it('leave a refusal for an unavailable store as it is (a real redis-server, stopped)', async () => {
    const server = await startRedis()
    const client = new Redis({ host: '127.0.0.1', port: server.port, maxRetriesPerRequest: 1 })
    client.on('error', () => {})
    try {
      const http = createHttpLimiter({
        limiter: createLimiter({
          store: redisStore(client, { prefix: `shorthand-${process.pid}` }),
          policies,
          storeTimeout: '250ms',
          logger: { warn() {} },
        }),
        rules: [{ policy: 'closed', key: 'ip' }],
        message: 'Too many requests',
        statusCode: 420,
        logger: { warn() {}, error() {} },
      })
      const request = {
        method: 'GET',
        route: '/hello',
        path: '/hello',
        remoteAddress: '127.0.0.1',
        header: () => undefined,
        raw: undefined,
      }
      expect((await http.check(request)).action).toBe('continue')
      const limited = await http.check(request)
      expect(limited).toMatchObject({ action: 'respond', status: 420, body: 'Too many requests' })
      await server.stop()
      // Another client: the limiter's deny cache still answers the first one without the store.
      const unavailable = await http.check({ ...request, remoteAddress: '127.0.0.2' })
      expect(unavailable).toMatchObject({ action: 'respond', status: 503 })
      expect(JSON.parse((unavailable as { body: string }).body)).toMatchObject({ error: 'store_unavailable' })
    } finally {
      client.disconnect()
      await server.stop()
    }
  })

  it('apply to route options given to the Express adapter', async () => {
    const app = express()
    const limit = sluiceExpress({ limiter: limiter(), rules: [{ policy: 'one', key: 'ip' }] })
    app.get(
      '/reports',
      limit.route({ message: { error: 'reports are limited' }, statusCode: 403 }),
      (_q, s) => s.send('ok'),
    )
    const server = createServer(app).listen(0, '127.0.0.1')
    await once(server, 'listening')
    try {
      const address = server.address() as { port: number }
      expect((await call({ port: address.port }, '/reports')).status).toBe(200)
      const r = await call({ port: address.port }, '/reports')
      expect(r.status).toBe(403)
      expect(JSON.parse(r.body)).toEqual({ error: 'reports are limited' })
    } finally {
      server.closeAllConnections()
      server.close()
    }
  })

  it('apply to a Fastify route config', async () => {
    const app = Fastify()
    await app.register(sluiceFastify, { limiter: limiter(), rules: [{ policy: 'one', key: 'ip' }] })
    app.get(
      '/reports',
      { config: { sluice: { message: 'reports are limited', statusCode: 403 } } },
      () => 'ok',
    )
    await app.listen({ port: 0, host: '127.0.0.1' })
    try {
      const address = app.server.address() as { port: number }
      expect((await call({ port: address.port }, '/reports')).status).toBe(200)
      const r = await call({ port: address.port }, '/reports')
      expect(r.status).toBe(403)
      expect(r.headers['content-type']).toMatch(/^text\/plain/)
      expect(r.body).toBe('reports are limited')
    } finally {
      await app.close()
    }
  })

  it('with onLimited are refused at creation, limiter-wide and per route', () => {
    const onLimited = () => undefined
    const both = refusal(() => createHttpLimiter({ limiter: limiter(), rules: [], message: 'no', onLimited }))
    expect(both.code).toBe('SLUICE_INVALID_OPTIONS')
    expect(both.message).toMatch(/^createHttpLimiter: message and onLimited both set the refusal/)
    const status = refusal(() =>
      createHttpLimiter({ limiter: limiter(), rules: [], statusCode: 503, onLimited }),
    )
    expect(status.code).toBe('SLUICE_INVALID_OPTIONS')
    expect(status.message).toMatch(/^createHttpLimiter: statusCode and onLimited both set the refusal/)
    const route = refusal(() =>
      createHttpLimiter({ limiter: limiter(), rules: [], onLimited, routes: { '/a': { message: 'no' } } }),
    )
    expect(route.code).toBe('SLUICE_INVALID_OPTIONS')
    expect(route.message).toMatch(/^routes\[\/a\]: message and onLimited both set/)
    const http = createHttpLimiter({ limiter: limiter(), rules: [], onLimited })
    const prepared = refusal(() => http.prepare({ statusCode: 503 }, 'my route'))
    expect(prepared.code).toBe('SLUICE_INVALID_OPTIONS')
    expect(prepared.message).toMatch(/^my route: statusCode and onLimited both set/)
  })

  it('refuse a status that is not an error status and a message that is not text or an object', () => {
    for (const statusCode of [200, 399, 600, 429.5, '429', Number.NaN]) {
      const r = refusal(() =>
        createHttpLimiter({ limiter: limiter(), rules: [], statusCode: statusCode as number }),
      )
      expect(r.code, String(statusCode)).toBe('SLUICE_INVALID_OPTIONS')
      expect(r.message).toMatch(/statusCode/)
    }
    const cyclic: Record<string, unknown> = {}
    cyclic.self = cyclic
    for (const message of [42, null, () => 'x', cyclic, 10n]) {
      const r = refusal(() =>
        createHttpLimiter({ limiter: limiter(), rules: [], message: message as unknown as string }),
      )
      expect(r.code, String(message)).toBe('SLUICE_INVALID_OPTIONS')
      expect(r.message).toMatch(/message/)
    }
    const route = refusal(() =>
      createHttpLimiter({
        limiter: limiter(),
        rules: [],
        routes: { '/a': { statusCode: 200 } satisfies RouteOptions },
      }),
    )
    expect(route.message).toMatch(/routes\[\/a\]\.statusCode/)
  })

  it('are known to the spelling check', () => {
    const r = refusal(() =>
      createHttpLimiter({ limiter: limiter(), rules: [], mesage: 'x' } as unknown as HttpLimiterOptions),
    )
    expect(r.message).toMatch(/did you mean 'message'/)
    const route = refusal(() =>
      createHttpLimiter({
        limiter: limiter(),
        rules: [],
        routes: { '/a': { statusCod: 503 } as unknown as RouteOptions },
      }),
    )
    expect(route.message).toMatch(/did you mean 'statusCode'/)
  })
})
