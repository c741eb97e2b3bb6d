// What the HTTP hot path answers: the core's one-layer check on the memory store, the Fastify and
// Express adapters over real sockets on the memory store and on a real Redis (where the adapters
// take the core's outcome from its own continuation of the store's promise). What the path costs,
// heap bytes and promises per request, is a budget of `npm run bench -- --check` (bench/budgets/).
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createHttpLimiter } from '../../packages/sluice/src/http/index.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { redisStore } from '../../packages/sluice/src/stores/redis/index.js'
import { type RedisServer, startRedis } from '../helpers/redis-harness.js'
import { adapters, call } from './servers.js'

const HEADERS = [
  'X-RateLimit-Limit',
  'X-RateLimit-Remaining',
  'X-RateLimit-Reset',
  'RateLimit-Policy',
  'RateLimit',
]
const LIMIT = 3

describe('HTTP core, memory store, one layer', () => {
  it('answers continue with every header of both families, and the numbers count down', () => {
    const limiter = createLimiter({
      policies: { perIp: { algorithm: 'fixed-window', limit: LIMIT, window: '1m' } },
    })
    const http = createHttpLimiter({ limiter, rules: [{ policy: 'perIp', key: 'ip' }] })
    const request = {
      method: 'GET',
      route: '/items/:id',
      path: '/items/1',
      remoteAddress: '127.0.0.1',
      header: () => undefined,
      raw: undefined,
    }
    for (let left = LIMIT - 1; left >= 0; left--) {
      const out = http.check(request)
      if (out instanceof Promise) throw new Error('the memory store answers synchronously')
      expect(out.action).toBe('continue')
      expect(Object.keys(out.headers)).toEqual(HEADERS)
      expect(out.headers['X-RateLimit-Remaining']).toBe(String(left))
    }
    const denied = http.check(request)
    if (denied instanceof Promise) throw new Error('the memory store answers synchronously')
    expect(denied.action).not.toBe('continue')
  })
})

const hotAdapters = adapters.filter((a) => a.name === 'fastify 5' || a.name === 'express 5')

describe('Fastify and Express over real sockets', () => {
  let redis: RedisServer
  let client: Redis
  beforeAll(async () => {
    redis = await startRedis()
    client = new Redis(redis.port, '127.0.0.1')
  })
  afterAll(async () => {
    client?.disconnect()
    await redis?.stop()
  })

  it('has the two adapters the hot path serves', () => {
    expect(hotAdapters.map((a) => a.name).sort()).toEqual(['express 5', 'fastify 5'])
  })

  for (const adapter of hotAdapters)
    for (const store of ['memory', 'redis'] as const)
      it(`${adapter.name} on ${store}: each request decided in turn, every header sent, then 429`, async () => {
        const limiter = createLimiter({
          // A slow call on a busy machine must not fall back: failover is not what this pins.
          ...(store === 'redis'
            ? { store: redisStore(client, { prefix: `hot-${adapter.name}` }), storeTimeout: '10s' }
            : {}),
          policies: { perIp: { algorithm: 'fixed-window', limit: LIMIT, window: '1m' } },
        })
        const http = createHttpLimiter({ limiter, rules: [{ policy: 'perIp', key: 'ip' }] })
        const running = await adapter.start(http, { port: 0 })
        try {
          for (let left = LIMIT - 1; left >= 0; left--) {
            const reply = await call(running.target, '/hello')
            expect(reply.status).toBe(200)
            for (const name of HEADERS) expect(reply.headers[name.toLowerCase()], name).toBeDefined()
            expect(reply.headers['x-ratelimit-remaining']).toBe(String(left))
          }
          const over = await call(running.target, '/hello')
          expect(over.status).toBe(429)
          expect(running.handled()).toBe(LIMIT)
        } finally {
          await running.close()
          await limiter.close()
        }
      })
})
