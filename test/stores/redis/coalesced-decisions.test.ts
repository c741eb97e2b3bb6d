// Decisions that share one coalesced script call, through the whole limiter (lists, deny cache,
// failover, Redis store): each keeps its own answer, its own fallback when the call fails, its own
// storeTimeout, and the deny cache and the listeners see each one.
import { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import { createLimiter, type Decision } from '../../../packages/sluice/src/limiter.js'
import { redisStore } from '../../../packages/sluice/src/stores/redis/index.js'
import { limiterClient } from '../../helpers/failover-clients.js'
import { freshPrefix } from '../../helpers/redis-clients.js'
import { type RedisServer, startRedis } from '../../helpers/redis-harness.js'
import { type RedisProcess, startRedisProcess } from '../../helpers/redis-process.js'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

let cleanup: (() => Promise<void>)[] = []
afterEach(async () => {
  const tasks = cleanup.reverse()
  cleanup = []
  for (const task of tasks) await task().catch(() => {})
})

async function server(): Promise<{ server: RedisServer; client: Redis }> {
  const s = await startRedis()
  cleanup.push(() => s.stop())
  const client = new Redis(s.port, '127.0.0.1')
  cleanup.push(async () => client.disconnect())
  return { server: s, client }
}

/** EVALSHA calls Redis has run so far. */
async function evalshaCalls(client: Redis): Promise<number> {
  const text = await client.info('commandstats')
  return Number(/cmdstat_evalsha:calls=(\d+)/.exec(text)?.[1] ?? 0)
}

describe('decisions sharing a coalesced call', () => {
  it('each gets its own answer, in one call, and the listeners hear each one', async () => {
    const { client } = await server()
    const events: { key: string; allowed: boolean; cached: boolean }[] = []
    const limiter = createLimiter({
      store: redisStore(client, { prefix: freshPrefix('coalesced') }),
      policies: { api: { algorithm: 'fixed-window', limit: 2, window: '1m' } },
      onDecision: (e) =>
        events.push({ key: e.decision.key, allowed: e.decision.allowed, cached: !!e.cached }),
    })
    cleanup.push(() => limiter.close())
    await limiter.consume('api', 'warm')
    // Issued in one tick: coalesced, in order (four calls of one when nothing is in flight, split
    // to keep the pipeline full; eight decisions share calls of two).
    const decisions = await Promise.all(['a', 'a', 'a', 'b'].map((key) => limiter.consume('api', key)))
    expect(decisions.map((d) => [d.key, d.allowed, d.remaining])).toEqual([
      ['a', true, 1],
      ['a', true, 0],
      ['a', false, 0],
      ['b', true, 1],
    ])
    expect(decisions[2]!.reason).toBe('limit')
    expect(events.slice(1)).toEqual([
      { key: 'a', allowed: true, cached: false },
      { key: 'a', allowed: true, cached: false },
      { key: 'a', allowed: false, cached: false },
      { key: 'b', allowed: true, cached: false },
    ])
  })

  it("the deny cache learns a denial from a shared call, and answers the key's next check itself", async () => {
    const { client } = await server()
    const limiter = createLimiter({
      store: redisStore(client, { prefix: freshPrefix('coalesced') }),
      policies: { api: { algorithm: 'fixed-window', limit: 1, window: '1m' } },
    })
    cleanup.push(() => limiter.close())
    await limiter.consume('api', 'warm')
    const [first, second, other] = await Promise.all([
      limiter.consume('api', 'k'),
      limiter.consume('api', 'k'),
      limiter.consume('api', 'j'),
    ])
    expect([first.allowed, second.allowed, other.allowed]).toEqual([true, false, true])
    const calls = await evalshaCalls(client)
    // Answered at once, without Redis: decide gives the decision itself, not a promise.
    const cached = limiter.decide('api', 'k') as Decision
    expect(cached).toMatchObject({ allowed: false, cached: true, reason: 'limit' })
    expect(await evalshaCalls(client)).toBe(calls)
  })

  it("a failing call fails each of its decisions alone, by that decision's policy", async () => {
    const { client } = await server()
    const limiter = createLimiter({
      store: redisStore(client, { prefix: freshPrefix('coalesced') }),
      logger: { warn() {} },
      breaker: { failures: 1000, cooldown: '1s' },
      policies: {
        open: { algorithm: 'fixed-window', limit: 5, window: '1m', onStoreError: 'open' },
        closed: { algorithm: 'fixed-window', limit: 5, window: '1m', onStoreError: 'closed' },
        memory: { algorithm: 'fixed-window', limit: 5, window: '1m', onStoreError: 'memory' },
      },
    })
    cleanup.push(() => limiter.close())
    await limiter.consume('open', 'warm')
    // The connection is gone: every command fails at once.
    client.disconnect()
    // Eight decisions in one tick: four calls of two, each call mixing policies.
    const names = ['open', 'closed', 'memory', 'memory', 'open', 'closed', 'memory', 'memory'] as const
    const decisions = await Promise.all(names.map((name) => limiter.consume(name, 'k')))
    const open = decisions.filter((d) => d.policy === 'open')
    const closed = decisions.filter((d) => d.policy === 'closed')
    const memory = decisions.filter((d) => d.policy === 'memory')
    for (const d of open) expect(d).toMatchObject({ allowed: true, degraded: true })
    for (const d of closed)
      expect(d).toMatchObject({ allowed: false, degraded: true, reason: 'store_unavailable' })
    // The memory fallback counts them in issue order.
    expect(memory.map((d) => [d.allowed, d.degraded, d.remaining])).toEqual([
      [true, true, 4],
      [true, true, 3],
      [true, true, 2],
      [true, true, 1],
    ])
    expect(limiter.health().counts).toMatchObject({ errors: 8, degraded: 6, unavailable: 2 })
  })

  it('a decision that joins calls in flight keeps its own storeTimeout, not the older calls’', async () => {
    const TIMEOUT = 150
    const redis: RedisProcess = await startRedisProcess()
    cleanup.push(() => redis.stop())
    cleanup.push(async () => redis.signal('SIGCONT'))
    const client = await limiterClient(redis.port)
    cleanup.push(async () => client.disconnect())
    const limiter = createLimiter({
      store: redisStore(client, { prefix: freshPrefix('coalesced') }),
      storeTimeout: TIMEOUT,
      onStoreError: 'open',
      breaker: { failures: 1000, cooldown: '1s' },
      logger: { warn() {} },
      policies: { api: { algorithm: 'token-bucket', limit: 1000, window: '1h' } },
    })
    cleanup.push(() => limiter.close())
    await limiter.consume('api', 'warm')
    redis.signal('SIGSTOP')
    const settled: string[] = []
    const track = (name: string, p: Promise<Decision>) =>
      p.then((d) => {
        settled.push(name)
        return d
      })
    const wave = (name: string) =>
      Array.from({ length: 8 }, (_, i) => track(name, limiter.consume('api', `${name}-${i}`)))
    // Eight decisions: four calls of two.
    const older = wave('older')
    await sleep(TIMEOUT / 2)
    // Issued while the older calls are in flight: calls of their own, of four.
    const younger = wave('younger')
    const first = await Promise.all(older)
    // The older decisions timed out; the younger ones, half a timeout younger, still wait.
    expect(settled).toEqual(Array(8).fill('older'))
    const second = await Promise.all(younger)
    expect([...first, ...second].every((d) => d.allowed && d.degraded === true)).toBe(true)
    expect(limiter.health().counts.timeouts).toBe(16)
  })
})

describe('a Redis store wrapped by spreading it', () => {
  it('decides through the wrapper’s own apply, not the wrapped store’s faster path', async () => {
    const { client } = await server()
    const inner = redisStore(client, { prefix: freshPrefix('spread') })
    const seen: string[] = []
    // A wrapper written the short way: the spread copies every own property of the store, symbol-keyed
    // ones included; its `apply` is what must run for every decision.
    const wrapped = {
      ...inner,
      apply: (steps: Parameters<typeof inner.apply>[0], mode: Parameters<typeof inner.apply>[1]) => {
        for (const s of steps) seen.push(`${mode}:${s.key}`)
        return inner.apply(steps, mode)
      },
    }
    const limiter = createLimiter({
      store: wrapped,
      policies: { api: { algorithm: 'fixed-window', limit: 1, window: '1m' } },
    })
    cleanup.push(() => limiter.close())
    const decisions = await Promise.all(['a', 'a', 'b'].map((key) => limiter.consume('api', key)))
    expect(decisions.map((d) => d.allowed)).toEqual([true, false, true])
    expect(seen.sort()).toEqual(['consume:a', 'consume:a', 'consume:b'])
  })
})
