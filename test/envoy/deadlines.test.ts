// The gRPC listener's call deadlines (deadlines.ts) on a fake clock: each call expires once its
// timeout has passed and not before, calls of one timeout in the order they began and those of
// others apart, a dropped call never, and a list emptied meanwhile serves the calls after it.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import type { Tracked } from '../../packages/sluice-server/src/envoy/deadlines.js'
import { deadlines } from '../../packages/sluice-server/src/envoy/deadlines.js'

interface Call extends Tracked {
  name: string
}
const call = (name: string): Call => ({
  name,
  deadlineList: undefined,
  previous: undefined,
  next: undefined,
  dueAt: 0,
})

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] })
})
afterEach(() => {
  vi.useRealTimers()
})

function tracker() {
  const expired: string[] = []
  const due = deadlines<Call>((c) => expired.push(`${c.name}@${Math.round(performance.now())}`))
  return { due, expired }
}

describe('call deadlines', () => {
  it('expires each call once its timeout has passed, in the order they are due', () => {
    const { due, expired } = tracker()
    const start = Math.round(performance.now())
    due.track(call('a'), 100)
    vi.advanceTimersByTime(30)
    due.track(call('b'), 100)
    due.track(call('c'), 20)
    vi.advanceTimersByTime(69)
    expect(expired).toEqual([`c@${start + 50}`])
    vi.advanceTimersByTime(1)
    expect(expired).toEqual([`c@${start + 50}`, `a@${start + 100}`])
    vi.advanceTimersByTime(30)
    expect(expired).toEqual([`c@${start + 50}`, `a@${start + 100}`, `b@${start + 130}`])
  })

  it('never expires a dropped call, wherever it is in its list', () => {
    const { due, expired } = tracker()
    const calls = ['a', 'b', 'c', 'd'].map(call)
    for (const c of calls) due.track(c, 50)
    due.drop(calls[0]!) // the first
    due.drop(calls[2]!) // one in the middle
    due.drop(calls[3]!) // the last
    due.drop(calls[3]!) // twice: nothing happens
    vi.advanceTimersByTime(50)
    expect(expired.map((e) => e.split('@')[0])).toEqual(['b'])
    due.drop(calls[1]!) // after it expired: nothing happens
    vi.advanceTimersByTime(500)
    expect(expired).toHaveLength(1)
  })

  it('serves calls tracked after their list emptied, at their own time', () => {
    const { due, expired } = tracker()
    const start = Math.round(performance.now())
    const first = call('first')
    due.track(first, 100)
    due.drop(first)
    vi.advanceTimersByTime(60)
    due.track(call('second'), 100) // the list's timer is still set for the first call
    vi.advanceTimersByTime(40)
    expect(expired).toEqual([])
    vi.advanceTimersByTime(59)
    expect(expired).toEqual([])
    vi.advanceTimersByTime(1)
    expect(expired).toEqual([`second@${start + 160}`])
    // Its timer found the list empty and forgot it: the next call starts a list of its own.
    due.track(call('third'), 100)
    vi.advanceTimersByTime(100)
    expect(expired).toEqual([`second@${start + 160}`, `third@${start + 260}`])
  })

  it('expires a call of timeout 0 on the next timer turn', () => {
    const { due, expired } = tracker()
    due.track(call('now'), 0)
    expect(expired).toEqual([])
    vi.advanceTimersByTime(1)
    expect(expired.map((e) => e.split('@')[0])).toEqual(['now'])
  })
})
