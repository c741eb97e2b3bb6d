// Script-cache losses on a real redis-server: a second client runs SCRIPT FLUSH every 5 ms while a
// bounded load decides on two keys (single and layered decisions), so some flushes land between a
// call's SCRIPT LOAD and its retry. Every decision still comes from Redis (none degraded: the limiter's
// timeout is long, so a degraded one could only be a script call that gave up) and each key admits
// exactly its limit.
import { Redis } from 'ioredis'
import { describe, expect, inject, it } from 'vitest'
import { createLimiter } from '../../src/index.js'
import { redisStore } from '../../src/stores/redis/index.js'
import { startRedis } from '../helpers/redis-harness.js'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Calls of a command in INFO commandstats (`script|load`, `evalsha`), and errors by code. */
async function stats(client: Redis): Promise<{ calls(name: string): number; errors(code: string): number }> {
  const text = `${await client.info('commandstats')}\n${await client.info('errorstats')}`
  const find = (prefix: string, field: string): number => {
    const line = text.split('\n').find((l) => l.startsWith(prefix))
    return line === undefined ? 0 : Number(new RegExp(`${field}=(\\d+)`).exec(line)![1])
  }
  return {
    calls: (name) => find(`cmdstat_${name}:`, 'calls'),
    errors: (code) => find(`errorstat_${code}:`, 'count'),
  }
}

describe('NOSCRIPT', () => {
  it('SCRIPT FLUSH every 5 ms under load: nothing degraded, exactly the limit admitted', async () => {
    const server = await startRedis()
    const client = new Redis(server.port, '127.0.0.1')
    const admin = new Redis(server.port, '127.0.0.1')
    try {
      const limiter = createLimiter({
        store: redisStore(client, { scriptRetryMs: 10_000 }),
        storeTimeout: '10s',
        onStoreError: 'open',
        localDenyCache: false, // every decision goes to Redis, denied ones too
        policies: {
          api: { algorithm: 'fixed-window', limit: 1500, window: '1h' },
          user: { algorithm: 'token-bucket', limit: 1000, window: '1h' },
          burst: { algorithm: 'sliding-window-log', limit: 5000, window: '1h' },
        },
      })
      const DECISIONS = 4000
      const IN_FLIGHT = 32
      let flushing = true
      let flushes = 0
      const flusher = (async () => {
        while (flushing && flushes < 5000) {
          await admin.script('FLUSH')
          flushes++
          await sleep(5)
        }
      })()
      let issued = 0
      let degraded = 0
      const admitted = { single: 0, layered: 0 }
      await Promise.all(
        Array.from({ length: IN_FLIGHT }, async (_, worker) => {
          while (issued < DECISIONS) {
            issued++
            const d =
              worker % 2 === 0
                ? await limiter.consume('api', 'one-key')
                : await limiter.consume([
                    { policy: 'user', key: 'other-key' },
                    { policy: 'burst', key: 'other-key' },
                  ])
            if (d.degraded === true) degraded++
            if (d.allowed) admitted[worker % 2 === 0 ? 'single' : 'layered']++
          }
        }),
      )
      flushing = false
      await flusher
      const seen = await stats(admin)
      expect({ degraded, admitted }).toEqual({ degraded: 0, admitted: { single: 1500, layered: 1000 } })
      // The flushes did land under load: many NOSCRIPT replies, each followed by a load.
      expect(flushes).toBeGreaterThan(20)
      expect(seen.errors('NOSCRIPT')).toBeGreaterThan(20)
      expect(seen.calls('script|load')).toBeGreaterThan(20)
    } finally {
      client.disconnect()
      admin.disconnect()
      await server.stop()
    }
  })
})

describe('scriptRetryMs', () => {
  it('is a whole number of ms from 0 to 60000', () => {
    const client = new Redis(inject('redis').port, '127.0.0.1', { lazyConnect: true })
    for (const scriptRetryMs of [-1, 1.5, 60_001, '100', Number.NaN])
      expect(() => redisStore(client, { scriptRetryMs } as never)).toThrow(
        expect.objectContaining({
          code: 'SLUICE_INVALID_OPTIONS',
          message: expect.stringContaining('scriptRetryMs'),
        }),
      )
    for (const scriptRetryMs of [0, 100, 60_000])
      expect(redisStore(client, { scriptRetryMs }).name).toBe('redis')
    client.disconnect()
  })
})
