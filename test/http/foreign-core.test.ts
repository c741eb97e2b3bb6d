// The adapters take any object with the core's public shape ({ options, prepare, check }), not only
// Sluice's own core (which also has the internal `[checkInto]` the adapters prefer): such a core
// answering directly or with a promise gives the same responses, through every adapter.
import { describe, expect, it } from 'vitest'
import { createHttpLimiter, type HttpLimiter } from '../../packages/sluice/src/http/index.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { adapters, call } from './servers.js'

function core(limit: number): HttpLimiter {
  const limiter = createLimiter({
    policies: { perIp: { algorithm: 'fixed-window', limit, window: '1m' } },
  })
  return createHttpLimiter({ limiter, rules: [{ policy: 'perIp', key: 'ip' }] })
}

/** Only the public members: what a wrapper written by a user would pass. */
function foreign(inner: HttpLimiter, waits: boolean): HttpLimiter {
  return {
    options: inner.options,
    prepare: (routeOptions, where) => inner.prepare(routeOptions, where),
    check: (request, routeOptions) => {
      const outcome = inner.check(request, routeOptions)
      return waits ? Promise.resolve(outcome) : outcome
    },
  }
}

describe('a core with only the public members', () => {
  for (const adapter of adapters)
    for (const waits of [false, true])
      it(`${adapter.name}, check ${waits ? 'returning a promise' : 'answering directly'}: same headers, then 429`, async () => {
        const running = await adapter.start(foreign(core(2), waits), { port: 0 })
        try {
          const first = await call(running.target, '/hello')
          expect(first.status).toBe(200)
          expect(first.headers['x-ratelimit-limit']).toBe('2')
          expect(first.headers['x-ratelimit-remaining']).toBe('1')
          expect(first.headers['ratelimit-policy']).toBe('"perIp";q=2;w=60')
          expect(first.headers.ratelimit).toMatch(/^"perIp";r=1;t=\d+$/)
          expect((await call(running.target, '/hello')).status).toBe(200)
          const refused = await call(running.target, '/hello')
          expect(refused.status).toBe(429)
          expect(refused.headers['retry-after']).toMatch(/^\d+$/)
          expect(running.handled()).toBe(2)
        } finally {
          await running.close()
        }
      })
})
