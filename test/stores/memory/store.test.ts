// The memory store's own promises: bounded by maxKeys with LRU, expired idle keys swept without
// timers. Its heap per key and under a million distinct keys are budgets of `npm run bench -- --check`.
import { describe, expect, it } from 'vitest'
import { createLimiter } from '../../../packages/sluice/src/limiter.js'
import { fakeClock, fakeStore } from '../../helpers/fake-clock.js'

describe('bounded by maxKeys, least recently used first', () => {
  it('never holds more than maxKeys; a hot key survives, cold ones go', async () => {
    const clock = fakeClock()
    const store = fakeStore(clock, 100)
    const limiter = createLimiter({
      store,
      policies: { p: { algorithm: 'fixed-window', limit: 1_000_000, window: '1h' } },
    })
    let hotRemaining = 1_000_000
    for (let i = 0; i < 10_000; i++) {
      const hot = limiter.consumeSync('p', 'hot')
      // The hot key's count was never forgotten: exactly one less every time.
      expect(hot.remaining).toBe(--hotRemaining)
      limiter.consumeSync('p', `cold-${i}`)
      expect(store.size).toBeLessThanOrEqual(100)
    }
    // An early cold key was evicted: its window starts afresh.
    expect((await limiter.peek('p', 'cold-0')).remaining).toBe(1_000_000)
    // A recent cold key is still held.
    expect((await limiter.peek('p', 'cold-9999')).remaining).toBe(999_999)
  })

  it('a key read (even by peek) is promoted and outlives keys written after it', async () => {
    const clock = fakeClock()
    const store = fakeStore(clock, 10)
    const limiter = createLimiter({ store, policies: { p: { algorithm: 'gcra', limit: 100, window: '1h' } } })
    limiter.consumeSync('p', 'kept')
    for (let i = 0; i < 50; i++) {
      limiter.consumeSync('p', `k${i}`)
      if (i % 3 === 0) await limiter.peek('p', 'kept')
    }
    expect((await limiter.peek('p', 'kept')).remaining).toBe(99)
    expect(store.size).toBeLessThanOrEqual(10)
  })

  it('size counts keys per policy: the same key under two policies is two keys', async () => {
    const clock = fakeClock()
    const store = fakeStore(clock)
    const limiter = createLimiter({
      store,
      policies: {
        a: { algorithm: 'fixed-window', limit: 5, window: '1m' },
        b: { algorithm: 'sliding-window-log', limit: 5, window: '1m' },
      },
    })
    await limiter.consume('a', 'k')
    await limiter.consume('b', 'k')
    expect(store.size).toBe(2)
    await limiter.reset('a', 'k')
    expect(store.size).toBe(1)
    await limiter.close()
    expect(store.size).toBe(0)
  })
})

describe('expiry without timers', () => {
  /** A limiter of 10 per second on a store with a fake clock, and `idle` keys that had one decision each. */
  function withIdleKeys(algorithm: 'sliding-window-counter' | 'fixed-window', idle: number) {
    const clock = fakeClock()
    const store = fakeStore(clock)
    const limiter = createLimiter({ store, policies: { p: { algorithm, limit: 10, window: '1s' } } })
    for (let i = 0; i < idle; i++) limiter.consumeSync('p', `idle-${i}`)
    return { clock, store, limiter }
  }

  it('expired idle keys are swept while traffic moves on to other keys', async () => {
    const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length
    const timersBefore = timers()
    const { clock, store, limiter } = withIdleKeys('sliding-window-counter', 5000)
    expect(store.size).toBe(5000)
    // Two windows later every idle key is empty again; only 50 keys keep getting traffic.
    clock.advance(2000)
    // Limit 10/s on 50 keys: most of these are denied, and denied decisions sweep too.
    for (let i = 0; i < 60_000; i++) {
      limiter.consumeSync('p', `busy-${i % 50}`)
      if (i % 10 === 0) clock.advance(1)
    }
    expect(store.size).toBeLessThanOrEqual(50 + 100)
    // Swept by the decisions themselves: the store started no timer.
    expect(timers()).toBe(timersBefore)
  })

  it('decisions sweep one key per millisecond of the clock, however many decisions it holds', () => {
    const { clock, store, limiter } = withIdleKeys('fixed-window', 1000)
    clock.advance(2000)
    // Ten thousand decisions in one millisecond (all but ten denied): the sweeper moves once,
    // besides the step of the one insert.
    for (let i = 0; i < 10_000; i++) limiter.consumeSync('p', 'busy')
    expect(store.size).toBeGreaterThanOrEqual(1000 + 1 - 2)
    // A millisecond with a decision each: a step each, the first of them starting a pass over the
    // 1,001 keys. After that pass every idle key is gone.
    for (let i = 0; i < 1002; i++) {
      clock.advance(1)
      limiter.consumeSync('p', 'busy')
    }
    expect(store.size).toBe(1)
  })

  it('keys decided on in every pass of the sweeper stay stored, however their first pass went', () => {
    // A token bucket refilling one token a millisecond: a key is back to full (expired) 1 ms after
    // a decision, and each of these keys has one every 2 ms or so: it expires between its
    // decisions, and the entry is reused in place.
    const clock = fakeClock()
    const store = fakeStore(clock)
    const limiter = createLimiter({
      store,
      policies: { p: { algorithm: 'token-bucket', limit: 1000, window: '1s' } },
    })
    const keys = Array.from({ length: 1000 }, (_, i) => `k${i}`)
    // The first round makes every key while the clock moves fast (as code runs before it is
    // compiled): the sweeper, moved by each insert and each millisecond, gets ahead of the keys
    // being made and comes back round to the first ones before they are decided on again.
    keys.forEach((k, i) => {
      limiter.consumeSync('p', k)
      if (i % 10 === 9) clock.advance(1)
    })
    // The second round makes again whatever the first one lost.
    keys.forEach((k, i) => {
      limiter.consumeSync('p', k)
      if (i % 600 === 599) clock.advance(1)
    })
    // From then on every key has a decision in each pass of the sweeper: none may go. A key
    // dropped here is made again at its next decision, whose insert moves the sweeper on to drop
    // the next one: a churn that kept up to 95% of a process's decisions inserting.
    let fewest = store.size
    for (let round = 0; round < 20; round++) {
      keys.forEach((k, i) => {
        limiter.consumeSync('p', k)
        fewest = Math.min(fewest, store.size)
        if (i % 600 === 599) clock.advance(1)
      })
    }
    expect(fewest).toBe(keys.length)
  })

  it('a key refilled to full reads as empty even before it is swept', async () => {
    const clock = fakeClock()
    const limiter = createLimiter({
      store: fakeStore(clock),
      policies: { p: { algorithm: 'token-bucket', limit: 10, window: '1s' } },
    })
    await limiter.consume('p', 'k', { cost: 10 })
    clock.advance(1000)
    expect(await limiter.peek('p', 'k')).toMatchObject({ remaining: 10, resetMs: 0 })
  })
})
