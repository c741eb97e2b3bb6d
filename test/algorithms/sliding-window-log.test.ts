// The run-length sliding window log against the plainest model of its semantics: a list holding the
// time of every admitted unit. Random sequences of consumes,
// peeks, refunds and clock steps (backwards too) must decide alike, and the log must hold at most
// one entry per admitted request.
import { describe, expect, it } from 'vitest'
import {
  LOG_TOTAL_MODULUS,
  type SlidingWindowLogState,
  slidingWindowLog,
} from '../../packages/sluice/src/algorithms/sliding-window-log.js'
import type { Outcome } from '../../packages/sluice/src/algorithms/types.js'
import { type ResolvedPolicy, resolvePolicy } from '../../packages/sluice/src/policy.js'

/** One time per admitted unit, oldest first. */
type UnitLog = number[]

function modelConsume(
  units: UnitLog,
  policy: ResolvedPolicy,
  now: number,
  cost: number,
  peek: boolean,
): Omit<Outcome<UnitLog>, 'state'> & { units: UnitLog } {
  const live = units.filter((t) => t + policy.windowMs > now)
  const at = live.length > 0 ? Math.max(now, live[live.length - 1]!) : now
  const allowed = live.length + cost <= policy.limit
  const next = allowed && !peek ? [...live, ...Array<number>(cost).fill(at)] : live
  const newest = next[next.length - 1]
  return {
    allowed,
    units: allowed && !peek ? next : units,
    remaining: Math.max(0, policy.limit - next.length),
    retryAfterMs: allowed ? 0 : live[live.length + cost - policy.limit - 1]! + policy.windowMs - now,
    resetMs: newest === undefined ? 0 : newest + policy.windowMs - now,
  }
}

function modelRefund(units: UnitLog, policy: ResolvedPolicy, now: number, amount: number): UnitLog {
  const live = units.filter((t) => t + policy.windowMs > now)
  return live.slice(0, Math.max(0, live.length - amount))
}

/** A small deterministic generator (mulberry32), so a failure replays. */
function random(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32
  }
}

const liveEntries = (s: SlidingWindowLogState | undefined, policy: ResolvedPolicy, now: number) =>
  s === undefined ? 0 : s.times.filter((t) => t + policy.windowMs > now).length

function run(seed: number, limit: number, windowMs: number, start?: number): void {
  const policy = resolvePolicy('p', { algorithm: 'sliding-window-log', limit, window: windowMs })
  const next = random(seed)
  let now = 1_700_000_000_000
  // With `start`: a key that already holds one unit admitted now, its running total at `start`.
  let units: UnitLog = start === undefined ? [] : [now]
  let state: SlidingWindowLogState | undefined =
    start === undefined ? undefined : { times: [now], ends: [start], start: start - 1 }
  let admitted = units.length
  for (let i = 0; i < 400; i++) {
    const r = next()
    // Mostly small steps forward, sometimes none (merges), sometimes back, sometimes past the window.
    now +=
      r < 0.3
        ? 0
        : r < 0.8
          ? Math.floor(next() * (windowMs / 4))
          : r < 0.9
            ? -Math.floor(next() * 50)
            : windowMs
    // Never above the limit: the limiter refuses such a cost before any store sees it.
    const cost = Math.min(limit, 1 + Math.floor(next() * (next() < 0.5 ? 3 : limit)))
    const what = `seed ${seed}, step ${i}, t ${now}, cost ${cost}`
    const op = next()
    if (op < 0.15) {
      units = modelRefund(units, policy, now, cost)
      state = slidingWindowLog.refund(state, policy, now, cost)
      const probe = state === undefined ? undefined : slidingWindowLog.consume(state, policy, now, 1, true)
      expect(probe === undefined || probe.remaining === limit - units.length, what).toBe(true)
      continue
    }
    const peek = op < 0.3
    const expected = modelConsume(units, policy, now, cost, peek)
    const got = slidingWindowLog.consume(state, policy, now, cost, peek)
    expect(
      {
        allowed: got.allowed,
        remaining: got.remaining,
        retryAfterMs: got.retryAfterMs,
        resetMs: got.resetMs,
      },
      what,
    ).toEqual({
      allowed: expected.allowed,
      remaining: expected.remaining,
      retryAfterMs: expected.retryAfterMs,
      resetMs: expected.resetMs,
    })
    if (got.allowed && !peek) {
      units = expected.units
      state = got.state
      admitted++
    }
    // Bounded by requests, never by units: no more live entries than live units or than admissions.
    const entries = liveEntries(state, policy, now)
    const liveUnits = units.filter((t) => t + policy.windowMs > now).length
    expect(entries, what).toBeLessThanOrEqual(Math.min(admitted, liveUnits))
  }
}

describe('sliding-window-log (run-length) decides as a log of one time per unit', () => {
  for (const [seed, limit, windowMs] of [
    [1, 1, 100],
    [2, 3, 1000],
    [3, 10, 1000],
    [4, 50, 250],
    [5, 7, 60_000],
    [6, 1000, 500],
  ] as const) {
    it(`random sequence ${seed}: limit ${limit}, window ${windowMs} ms`, () => run(seed, limit, windowMs))
  }

  it('running totals that wrap at 2^39 still count exactly', () => {
    // A long-lived key whose totals sit just below the modulus: they wrap within the sequence.
    run(7, 20, 1000, LOG_TOTAL_MODULUS - 5)
    run(8, 1000, 1000, LOG_TOTAL_MODULUS - 1)
  })

  it('requests at the same ms share one entry; a refund shrinks the newest entry', () => {
    const policy = resolvePolicy('p', { algorithm: 'sliding-window-log', limit: 100, window: 1000 })
    let s = slidingWindowLog.consume(undefined, policy, 5000, 10, false).state
    s = slidingWindowLog.consume(s, policy, 5000, 20, false).state
    s = slidingWindowLog.consume(s, policy, 4990, 5, false).state // clock stepped back: recorded at 5000
    expect(s).toEqual({ times: [5000], ends: [35], start: 0 })
    s = slidingWindowLog.consume(s, policy, 5001, 1, false).state
    expect(s).toEqual({ times: [5000, 5001], ends: [35, 36], start: 0 })
    expect(slidingWindowLog.refund(s, policy, 5002, 3)).toEqual({ times: [5000], ends: [33], start: 0 })
    // The oldest entry leaves: the next commit drops it and keeps its total as the start.
    s = slidingWindowLog.consume(s, policy, 6000, 4, false).state
    expect(s).toEqual({ times: [5001, 6000], ends: [36, 40], start: 35 })
  })
})
