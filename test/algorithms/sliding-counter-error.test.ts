// Sliding window counter vs the exact sliding window log, on Redis with the same requests at the same
// (fake) times. The counter assumes the previous window's requests were spread evenly; this measures
// what that costs: admissions compared with the log, and the most it lets through in any real
// sliding window (the log never exceeds the limit). Numbers are printed and in docs/stores.md.
import { afterAll, describe, expect, it } from 'vitest'
import { resolvePolicy } from '../../packages/sluice/src/policy.js'
import { redisStore } from '../../packages/sluice/src/stores/redis/index.js'
import { freshPrefix, ioredis } from '../helpers/redis-clients.js'

const client = ioredis()
afterAll(() => {
  client.disconnect()
})

const LIMIT = 100
const WINDOW = 1000

function random(seed: number): () => number {
  let a = seed
  return () => {
    a = (a + 0x6d2b79f5) | 0
    let t = Math.imul(a ^ (a >>> 15), 1 | a)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** Most admissions inside any window (t - WINDOW, t]. */
function worstWindow(times: number[]): number {
  let worst = 0
  let first = 0
  for (let i = 0; i < times.length; i++) {
    while (times[first]! <= times[i]! - WINDOW) first++
    worst = Math.max(worst, i - first + 1)
  }
  return worst
}

type Pattern = (rand: () => number, t: number) => { gapMs: number; burst: number }
const patterns: Record<string, Pattern> = {
  // About 3x the limit, requests spread over time.
  steady: (rand) => ({ gapMs: 1 + Math.floor(rand() * 19), burst: 1 + Math.floor(rand() * 5) }),
  // Quiet, then a burst in the last 100 ms of each aligned window: the counter's worst case.
  'window-edge bursts': (rand, t) =>
    t % WINDOW >= WINDOW - 100
      ? { gapMs: 2, burst: 1 + Math.floor(rand() * 8) }
      : { gapMs: 20 + Math.floor(rand() * 40), burst: rand() < 0.3 ? 1 : 0 },
}

describe('sliding window counter error vs sliding window log (Redis)', () => {
  for (const [name, pattern] of Object.entries(patterns)) {
    it(name, async () => {
      let clock = 1_700_000_000_000
      const store = redisStore(client, { now: () => clock, prefix: freshPrefix('swc-err') })
      const log = resolvePolicy('log', { algorithm: 'sliding-window-log', limit: LIMIT, window: WINDOW })
      const counter = resolvePolicy('counter', {
        algorithm: 'sliding-window-counter',
        limit: LIMIT,
        window: WINDOW,
      })
      const rand = random(7)
      const admitted = { log: [] as number[], counter: [] as number[] }
      const end = clock + 20 * WINDOW
      let requests = 0
      while (clock < end) {
        const { gapMs, burst } = pattern(rand, clock)
        clock += gapMs
        for (let i = 0; i < burst; i++) {
          requests++
          const [l] = await store.apply([{ policy: log, key: 'k', cost: 1 }], 'consume')
          const [c] = await store.apply([{ policy: counter, key: 'k', cost: 1 }], 'consume')
          if (l!.allowed) admitted.log.push(clock)
          if (c!.allowed) admitted.counter.push(clock)
        }
      }
      const worst = { log: worstWindow(admitted.log), counter: worstWindow(admitted.counter) }
      const totalError = (admitted.counter.length - admitted.log.length) / admitted.log.length
      console.log(
        `[swc-error] ${name}: ${requests} requests over 20 windows; admitted log ${admitted.log.length}, counter ${admitted.counter.length} (${(100 * totalError).toFixed(1)}%); most in any ${WINDOW} ms window: log ${worst.log}, counter ${worst.counter} (limit ${LIMIT})`,
      )
      expect(worst.log).toBeLessThanOrEqual(LIMIT)
      // The counter's estimate never admits more than the limit in an aligned window plus what the
      // previous window's weight under-counts: at most 2 x limit in any sliding window.
      expect(worst.counter).toBeLessThanOrEqual(2 * LIMIT)
      expect(Math.abs(totalError)).toBeLessThan(0.25)
    })
  }
})
