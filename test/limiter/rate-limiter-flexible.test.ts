// Side by side with rate-limiter-flexible's RateLimiterMemory (points 5, duration 60 s,
// blockDuration 300 s) on one injected clock: the same requests are admitted and denied, and each
// denial's retry time (its msBeforeNext, Sluice's retryAfterMs) is the same.
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'

interface Answer {
  allowed: boolean
  /** The wait a denial reports; undefined when admitted. */
  retryMs?: number
  remaining: number
}

beforeEach(() => {
  vi.useFakeTimers({ now: 1_700_000_000_000 })
})
afterEach(() => {
  vi.useRealTimers()
})

function both() {
  const peer = new RateLimiterMemory({ points: 5, duration: 60, blockDuration: 300 })
  const limiter = createLimiter({
    store: memoryStore({ now: () => Date.now() }),
    policies: { login: { algorithm: 'fixed-window', limit: 5, window: '60s', blockDuration: '300s' } },
  })
  async function fromPeer(key: string, points: number): Promise<Answer> {
    try {
      const r = await peer.consume(key, points)
      return { allowed: true, remaining: r.remainingPoints }
    } catch (error) {
      if (!(error instanceof RateLimiterRes)) throw error
      return { allowed: false, retryMs: error.msBeforeNext, remaining: error.remainingPoints }
    }
  }
  async function fromSluice(key: string, cost: number): Promise<Answer> {
    const d = await limiter.consume('login', key, { cost })
    return d.allowed
      ? { allowed: true, remaining: d.remaining }
      : { allowed: false, retryMs: d.retryAfterMs, remaining: d.remaining }
  }
  return async (key: string, cost = 1) => {
    const [expected, got] = [await fromPeer(key, cost), await fromSluice(key, cost)]
    return { expected, got }
  }
}

describe('blockDuration, side by side with rate-limiter-flexible', () => {
  it('the same admissions, denials and retry times through a block and after it', async () => {
    const consume = both()
    const seen: Answer[] = []
    // [ms to advance first, cost]
    const script: [number, number][] = [
      [0, 1],
      [1000, 1],
      [1000, 1],
      [1000, 1],
      [1000, 1],
      [1000, 1], // the sixth in the window: denied and blocked for 300 s
      [10_000, 1],
      [60_000, 1], // the window has ended; the block has not
      [229_999, 1], // 1 ms before the block ends (it began at the sixth request, 5 s in)
      [1, 1], // the block has ended: a fresh window
      [0, 3],
      [0, 2], // 6 of 5: blocked again
      [299_999, 1],
      [1, 2],
    ]
    for (const [advance, cost] of script) {
      vi.advanceTimersByTime(advance)
      const { expected, got } = await consume('user-1', cost)
      expect(got, `after ${seen.length} requests`).toEqual(expected)
      seen.push(got)
    }
    expect(seen.map((a) => a.allowed)).toEqual([
      true,
      true,
      true,
      true,
      true,
      false,
      false,
      false,
      false,
      true,
      true,
      false,
      false,
      true,
    ])
    expect(seen[5]?.retryMs).toBe(300_000)
    expect(seen[8]?.retryMs).toBe(1)
  })

  it('keys are blocked apart', async () => {
    const consume = both()
    for (let i = 0; i < 5; i++) await consume('a')
    expect((await consume('a')).got).toMatchObject({ allowed: false, retryMs: 300_000 })
    const { expected, got } = await consume('b')
    expect(got).toEqual(expected)
    expect(got.allowed).toBe(true)
  })
})
