// What clients see when the store fails (a real redis-server, stopped), through every adapter:
// a fail-closed policy answers 503 with Retry-After (or 429 when configured), a fail-open one passes.
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createHttpLimiter } from '../../packages/sluice/src/http/index.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { redisStore } from '../../packages/sluice/src/stores/redis/index.js'
import type { RedisServer } from '../helpers/redis-harness.js'
import { startRedis } from '../helpers/redis-harness.js'
import { adapters, call } from './servers.js'

let server: RedisServer
let client: Redis
let limiter: ReturnType<typeof makeLimiter>

function makeLimiter(redis: Redis) {
  return createLimiter({
    store: redisStore(redis, { prefix: `http-fail-${process.pid}` }),
    policies: {
      strict: { algorithm: 'fixed-window', limit: 100, window: '1m', onStoreError: 'closed' },
      lenient: { algorithm: 'fixed-window', limit: 100, window: '1m', onStoreError: 'open' },
    },
    // Generous enough that a loaded machine's Redis answers in time while it runs; the stopped
    // Redis fails fast (connection refused), so the down phase does not wait this long per call.
    storeTimeout: '250ms',
    logger: { warn() {} },
  })
}

const quiet = { warn() {}, error() {} }

beforeAll(async () => {
  server = await startRedis()
  client = new Redis({ host: '127.0.0.1', port: server.port, maxRetriesPerRequest: 1 })
  client.on('error', () => {})
  limiter = makeLimiter(client)
})
afterAll(async () => {
  client.disconnect()
  await server.stop()
})

describe('store failures over HTTP', () => {
  it('answers from Redis while it runs, then 503 / 429 / pass through every adapter once it stops', async () => {
    const closed503 = createHttpLimiter({ limiter, rules: [{ policy: 'strict', key: 'ip' }], logger: quiet })
    const closed429 = createHttpLimiter({
      limiter,
      rules: [{ policy: 'strict', key: 'ip' }],
      storeUnavailableStatus: 429,
      logger: quiet,
    })
    const problem = createHttpLimiter({
      limiter,
      rules: [{ policy: 'strict', key: 'ip' }],
      body: 'problem',
      logger: quiet,
    })
    const open = createHttpLimiter({ limiter, rules: [{ policy: 'lenient', key: 'ip' }], logger: quiet })
    const layered = createHttpLimiter({
      limiter,
      rules: [
        { policy: 'lenient', key: 'ip' },
        { policy: 'strict', key: 'global' },
      ],
      logger: quiet,
    })

    const running = []
    for (const adapter of adapters) {
      for (const [kind, http] of [
        ['503', closed503],
        ['429', closed429],
        ['problem', problem],
        ['open', open],
        ['layered', layered],
      ] as const) {
        running.push({ adapter: adapter.name, kind, app: await adapter.start(http, { port: 0 }) })
      }
    }
    try {
      // Redis answers: every app passes with rate-limit headers from the store.
      for (const r of running) {
        const reply = await call(r.app.target, '/hello')
        expect(reply.status, `${r.adapter} ${r.kind}`).toBe(200)
        expect(reply.headers['x-ratelimit-limit']).toBe('100')
      }
      await server.stop()
      for (const r of running) {
        const before = r.app.handled()
        const reply = await call(r.app.target, '/hello')
        const where = `${r.adapter} ${r.kind}`
        if (r.kind === 'open') {
          // Fail-open: degraded, admitted, the handler runs.
          expect(reply.status, where).toBe(200)
          expect(r.app.handled(), where).toBe(before + 1)
          continue
        }
        expect(r.app.handled(), where).toBe(before)
        const retryAfter = Number(reply.headers['retry-after'])
        expect(retryAfter, where).toBeGreaterThanOrEqual(1)
        const body = JSON.parse(reply.body) as Record<string, unknown>
        if (r.kind === 'problem') {
          expect(reply.status, where).toBe(503)
          expect(reply.headers['content-type'], where).toContain('application/problem+json')
          expect(body, where).toMatchObject({
            status: 503,
            title: 'Service Unavailable',
            reason: 'store_unavailable',
          })
          continue
        }
        expect(reply.status, where).toBe(r.kind === '429' ? 429 : 503)
        expect(reply.headers['content-type'], where).toContain('application/json')
        expect(body, where).toMatchObject({
          error: 'store_unavailable',
          retry_after: retryAfter,
          policy: 'strict',
        })
      }
    } finally {
      for (const r of running) await r.app.close()
    }
  })
})
