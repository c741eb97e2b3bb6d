// The setups of docs/migrating-from-rate-limiter-flexible.md side by side with rate-limiter-flexible:
// points, duration, blockDuration and consume with points, on the memory store (one injected clock)
// and on a real Redis (ioredis, one client for both). The same calls to both; the RateLimiterRes
// fields the guide derives from a Decision (`asRateLimiterRes`) are equal where the guide says so,
// and each difference it states (refused points counted, a cost above `points`, a failing store)
// is pinned.
import { readFileSync } from 'node:fs'
import { Redis } from 'ioredis'
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest'
import type { Decision } from '../../packages/sluice/src/index.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { redisStore } from '../../packages/sluice/src/stores/redis/index.js'
import { freshPrefix, ioredis } from '../helpers/redis-clients.js'
import { freePort } from '../helpers/redis-harness.js'

/** The guide these setups come from: each option the tests give either side is written there. */
const GUIDE = readFileSync(
  new URL('../../docs/migrating-from-rate-limiter-flexible.md', import.meta.url),
  'utf8',
)

/** The guide's helper: rate-limiter-flexible's RateLimiterRes fields, from a Sluice decision. */
function asRateLimiterRes(d: Decision) {
  return {
    remainingPoints: d.remaining,
    msBeforeNext: d.allowed ? d.resetMs : d.retryAfterMs,
    consumedPoints: d.limit - d.remaining,
  }
}

interface Answer {
  allowed: boolean
  remainingPoints: number
  msBeforeNext: number
  consumedPoints: number
}

/** rate-limiter-flexible's answer: resolved when admitted, rejected with a RateLimiterRes when not. */
async function fromPeer(call: Promise<RateLimiterRes>): Promise<Answer> {
  try {
    const r = await call
    return { allowed: true, ...fields(r) }
  } catch (error) {
    if (!(error instanceof RateLimiterRes)) throw error
    return { allowed: false, ...fields(error) }
  }
}

function fields(r: RateLimiterRes) {
  return {
    remainingPoints: r.remainingPoints,
    msBeforeNext: r.msBeforeNext,
    consumedPoints: r.consumedPoints,
  }
}

function fromSluice(d: Decision): Answer {
  return { allowed: d.allowed, ...asRateLimiterRes(d) }
}

describe('on the memory store, one clock', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: 1_700_000_000_000 })
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  /** The guide's login setup: 5 points per 60 s, a 300 s block after a refusal. */
  function login(extra: { blockDuration?: boolean } = {}) {
    const block = extra.blockDuration ?? true
    const peer = new RateLimiterMemory({ points: 5, duration: 60, ...(block ? { blockDuration: 300 } : {}) })
    const limiter = createLimiter({
      store: memoryStore({ now: () => Date.now() }),
      policies: {
        login: {
          algorithm: 'fixed-window',
          limit: 5,
          window: '60s',
          ...(block ? { blockDuration: '300s' } : {}),
          costAboveCapacity: 'deny',
        },
      },
    })
    return async (key: string, points = 1) => ({
      peer: await fromPeer(peer.consume(key, points)),
      ours: fromSluice(await limiter.consume('login', key, { cost: points })),
    })
  }

  it('consume with points: the same admissions and the same remainingPoints, msBeforeNext and consumedPoints while admitted', async () => {
    const consume = login()
    for (const [advance, points] of [
      [0, 1],
      [1000, 2],
      [500, 1],
      [2500, 1],
    ] as const) {
      vi.advanceTimersByTime(advance)
      const { peer, ours } = await consume('user-42', points)
      expect(peer.allowed).toBe(true)
      expect(ours).toEqual(peer)
    }
  })

  it('the refusal that blocks: the same remainingPoints and msBeforeNext (the block); consumedPoints counts the refused point only in rate-limiter-flexible', async () => {
    const consume = login()
    for (let i = 0; i < 5; i++) await consume('user-42')
    vi.advanceTimersByTime(4000)
    const first = await consume('user-42')
    expect(first.peer).toEqual({
      allowed: false,
      remainingPoints: 0,
      msBeforeNext: 300_000,
      consumedPoints: 6,
    })
    expect(first.ours).toEqual({ ...first.peer, consumedPoints: 5 })
    vi.advanceTimersByTime(100_000)
    const blocked = await consume('user-42')
    expect(blocked.peer.allowed).toBe(false)
    expect(blocked.ours).toMatchObject({ allowed: false, remainingPoints: 0, msBeforeNext: 200_000 })
    expect(blocked.ours.msBeforeNext).toBe(blocked.peer.msBeforeNext)
  })

  it('refused points count in rate-limiter-flexible and not in Sluice: after 3 + 3 (refused), 2 more are refused there and admitted here', async () => {
    const consume = login({ blockDuration: false })
    expect((await consume('k', 3)).ours.allowed).toBe(true)
    const second = await consume('k', 3)
    expect([second.peer.allowed, second.ours.allowed]).toEqual([false, false])
    expect(second.peer.remainingPoints).toBe(0)
    expect(second.ours.remainingPoints).toBe(2)
    const third = await consume('k', 2)
    expect(third.peer.allowed).toBe(false)
    expect(third.ours.allowed).toBe(true)
  })

  it('a cost above points: both refuse it as a denial (costAboveCapacity: "deny"); rate-limiter-flexible then blocks the key, Sluice does not', async () => {
    const consume = login()
    const over = await consume('k', 6)
    expect(over.peer).toMatchObject({ allowed: false, msBeforeNext: 300_000 })
    expect(over.ours.allowed).toBe(false)
    const next = await consume('k', 1)
    expect(next.peer.allowed).toBe(false)
    expect(next.ours).toMatchObject({ allowed: true, remainingPoints: 4 })
  })

  it('without costAboveCapacity a cost above the limit is an error (SLUICE_INVALID_COST), never a denial', async () => {
    const limiter = createLimiter({
      policies: { login: { algorithm: 'fixed-window', limit: 5, window: '60s' } },
    })
    await expect(limiter.consume('login', 'k', { cost: 6 })).rejects.toMatchObject({
      code: 'SLUICE_INVALID_COST',
    })
    const denied = await createLimiter({
      policies: { login: { algorithm: 'fixed-window', limit: 5, window: '60s', costAboveCapacity: 'deny' } },
    }).consume('login', 'k', { cost: 6 })
    expect(denied).toMatchObject({ allowed: false, reason: 'cost_above_capacity' })
  })
})

describe('on Redis (ioredis): RateLimiterRedis and redisStore', () => {
  let client: Redis
  beforeAll(() => {
    client = ioredis()
  })
  afterAll(async () => {
    await client.quit()
  })

  it('the same admissions, remainingPoints and consumedPoints; msBeforeNext within the time the calls took', async () => {
    const peer = new RateLimiterRedis({
      storeClient: client,
      keyPrefix: freshPrefix('rlf'),
      points: 5,
      duration: 60,
      blockDuration: 300,
    })
    const store = redisStore(client, { prefix: freshPrefix('sluice') })
    await store.ready()
    const limiter = createLimiter({
      store,
      policies: {
        login: {
          algorithm: 'fixed-window',
          limit: 5,
          window: '60s',
          blockDuration: '300s',
          costAboveCapacity: 'deny',
        },
      },
    })
    const startedAt = Date.now()
    const seen: boolean[] = []
    for (const points of [1, 2, 1, 1, 1]) {
      const theirs = await fromPeer(peer.consume('user-42', points))
      const ours = fromSluice(await limiter.consume('login', 'user-42', { cost: points }))
      const slackMs = Date.now() - startedAt + 50
      seen.push(theirs.allowed)
      expect(ours.allowed).toBe(theirs.allowed)
      expect(ours.remainingPoints).toBe(theirs.remainingPoints)
      expect(Math.abs(ours.msBeforeNext - theirs.msBeforeNext)).toBeLessThanOrEqual(slackMs)
      // The refused point is counted by rate-limiter-flexible only.
      expect(ours.consumedPoints).toBe(theirs.allowed ? theirs.consumedPoints : 5)
    }
    expect(seen).toEqual([true, true, true, true, false])
    const blocked = fromSluice(await limiter.consume('login', 'user-42'))
    expect(blocked.allowed).toBe(false)
    expect(blocked.msBeforeNext).toBeGreaterThan(290_000)
    await store.close()
  })

  it('Redis unreachable: rate-limiter-flexible rejects with an Error (not a RateLimiterRes); Sluice answers by onStoreError', async () => {
    const down = new Redis(await freePort(), '127.0.0.1', {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    })
    down.on('error', () => {})
    try {
      const peer = new RateLimiterRedis({ storeClient: down, points: 5, duration: 60 })
      const error = await peer.consume('k').then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(error).toBeInstanceOf(Error)
      expect(error).not.toBeInstanceOf(RateLimiterRes)
      const limiter = createLimiter({
        store: redisStore(down),
        logger: { warn: () => {} },
        policies: {
          open: { algorithm: 'fixed-window', limit: 5, window: '60s' },
          closed: { algorithm: 'fixed-window', limit: 5, window: '60s', onStoreError: 'closed' },
        },
      })
      expect(await limiter.consume('open', 'k')).toMatchObject({ allowed: true, degraded: true })
      expect(await limiter.consume('closed', 'k')).toMatchObject({
        allowed: false,
        degraded: true,
        reason: 'store_unavailable',
      })
      await limiter.close()
    } finally {
      down.disconnect()
    }
  })
})

describe('docs/migrating-from-rate-limiter-flexible.md', () => {
  it('shows the setups these tests run, option for option', () => {
    for (const written of [
      'new RateLimiterMemory({ points: 5, duration: 60, blockDuration: 300 })',
      "login.consume('user-42', 2)",
      "limiter.consume('login', 'user-42', { cost: 2 })",
      'limit: 5, // points',
      "window: '60s', // duration",
      "blockDuration: '300s',",
      "costAboveCapacity: 'deny',",
      'remainingPoints: d.remaining,',
      'msBeforeNext: d.allowed ? d.resetMs : d.retryAfterMs,',
      'consumedPoints: d.limit - d.remaining,',
      'new RateLimiterRedis({',
      'storeClient: redisClient,',
      'blockDuration: 300,',
      "redisStore(client, { prefix: 'rlflx' })",
    ])
      expect(GUIDE).toContain(written)
  })
})
