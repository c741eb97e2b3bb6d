// Memcached store benchmark: decisions/s and p50/p99 latency at 1 and 64 in flight over 10,000 keys,
// Sluice on memcached (memjs) next to Sluice on Redis (ioredis) and rate-limiter-flexible's
// RateLimiterMemcache (the `memcached` client it is written for), all in the same run, rounds
// interleaved; plus bytes per key in memcached (`stats` bytes delta over 10,000 keys, what the
// items take including memcached's item headers). One memcached and one redis-server are started
// here on free ports. Run: npm run bench -- --only memcached
import { createRequire } from 'node:module'
import { Redis } from 'ioredis'
import memjs from 'memjs'
import { RateLimiterMemcache } from 'rate-limiter-flexible'
// What is measured comes from the build (dist/), as users run it.
import { createLimiter } from '../../packages/sluice/dist/index.js'
import { memcachedStore } from '../../packages/sluice/dist/memcached.js'
import { redisStore } from '../../packages/sluice/dist/redis.js'
import type { Policy } from '../../packages/sluice/src/policy.js'
import { startMemcached } from '../../test/helpers/memcached-harness.js'
import { textCommand } from '../../test/helpers/memcached-text-protocol.js'
import { startRedis } from '../../test/helpers/redis-harness.js'
import { throughput } from '../throughput.js'
import type { BenchCase, BenchRow } from '../types.js'

const require = createRequire(import.meta.url)
/** The `memcached` npm client (no types of its own): what RateLimiterMemcache calls. */
const Memcached = require('memcached') as new (
  location: string,
  options: Record<string, unknown>,
) => { end(): void }

const KEYS = 10_000
const subjects = Array.from({ length: KEYS }, (_, i) => `user-${String(i).padStart(5, '0')}`)
// Limits high enough that every decision is admitted: the full write path.
const policies = {
  'fixed-window': { algorithm: 'fixed-window', limit: 1_000_000, window: '1h' },
  gcra: { algorithm: 'gcra', limit: 1_000_000, window: '1h' },
} as const satisfies Record<string, Policy>

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

async function memcachedBytes(port: number): Promise<number> {
  const stats = await textCommand(port, 'stats', /END\r\n$/)
  return Number(/STAT bytes (\d+)/.exec(stats)![1])
}

export const benchCase: BenchCase = {
  name: 'memcached',
  async run({ quick }) {
    const [mc, redisServer] = await Promise.all([startMemcached(), startRedis()])
    const memjsClient = memjs.Client.create(mc.address, { logger: { log: () => {} } })
    const rlfClient = new Memcached(mc.address, { retries: 1, timeout: 1000 })
    const redis = new Redis(redisServer.port, '127.0.0.1')
    const rows: BenchRow[] = []
    try {
      const onMemcached = createLimiter({ store: memcachedStore(memjsClient, { prefix: 'bm' }), policies })
      const onRedis = createLimiter({ store: redisStore(redis, { prefix: 'br' }), policies })
      const rlf = new RateLimiterMemcache({
        storeClient: rlfClient,
        points: 1_000_000,
        duration: 3600,
        keyPrefix: 'rlf',
      })
      const tried = [
        {
          name: 'sluice memcached fixed-window',
          decide: (k: string) => onMemcached.consume('fixed-window', k),
        },
        { name: 'sluice memcached gcra', decide: (k: string) => onMemcached.consume('gcra', k) },
        { name: 'sluice redis fixed-window', decide: (k: string) => onRedis.consume('fixed-window', k) },
        { name: 'sluice redis gcra', decide: (k: string) => onRedis.consume('gcra', k) },
        { name: 'rate-limiter-flexible RateLimiterMemcache', decide: (k: string) => rlf.consume(k) },
      ]
      const reference = 'rate-limiter-flexible RateLimiterMemcache'

      // Bytes per key: one decision for each of 10,000 fresh keys, memcached's stored bytes before and after.
      for (const [name, decide] of [
        ['sluice memcached fixed-window', (k: string) => onMemcached.consume('fixed-window', `size-${k}`)],
        ['sluice memcached gcra', (k: string) => onMemcached.consume('gcra', `size-${k}`)],
        ['rate-limiter-flexible RateLimiterMemcache', (k: string) => rlf.consume(`size-${k}`)],
      ] as const) {
        const before = await memcachedBytes(mc.port)
        for (let i = 0; i < KEYS; i += 100)
          await Promise.all(subjects.slice(i, i + 100).map((s) => decide(s)))
        const after = await memcachedBytes(mc.port)
        rows.push({
          subject: name,
          metric: 'bytes per key',
          value: (after - before) / KEYS,
          unit: 'B',
          note: 'memcached stats bytes delta / 10,000 keys (item headers included)',
        })
      }

      const ms = quick ? 400 : 1500
      const rounds = quick ? 2 : 3
      for (const inFlight of [1, 64]) {
        const results = new Map<string, { rate: number[]; p50: number[]; p99: number[] }>()
        for (let round = 0; round < rounds; round++) {
          for (const subject of tried) {
            const r = await throughput(subject.decide, inFlight, ms, subjects)
            const m = results.get(subject.name) ?? { rate: [], p50: [], p99: [] }
            m.rate.push(r.rate)
            m.p50.push(r.p50)
            m.p99.push(r.p99)
            results.set(subject.name, m)
          }
        }
        const ref = median(results.get(reference)!.rate)
        for (const [name, m] of results) {
          rows.push({
            subject: name,
            metric: `decisions/s @${inFlight}`,
            value: median(m.rate),
            unit: '/s',
            ratio: median(m.rate) / ref,
            note: `vs ${reference}; median of ${rounds} interleaved rounds`,
          })
          rows.push({ subject: name, metric: `p50 @${inFlight}`, value: median(m.p50), unit: 'ms' })
          rows.push({ subject: name, metric: `p99 @${inFlight}`, value: median(m.p99), unit: 'ms' })
        }
      }
      await onMemcached.close()
      await onRedis.close()
    } finally {
      memjsClient.close()
      rlfClient.end()
      redis.disconnect()
      await Promise.all([mc.stop(), redisServer.stop()])
    }
    return rows
  },
}
