// The adapters' `queue: { maxWaitMs, maxQueued }` through real listening servers of every adapter:
// a request over the limit is delayed until it fits instead of answered 429, within maxWaitMs and
// the cap on queued requests.
import { describe, expect, it } from 'vitest'
import { createHttpLimiter } from '../../packages/sluice/src/http/index.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { adapters, call } from './servers.js'

function limiterOf(window: number) {
  return createLimiter({ policies: { perIp: { algorithm: 'fixed-window', limit: 2, window } } })
}

describe.each(adapters)('$name: queue', (adapter) => {
  it('delays requests over the limit until they fit, instead of 429', async () => {
    const http = createHttpLimiter({
      limiter: limiterOf(300),
      rules: [{ policy: 'perIp', key: 'ip' }],
      queue: { maxWaitMs: 1_000 },
    })
    const running = await adapter.start(http, { port: 0 })
    try {
      const started = performance.now()
      const replies = await Promise.all(Array.from({ length: 4 }, () => call(running.target, '/hello')))
      expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 200])
      expect(performance.now() - started).toBeGreaterThanOrEqual(250)
      expect(running.handled()).toBe(4)
    } finally {
      await running.close()
    }
  })

  it('answers 429 at once when the wait would pass maxWaitMs', async () => {
    const http = createHttpLimiter({
      limiter: limiterOf(60_000),
      rules: [{ policy: 'perIp', key: 'ip' }],
      queue: { maxWaitMs: 10_000 },
    })
    const running = await adapter.start(http, { port: 0 })
    try {
      await call(running.target, '/hello')
      await call(running.target, '/hello')
      const started = performance.now()
      const late = await call(running.target, '/hello')
      expect(late.status).toBe(429)
      expect(JSON.parse(late.body)).toMatchObject({ error: 'rate_limit_exceeded' })
      expect(Number(late.headers['retry-after'])).toBeGreaterThan(50)
      // At once: a wait to maxWaitMs would take its 10 s; half of that leaves a slow machine room.
      expect(performance.now() - started).toBeLessThan(5_000)
    } finally {
      await running.close()
    }
  })
})

describe('queue: the cap on queued requests', () => {
  it('past maxQueued held requests, the next one is answered at once', async () => {
    // The two held requests fit when the next 2 s window opens; a third queued one would fit in the
    // window after, well within maxWaitMs: only the cap can refuse it.
    const http = createHttpLimiter({
      limiter: limiterOf(2_000),
      rules: [{ policy: 'perIp', key: 'ip' }],
      queue: { maxWaitMs: 10_000, maxQueued: 2 },
    })
    const running = await adapters[0]!.start(http, { port: 0 })
    try {
      await call(running.target, '/hello')
      await call(running.target, '/hello')
      let heldAnswered = 0
      const held = [call(running.target, '/hello'), call(running.target, '/hello')].map((reply) =>
        reply.then((r) => {
          heldAnswered++
          return r
        }),
      )
      await new Promise((resolve) => setTimeout(resolve, 100))
      const over = await call(running.target, '/hello')
      expect(over.status).toBe(429)
      // At once: answered while the held ones still wait for their window.
      expect(heldAnswered).toBe(0)
      expect((await Promise.all(held)).map((r) => r.status)).toEqual([200, 200])
    } finally {
      await running.close()
    }
  })

  it('refuses a bad queue option at construction with a typed error', () => {
    const limiter = limiterOf(1000)
    for (const queue of [{ maxWaitMs: -1 }, { maxWaitMs: 10, maxQueud: 3 }, { maxWaitMs: '1s' }]) {
      expect(() =>
        createHttpLimiter({ limiter, rules: [{ policy: 'perIp', key: 'ip' }], queue: queue as never }),
      ).toThrow(expect.objectContaining({ code: 'SLUICE_INVALID_OPTIONS' }))
    }
  })
})
