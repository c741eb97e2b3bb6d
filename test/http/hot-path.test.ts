// The HTTP hot path's garbage: heap bytes the built core allocates per request on the memory store
// (one `ip` layer, both header families), measured in a child `node --expose-gc` over dist/ (needs
// `npm run build` first; `npm test` does it). The request object is built once, so only Sluice's own
// allocations count. Before the hot-path work: about 1,500 bytes per request (limiter included), after
// about 650 (the limiter's own step, decision and memory-store entry are about 350 of them).
import { execFileSync } from 'node:child_process'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type RedisServer, startRedis } from '../helpers/redis-harness.js'

const root = new URL('../..', import.meta.url).pathname

// argv: the built index.js to load.
const SCRIPT = `
import { getHeapStatistics } from 'node:v8'
const { createLimiter, createHttpLimiter } = await import(process.argv[1])
const limiter = createLimiter({
  policies: { perIp: { algorithm: 'fixed-window', limit: 1_000_000_000, window: '1m' } },
})
const http = createHttpLimiter({ limiter, rules: [{ policy: 'perIp', key: 'ip' }] })
const request = {
  method: 'GET', route: '/items/:id', path: '/items/1', remoteAddress: '127.0.0.1',
  header: () => undefined, raw: undefined,
}
// The outcomes escape, as they do to an adapter: the optimiser cannot drop them.
const sink = new Array(1024)
function loop(n) { for (let i = 0; i < n; i++) sink[i & 1023] = http.check(request) }
loop(200_000)
// Few enough requests per round that no scavenge runs inside it.
const n = 5_000
const samples = []
for (let round = 0; round < 9; round++) {
  globalThis.gc()
  const before = getHeapStatistics().used_heap_size
  loop(n)
  samples.push((getHeapStatistics().used_heap_size - before) / n)
}
samples.sort((a, b) => a - b)
const out = http.check(request)
console.log(JSON.stringify({ bytes: samples[4], action: out.action, headers: Object.keys(out.headers) }))
`

const BUILT = new URL('../../dist/index.js', import.meta.url).href

function bytesPerCheck(): { bytes: number; action: string; headers: string[] } {
  const out = execFileSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', SCRIPT, BUILT], {
    cwd: root,
    encoding: 'utf8',
    timeout: 20_000,
  })
  return JSON.parse(out.trim()) as { bytes: number; action: string; headers: string[] }
}

describe('HTTP hot path allocations (memory store, built package)', () => {
  it('one layer: at most 1,000 heap bytes per request, every header still sent', () => {
    const result = bytesPerCheck()
    expect(result.action).toBe('continue')
    expect(result.headers).toEqual([
      'X-RateLimit-Limit',
      'X-RateLimit-Remaining',
      'X-RateLimit-Reset',
      'RateLimit-Policy',
      'RateLimit',
    ])
    expect(result.bytes).toBeLessThanOrEqual(1_000)
  })
})

const ADAPTER_SCRIPT = new URL('./adapter-allocations.mjs', import.meta.url).pathname

/** Heap bytes per request the adapter itself allocates on a real server (see adapter-allocations.mjs). */
function adapterBytes(framework: 'fastify' | 'express'): { bytes: number; headers: string[] } {
  const out = execFileSync(
    process.execPath,
    ['--no-turbo-inlining', ADAPTER_SCRIPT, framework, new URL('../../dist', import.meta.url).pathname],
    { cwd: root, encoding: 'utf8', timeout: 20_000 },
  )
  return JSON.parse(out.trim()) as { bytes: number; headers: string[] }
}

describe('HTTP hot path allocations in the adapters (real server, real sockets, built package)', () => {
  // Before: 637 bytes (two reads of `request.routeOptions`, which Fastify 5 builds afresh on every
  // read, and `reply.headers`' key array); after: about 430, of which about 225 are Fastify's own
  // `reply.header` (it lower-cases every name) and 120 the one `routeOptions` read.
  it('Fastify: the onRequest hook allocates at most 500 bytes per request outside the core', () => {
    const result = adapterBytes('fastify')
    expect(result.headers).toEqual([
      'x-ratelimit-limit',
      'x-ratelimit-remaining',
      'x-ratelimit-reset',
      'ratelimit-policy',
      'ratelimit',
    ])
    expect(result.bytes).toBeLessThanOrEqual(500)
  })
})

const PROMISE_SCRIPT = new URL('./adapter-promises.mjs', import.meta.url).pathname

describe('HTTP hot path on Redis: one continuation per request (real server, real Redis, built package)', () => {
  let redis: RedisServer
  beforeAll(async () => {
    redis = await startRedis()
  })
  afterAll(async () => {
    await redis?.stop()
  })

  // Promises per request of a server with Sluice, less the same server without a limiter, less one
  // `limiter.decide` on the same store (adapter-promises.mjs). Before: 1 (the core continued the
  // store's promise, then the adapter continued the core's); after: 0 (the core hands the outcome to
  // the adapter from its own continuation).
  for (const framework of ['fastify', 'express'] as const)
    it(`${framework}: the adapter and core add no promise of their own to a waiting decision`, () => {
      const out = execFileSync(
        process.execPath,
        [PROMISE_SCRIPT, framework, new URL('../../dist', import.meta.url).pathname, String(redis.port)],
        { cwd: root, encoding: 'utf8', timeout: 20_000 },
      )
      const result = JSON.parse(out.trim()) as { httpSide: number; decide: number }
      expect(result.httpSide).toBeLessThanOrEqual(0.5)
      // The decision itself on Redis (limiter, failover, coalescer, script runner, ioredis): 12
      // promises before the coalesced path settled from the call's own continuation, 8 after.
      expect(result.decide).toBeLessThanOrEqual(8.5)
    })
})
