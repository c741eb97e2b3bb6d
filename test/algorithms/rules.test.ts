// The rules around the algorithms that every TypeScript store decides with (src/algorithms/rules.ts):
// a block in force, all or nothing, and when a refunded state ends.
import { describe, expect, it } from 'vitest'
import type { FixedWindowState } from '../../packages/sluice/src/algorithms/fixed-window.js'
import {
  decideAll,
  decideStep,
  refundStep,
  type StepDecision,
} from '../../packages/sluice/src/algorithms/rules.js'
import { resolvePolicy } from '../../packages/sluice/src/policy.js'

const fixed = resolvePolicy('fixed', { algorithm: 'fixed-window', limit: 3, window: 10_000 })
const bucket = resolvePolicy('bucket', { algorithm: 'token-bucket', limit: 2, window: 10_000 })
const AT = 1_000_000

describe('decideStep: a block in force', () => {
  it('denies with blocked and nothing left, waiting for the block when it is the longer wait', () => {
    const state: FixedWindowState = { start: AT - 1000, count: 1 }
    const d = decideStep(fixed, 1, undefined, state, 9000, AT + 60_000, AT, false)
    expect(d).toEqual({
      allowed: false,
      remaining: 0,
      resetMs: 60_000,
      retryAfterMs: 60_000,
      blocked: true,
      state,
    })
    expect(state).toEqual({ start: AT - 1000, count: 1 })
  })

  it("never shortens the units' own wait", () => {
    const spent: FixedWindowState = { start: AT - 1000, count: 3 }
    const d = decideStep(fixed, 1, undefined, spent, 9000, AT + 2000, AT, false)
    expect(d).toMatchObject({ allowed: false, blocked: true, resetMs: 9000, retryAfterMs: 9000 })
  })

  it('decides on the units alone once the block has ended', () => {
    const d = decideStep(fixed, 1, undefined, undefined, undefined, AT, AT, false)
    expect(d).toMatchObject({ allowed: true, remaining: 2, blocked: false, resetMs: 10_000 })
    expect(d.state).toEqual({ start: AT, count: 1 })
  })
})

describe('decideAll: all or nothing', () => {
  /** Two steps on empty states: a fixed window of 3, and a bucket of 2 asked for `bucketCost`. */
  function twoSteps(bucketCost: number) {
    const asked: [number, boolean][] = []
    const decide = (i: number, peek: boolean): StepDecision => {
      asked.push([i, peek])
      return i === 0
        ? decideStep(fixed, 1, undefined, undefined, undefined, 0, AT, peek)
        : decideStep(bucket, bucketCost, undefined, undefined, undefined, 0, AT, peek)
    }
    return { asked, decide }
  }

  it('commits a consume whose every step admits', () => {
    const { decide } = twoSteps(1)
    const all = decideAll(2, 'consume', decide)
    expect(all.commit).toBe(true)
    expect(all.results.map((r) => [r.allowed, r.remaining])).toEqual([
      [true, 2],
      [true, 1],
    ])
    expect(all.decisions[0]!.state).toEqual({ start: AT, count: 1 })
  })

  it('charges nothing when one step denies: a step that would admit reports its state as it is', () => {
    const { asked, decide } = twoSteps(3)
    const all = decideAll(2, 'consume', decide)
    expect(all.commit).toBe(false)
    expect(all.results).toEqual([
      { allowed: true, remaining: 3, resetMs: 0, retryAfterMs: 0, blocked: false },
      expect.objectContaining({ allowed: false, blocked: false }),
    ])
    expect(asked).toEqual([
      [0, false],
      [1, false],
      [0, true],
    ])
  })

  it('answers a peek as it is and never commits it', () => {
    const { asked, decide } = twoSteps(1)
    const all = decideAll(2, 'peek', decide)
    expect(all.commit).toBe(false)
    expect(all.results.map((r) => r.remaining)).toEqual([3, 2])
    expect(asked).toEqual([
      [0, true],
      [1, true],
    ])
  })

  it('hands back results without the states', () => {
    const { decide } = twoSteps(1)
    for (const r of decideAll(2, 'consume', decide).results) expect(r).not.toHaveProperty('state')
  })
})

describe('refundStep: when a refunded state ends', () => {
  it('when it is back to full, never later than it was written to end', () => {
    const state: FixedWindowState = { start: AT - 1000, count: 3 }
    const r = refundStep(fixed, 1, undefined, state, AT + 5000, AT)
    expect(r).toEqual({ state: { start: AT - 1000, count: 2 }, endsAt: AT + 5000, remaining: 1 })
    // Written to end later than its window: the window's end.
    expect(refundStep(fixed, 1, undefined, state, AT + 60_000, AT).endsAt).toBe(AT + 9000)
  })

  it('nothing left: no state, ending now, the whole limit left', () => {
    const state: FixedWindowState = { start: AT - 1000, count: 1 }
    expect(refundStep(fixed, 1, undefined, state, AT + 9000, AT)).toEqual({
      state: undefined,
      endsAt: AT,
      remaining: 3,
    })
  })
})
