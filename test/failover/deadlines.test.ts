// The one timer behind every store call's timeout (src/failover/deadlines.ts), on vitest's fake
// timers: each call times out its own timeout after it was made, by the clock it is given, with
// one timer pending for all of them.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { createDeadlines, type Deadline } from '../../packages/sluice/src/failover/deadlines.js'

interface Call extends Deadline {
  readonly name: string
}

const call = (name: string, deadline: number): Call => ({ name, deadline, settled: false, next: undefined })

beforeEach(() => {
  vi.useFakeTimers()
})
afterEach(() => {
  vi.useRealTimers()
})

describe('createDeadlines', () => {
  it('a call times out when the clock it was given passes its deadline, whatever other clocks say', async () => {
    // Far from performance.now() and Date.now(), and still while the fake timers run.
    let t = 5_000_000
    const expired: string[] = []
    const deadlines = createDeadlines<Call>(
      (c) => expired.push(c.name),
      () => t,
    )
    deadlines.track(call('a', t + 30))
    await vi.advanceTimersByTimeAsync(100)
    expect(expired).toEqual([])
    t += 30
    await vi.advanceTimersByTimeAsync(30)
    expect(expired).toEqual(['a'])
    expect(vi.getTimerCount()).toBe(0)
  })

  it('calls made later time out later, each exactly its timeout after it was made, one timer for all', async () => {
    const now = () => performance.now()
    const TIMEOUT = 150
    const expired: [string, number][] = []
    const deadlines = createDeadlines<Call>((c) => expired.push([c.name, now()]), now)
    const start = now()
    let most = 0
    for (const [i, name] of ['a', 'b', 'c'].entries()) {
      if (i > 0) await vi.advanceTimersByTimeAsync(60)
      for (let k = 0; k < 16; k++) deadlines.track(call(`${name}${k}`, now() + TIMEOUT))
      most = Math.max(most, vi.getTimerCount())
    }
    for (let ms = 0; ms < 400; ms++) {
      await vi.advanceTimersByTimeAsync(1)
      most = Math.max(most, vi.getTimerCount())
    }
    expect(most).toBe(1)
    expect(expired).toHaveLength(48)
    for (const [name, at] of expired) {
      const late = at - start - ('abc'.indexOf(name[0]!) * 60 + TIMEOUT)
      // Expired in the check phase after the timer fired: vitest runs that immediate 1 ms later.
      expect(late, name).toBeGreaterThanOrEqual(0)
      expect(late, name).toBeLessThanOrEqual(1)
    }
    expect(vi.getTimerCount()).toBe(0)
  })

  it('settled calls never time out, and the timer is not re-armed for them', async () => {
    const now = () => performance.now()
    const expired: string[] = []
    const deadlines = createDeadlines<Call>((c) => expired.push(c.name), now)
    const a = call('a', now() + 30)
    const b = call('b', now() + 30)
    deadlines.track(a)
    deadlines.track(b)
    deadlines.settle(a)
    await vi.advanceTimersByTimeAsync(10)
    const c = call('c', now() + 30)
    deadlines.track(c)
    deadlines.settle(c)
    await vi.advanceTimersByTimeAsync(100)
    expect(expired).toEqual(['b'])
    expect(vi.getTimerCount()).toBe(0)
  })

  it('a call leaves the list holding no link to younger calls, settled or timed out', async () => {
    // A dead call that still pointed at the younger ones would keep them reachable for a garbage
    // collector that has not yet found it dead (V8's scavenges, when the call had been promoted).
    const now = () => performance.now()
    const deadlines = createDeadlines<Call>(() => {}, now)
    const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((name) => call(name, now() + 30))
    deadlines.track(a!)
    deadlines.track(b!)
    deadlines.track(c!)
    expect(a!.next).toBe(b)
    // Settled out of order: b stays linked (to c) until a, ahead of it, leaves.
    deadlines.settle(b!)
    expect(b!.next).toBe(c)
    deadlines.settle(a!)
    expect(a!.next).toBeUndefined()
    expect(b!.next).toBeUndefined()
    deadlines.track(d!)
    expect(c!.next).toBe(d)
    await vi.advanceTimersByTimeAsync(100)
    expect(c!.next).toBeUndefined()
    expect(d!.next).toBeUndefined()
  })

  it('a reply that arrives in the same turn of the event loop as its timer wins', () => {
    const now = () => performance.now()
    const expired: string[] = []
    const deadlines = createDeadlines<Call>((c) => expired.push(c.name), now)
    const a = call('a', now() + 30)
    deadlines.track(a)
    // The timer fires (timers phase) ...
    vi.advanceTimersToNextTimer()
    expect(now()).toBe(30)
    expect(expired).toEqual([])
    // ... the loop then polls the socket and the reply settles the call ...
    deadlines.settle(a)
    // ... and only in the check phase are the due calls expired.
    vi.advanceTimersToNextTimer()
    expect(expired).toEqual([])
    expect(vi.getTimerCount()).toBe(0)
  })
})
