// The adapters take any object with the core's public shape ({ options, prepare, check }), not only
// Sluice's own core (whose outcomes the adapters receive through the core's internal delivery): such
// a core answering directly or with a promise gives the same responses, through every adapter, and
// one that breaks its contract (check throws or rejects) is answered like the core's own failure.
import { describe, expect, it } from 'vitest'
import {
  createHttpLimiter,
  type HttpLimiter,
  type HttpLimiterOptions,
} from '../../packages/sluice/src/http/index.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { adapters, call } from './servers.js'

function core(limit: number, extra: Partial<HttpLimiterOptions> = {}): HttpLimiter {
  const limiter = createLimiter({
    policies: { perIp: { algorithm: 'fixed-window', limit, window: '1m' } },
  })
  return createHttpLimiter({ limiter, rules: [{ policy: 'perIp', key: 'ip' }], ...extra })
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

/** A wrapper whose `check` fails, against the contract: by throwing, or with a rejected promise. */
function broken(inner: HttpLimiter, how: 'throws' | 'rejects'): HttpLimiter {
  return {
    options: inner.options,
    prepare: (routeOptions, where) => inner.prepare(routeOptions, where),
    check: () => {
      const error = new Error('the wrapper failed')
      if (how === 'throws') throw error
      return Promise.reject(error)
    },
  }
}

describe('a core with only the public members', () => {
  it('is what createHttpLimiter makes: no other member, so a copy of it is served alike', () => {
    expect(Reflect.ownKeys(core(1)).sort()).toEqual(['check', 'options', 'prepare'])
  })

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

  for (const adapter of adapters)
    for (const how of ['throws', 'rejects'] as const)
      it(`${adapter.name}, check ${how}: logged once, 500 rate_limiter_error; with onError 'open' the request passes`, async () => {
        const errors: unknown[] = []
        const logger = { warn: () => {}, error: (details: object) => errors.push(details) }
        const failing = await adapter.start(broken(core(2, { logger }), how), { port: 0 })
        try {
          const answered = await call(failing.target, '/hello')
          expect(answered.status).toBe(500)
          expect(JSON.parse(answered.body)).toMatchObject({ error: 'rate_limiter_error' })
          expect(failing.handled()).toBe(0)
          expect(errors).toEqual([expect.objectContaining({ err: expect.any(Error) })])
        } finally {
          await failing.close()
        }
        const open = await adapter.start(broken(core(2, { logger, onError: 'open' }), how), { port: 0 })
        try {
          expect((await call(open.target, '/hello')).status).toBe(200)
          expect(open.handled()).toBe(1)
          expect(errors).toHaveLength(2)
        } finally {
          await open.close()
        }
      })
})
