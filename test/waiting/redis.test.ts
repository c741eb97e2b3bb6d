// wait across OS processes on one key of a real Redis and a real Redis Cluster: FIFO per process,
// never above the shared rate; the up-front timeout and abort on the real stores.
import { describe, expect, inject, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { redisStore } from '../../packages/sluice/src/stores/redis/index.js'
import { freshPrefix, ioredis, ioredisCluster } from '../helpers/redis-clients.js'
import { expectWithinRate, workers } from './waiting-workers.js'

describe('wait across processes', () => {
  for (const target of ['standalone Redis', 'Redis Cluster'] as const) {
    it(`${target}: 3 processes x 6 waiters are admitted FIFO per process, never above the rate`, {
      timeout: 40_000,
    }, async () => {
      const cluster = target === 'Redis Cluster'
      const ports = cluster ? inject('redisCluster').ports : [inject('redis').port]
      const before = Date.now()
      const results = await workers(3, {
        mode: 'wait',
        ports,
        cluster,
        prefix: freshPrefix('wait'),
        algorithm: cluster ? 'gcra' : 'token-bucket',
        limit: 10,
        window: 1_000,
        burst: 2,
        calls: 6,
        maxWaitMs: 10_000,
      })
      const start = before + 2_500
      const all = results.flat()
      expect(all.every((o) => o.allowed)).toBe(true)
      for (const outcomes of results) {
        // Admitted in the order each process asked (outcomes are pushed as they resolve).
        expect(outcomes.map((o) => o.index)).toEqual([0, 1, 2, 3, 4, 5])
      }
      expectWithinRate(
        all.map((o) => o.at),
        start - 50,
        2,
        10 / 1_000,
      )
      // 18 units at 10/s with a burst of 2 take at least 1.6 s.
      expect(Math.max(...all.map((o) => o.at)) - start).toBeGreaterThanOrEqual(1_550)
    })
  }

  it("standalone Redis: a waiter whose wait passes maxWaitMs gets reason 'timeout' at once", async () => {
    const client = ioredis()
    const limiter = createLimiter({
      store: redisStore(client, { prefix: freshPrefix('wait-timeout') }),
      policies: { api: { algorithm: 'fixed-window', limit: 1, window: '10s' } },
    })
    await limiter.consume('api', 'k')
    const started = performance.now()
    const d = await limiter.wait('api', 'k', { maxWaitMs: 8_000 })
    expect(d).toMatchObject({ allowed: false, reason: 'timeout' })
    // At once: a wait to the deadline would take its 8 s; half of that leaves a slow machine room
    // (test/waiting/memory.test.ts pins "at once" exactly on fake timers).
    expect(performance.now() - started).toBeLessThan(4_000)
    client.disconnect()
  })

  it('Redis Cluster: abort mid-wait rejects with SLUICE_WAIT_ABORTED and the next waiter gets the unit', async () => {
    const client = ioredisCluster()
    const limiter = createLimiter({
      store: redisStore(client, { prefix: freshPrefix('wait-abort') }),
      storeTimeout: 2_000,
      policies: { api: { algorithm: 'fixed-window', limit: 1, window: 400 } },
    })
    await limiter.consume('api', 'k')
    const controller = new AbortController()
    const first = limiter.wait('api', 'k', { maxWaitMs: 3_000, signal: controller.signal })
    const second = limiter.wait('api', 'k', { maxWaitMs: 3_000 })
    setTimeout(() => controller.abort(), 100)
    await expect(first).rejects.toMatchObject({ code: 'SLUICE_WAIT_ABORTED' })
    expect((await second).allowed).toBe(true)
    expect((await limiter.peek('api', 'k')).remaining).toBe(0)
    client.disconnect()
  })
})
