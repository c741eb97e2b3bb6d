// wait / reserve-settle / throttle on the memory store, on vitest's fake timers (the store's clock,
// the waiters' deadlines and their sleeps all move only when the test advances them): FIFO, bounds,
// the up-front timeout, abort, the forced charge of settle and its overshoot.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { UnsupportedError } from '../../packages/sluice/src/errors.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import type { Policy } from '../../packages/sluice/src/policy.js'
import type { Step, Store } from '../../packages/sluice/src/store.js'
import { forwardStore } from '../../packages/sluice/src/store.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { fakeClock, fakeStore } from '../helpers/fake-clock.js'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
/** Let `ms` pass on the fake clock, running the timers due and the promise jobs they start. */
const pass = (ms: number) => vi.advanceTimersByTimeAsync(ms)

/** Settles to whether `promise` settled before any time passed. */
async function settledAtOnce(promise: Promise<unknown>): Promise<boolean> {
  let settled = false
  const done = () => {
    settled = true
  }
  promise.then(done, done)
  const before = performance.now()
  await pass(0)
  return settled && performance.now() === before
}

beforeEach(() => {
  vi.useFakeTimers()
})
afterEach(() => {
  vi.useRealTimers()
})

/** A remote-looking store over the memory store that counts calls (what wait costs the store). */
function countingStore(): Store & { calls: number } {
  const inner = memoryStore()
  const counted = {
    name: 'counted',
    inProcess: false,
    calls: 0,
    apply(steps: readonly Step[], mode: 'consume' | 'peek') {
      counted.calls++
      return inner.apply(steps, mode)
    },
    refund: (steps: readonly Step[]) => inner.refund(steps),
    block: (steps: readonly Step[], ms: number) => inner.block(steps, ms),
    reset: (steps: readonly Step[]) => inner.reset(steps),
    charge: (steps: readonly Step[]) => inner.charge(steps),
    now: () => inner.now(),
    records: inner.records,
    close: () => inner.close(),
  }
  return counted
}

describe('wait', () => {
  it('admits waiters in FIFO order, never above the limit, sleeping the retry time', async () => {
    const limiter = createLimiter({
      policies: { api: { algorithm: 'fixed-window', limit: 3, window: 200 } },
    })
    const started = performance.now()
    const order: number[] = []
    const times: number[] = []
    const all = Promise.all(
      Array.from({ length: 9 }, (_, i) =>
        limiter.wait('api', 'k', { maxWaitMs: 2_000 }).then((d) => {
          expect(d.allowed).toBe(true)
          order.push(i)
          times.push(performance.now() - started)
        }),
      ),
    )
    await pass(1_000)
    await all
    expect(order).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8])
    // Three windows of three: the first three at once, the next three when the second window
    // opens at 200 ms, the last three at 400 ms (each sleep is a ms longer than the retry time).
    expect(times).toEqual([0, 0, 0, 201, 201, 201, 402, 402, 402])
  })

  for (const algorithm of ['token-bucket', 'fixed-window', 'sliding-window-log'] as const) {
    it(`${algorithm}: one queue asks the store at most twice per admitted waiter (about once where the numbers say when the next fits)`, async () => {
      const store = countingStore()
      const limiter = createLimiter({
        store,
        localDenyCache: false,
        policies: {
          api:
            algorithm === 'token-bucket'
              ? { algorithm, limit: 100, window: 1_000, burst: 1 }
              : { algorithm, limit: 2, window: 40 },
        },
      })
      const all = Promise.all(
        Array.from({ length: 20 }, () => limiter.wait('api', 'k', { maxWaitMs: 5_000 })),
      )
      await pass(5_000)
      expect((await all).every((d) => d.allowed)).toBe(true)
      expect(store.calls / 20).toBeLessThanOrEqual(algorithm === 'sliding-window-log' ? 2 : 1.25)
    })
  }

  it("refuses up front with reason 'timeout' when the store's retry time passes maxWaitMs", async () => {
    const store = countingStore()
    const limiter = createLimiter({
      store,
      policies: { api: { algorithm: 'fixed-window', limit: 1, window: '10s' } },
    })
    expect((await limiter.consume('api', 'k')).allowed).toBe(true)
    const before = store.calls
    const waiting = limiter.wait('api', 'k', { maxWaitMs: 1_000 })
    expect(await settledAtOnce(waiting)).toBe(true)
    const d = await waiting
    expect(d).toMatchObject({ allowed: false, reason: 'timeout' })
    expect(d.retryAfterMs).toBeGreaterThan(9_000)
    expect(store.calls - before).toBe(1)
  })

  it("returns a cost above capacity (costAboveCapacity: 'deny') at once, as the store's denial, not retried until maxWaitMs", async () => {
    const store = countingStore()
    const limiter = createLimiter({
      store,
      policies: {
        api: { algorithm: 'fixed-window', limit: 5, window: 100, costAboveCapacity: 'deny' },
        wide: { algorithm: 'fixed-window', limit: 100, window: 100 },
      },
    })
    const single = limiter.wait('api', 'k', { cost: 6, maxWaitMs: 10_000 })
    expect(await settledAtOnce(single)).toBe(true)
    expect(await single).toMatchObject({ allowed: false, reason: 'cost_above_capacity' })
    expect(store.calls).toBe(1)
    const layered = limiter.wait(
      [
        { policy: 'wide', key: 'k', cost: 6 },
        { policy: 'api', key: 'k', cost: 6 },
      ],
      { maxWaitMs: 10_000 },
    )
    expect(await settledAtOnce(layered)).toBe(true)
    expect(await layered).toMatchObject({ allowed: false, reason: 'cost_above_capacity', deniedBy: 'api' })
    expect(store.calls).toBe(2)
    // Behind a waiter just admitted, it still asks the store rather than sleeping to the next window.
    const admitted = limiter.wait('api', 'q', { cost: 5, maxWaitMs: 10_000 })
    const behind = limiter.wait('api', 'q', { cost: 6, maxWaitMs: 10_000 })
    expect((await admitted).allowed).toBe(true)
    expect(await settledAtOnce(behind)).toBe(true)
    expect(await behind).toMatchObject({ allowed: false, reason: 'cost_above_capacity' })
    expect((await limiter.peek('api', 'k')).remaining).toBe(5)
  })

  it('refuses waiters behind a sleeping head whose deadline comes first, without asking the store', async () => {
    const store = countingStore()
    const limiter = createLimiter({
      store,
      localDenyCache: false,
      policies: { api: { algorithm: 'fixed-window', limit: 1, window: 300 } },
    })
    await limiter.consume('api', 'k')
    const head = limiter.wait('api', 'k', { maxWaitMs: 1_000 })
    await pass(20)
    const calls = store.calls
    const waiting = limiter.wait('api', 'k', { maxWaitMs: 50 })
    expect(await settledAtOnce(waiting)).toBe(true)
    expect(await waiting).toMatchObject({ allowed: false, reason: 'timeout' })
    expect(store.calls).toBe(calls)
    await pass(300)
    expect((await head).allowed).toBe(true)
  })

  it('aborts mid-wait with SLUICE_WAIT_ABORTED and charges nothing', async () => {
    const limiter = createLimiter({
      policies: { api: { algorithm: 'fixed-window', limit: 1, window: 300 } },
    })
    await limiter.consume('api', 'k')
    const controller = new AbortController()
    const waiting = limiter.wait('api', 'k', { maxWaitMs: 1_000, signal: controller.signal })
    const second = limiter.wait('api', 'k', { maxWaitMs: 1_000 })
    const rejected = expect(waiting).rejects.toMatchObject({ code: 'SLUICE_WAIT_ABORTED' })
    await pass(50)
    controller.abort(new Error('user left'))
    await rejected
    // The aborted head leaves; the next waiter takes its place and gets the unit.
    await pass(300)
    const d = await second
    expect(d.allowed).toBe(true)
    expect((await limiter.peek('api', 'k')).remaining).toBe(0)
    await expect(limiter.wait('api', 'k', { signal: AbortSignal.abort() })).rejects.toMatchObject({
      code: 'SLUICE_WAIT_ABORTED',
    })
  })

  it('bounds waiters per key and in total with SLUICE_TOO_MANY_WAITERS', async () => {
    const limiter = createLimiter({
      waiting: { maxWaitersPerKey: 2, maxWaiters: 3 },
      policies: { api: { algorithm: 'fixed-window', limit: 1, window: 200 } },
    })
    await limiter.consume('api', 'a')
    await limiter.consume('api', 'b')
    const a1 = limiter.wait('api', 'a', { maxWaitMs: 1_000 })
    const a2 = limiter.wait('api', 'a', { maxWaitMs: 1_000 })
    await expect(limiter.wait('api', 'a', { maxWaitMs: 1_000 })).rejects.toMatchObject({
      code: 'SLUICE_TOO_MANY_WAITERS',
    })
    const b1 = limiter.wait('api', 'b', { maxWaitMs: 1_000 })
    await expect(limiter.wait('api', 'b', { maxWaitMs: 1_000 })).rejects.toMatchObject({
      code: 'SLUICE_TOO_MANY_WAITERS',
    })
    await pass(1_000)
    const results = await Promise.all([a1, a2, b1])
    expect(results.map((d) => d.allowed)).toEqual([true, true, true])
    expect(() =>
      createLimiter({
        waiting: { maxWaiters: 0 },
        policies: { api: { algorithm: 'fixed-window', limit: 1, window: 1 } },
      }),
    ).toThrow(expect.objectContaining({ code: 'SLUICE_INVALID_OPTIONS' }))
    expect(() =>
      createLimiter({
        waiting: { maxWaiter: 3 } as never,
        policies: { api: { algorithm: 'fixed-window', limit: 1, window: 1 } },
      }),
    ).toThrow(/did you mean 'maxWaiters'/)
  })

  it('a concurrency waiter gets a lease when one is released, not at the lease timeout', async () => {
    const limiter = createLimiter({
      policies: { jobs: { algorithm: 'concurrency', limit: 1, timeout: '30s' } },
    })
    const first = await limiter.acquire('jobs', 'k')
    expect(first.allowed).toBe(true)
    const started = performance.now()
    let waited: number | undefined
    const waiting = limiter.wait('jobs', 'k', { maxWaitMs: 2_000 }).then((d) => {
      waited = performance.now() - started
      return d
    })
    await pass(50)
    expect(waited).toBeUndefined()
    await first.lease!.release()
    await pass(0)
    // Admitted at the release, not at the next recheck (100 ms) nor at the lease's timeout.
    expect(waited).toBe(50)
    const d = await waiting
    expect(d.allowed).toBe(true)
    expect(d.lease).toBeDefined()
    // No release within maxWaitMs: refused at the deadline (the head's last sleep ends a ms after
    // it), not before.
    const lateStarted = performance.now()
    let lateAfter: number | undefined
    const lateWaiting = limiter.wait('jobs', 'k', { maxWaitMs: 150 }).then((x) => {
      lateAfter = performance.now() - lateStarted
      return x
    })
    await pass(149)
    expect(lateAfter).toBeUndefined()
    await pass(2)
    expect(lateAfter).toBeGreaterThanOrEqual(150)
    const late = await lateWaiting
    expect(late).toMatchObject({ allowed: false, reason: 'timeout' })
    expect(late.lease).toBeUndefined()
    await d.lease!.release()
  })

  it('rejects bad options before anything is queued', async () => {
    const limiter = createLimiter({ policies: { api: { algorithm: 'fixed-window', limit: 1, window: 100 } } })
    await expect(limiter.wait('api', 'k', { maxWaitMs: -1 })).rejects.toMatchObject({
      code: 'SLUICE_INVALID_OPTIONS',
    })
    await expect(limiter.wait('nope' as 'api', 'k')).rejects.toMatchObject({ code: 'SLUICE_UNKNOWN_POLICY' })
    await expect(limiter.wait('api', '')).rejects.toMatchObject({ code: 'SLUICE_INVALID_KEY' })
  })
})

describe('reserve / settle', () => {
  const policies = {
    tokens: { algorithm: 'token-bucket', limit: 10_000, window: '1m' },
    org: { algorithm: 'fixed-window', limit: 50_000, window: '1m' },
  } as const

  it('refunds the difference when the true cost is lower, charges it past the limit when higher', async () => {
    const clock = fakeClock()
    const limiter = createLimiter({ store: fakeStore(clock), policies })
    const r = await limiter.reserve('tokens', 't', { cost: 2_000 })
    expect(r.allowed).toBe(true)
    expect(r.remaining).toBe(8_000)
    await r.settle(500)
    expect((await limiter.peek('tokens', 't')).remaining).toBe(9_500)
    // Five estimates of 1,900 fit (9,500); settling each at 3,000 takes the key 5,500 past its limit.
    const reservations = []
    for (let i = 0; i < 5; i++) reservations.push(await limiter.reserve('tokens', 't', { cost: 1_900 }))
    expect(reservations.every((x) => x.allowed)).toBe(true)
    expect((await limiter.reserve('tokens', 't', { cost: 1 })).allowed).toBe(false)
    for (const x of reservations) await x.settle(3_000)
    const after = await limiter.peek('tokens', 't')
    expect(after.remaining).toBe(0)
    // Later requests pay: 5,500 of debt plus one token refill at 10,000 a minute.
    const next = await limiter.consume('tokens', 't')
    expect(next.allowed).toBe(false)
    expect(next.retryAfterMs).toBe(Math.ceil(((5_500 + 1) * 60_000) / 10_000))
  })

  it('settle twice and settle after settleWithin are typed errors; an expired one keeps its estimate', async () => {
    const limiter = createLimiter({ policies })
    const r = await limiter.reserve('tokens', 't', { cost: 100 })
    await r.settle(100)
    await expect(r.settle(100)).rejects.toMatchObject({ code: 'SLUICE_RESERVATION_SETTLED' })
    const late = await limiter.reserve('org', 'u', { cost: 100, settleWithin: 30 })
    await pass(31)
    await expect(late.settle(10)).rejects.toMatchObject({ code: 'SLUICE_RESERVATION_EXPIRED' })
    expect((await limiter.peek('org', 'u')).remaining).toBe(49_900)
    await expect(r.settle(-1)).rejects.toMatchObject({ code: 'SLUICE_INVALID_COST' })
  })

  it('a concurrent second settle is refused while the first is in flight', async () => {
    const limiter = createLimiter({ policies })
    const r = await limiter.reserve('tokens', 't', { cost: 100 })
    const results = await Promise.allSettled([r.settle(300), r.settle(300)])
    expect(results.map((x) => x.status).sort()).toEqual(['fulfilled', 'rejected'])
    expect((await limiter.peek('tokens', 't')).remaining).toBe(9_700)
  })

  it('settles every layer of a layered reservation', async () => {
    const clock = fakeClock()
    const limiter = createLimiter({ store: fakeStore(clock), policies })
    const r = await limiter.reserve([
      { policy: 'tokens', key: 'user-1', cost: 1_000 },
      { policy: 'org', key: 'acme', cost: 1_000 },
    ])
    expect(r.allowed).toBe(true)
    await r.settle(4_000)
    expect((await limiter.peek('tokens', 'user-1')).remaining).toBe(6_000)
    expect((await limiter.peek('org', 'acme')).remaining).toBe(46_000)
    const s = await limiter.reserve([
      { policy: 'tokens', key: 'user-1', cost: 1_000 },
      { policy: 'org', key: 'acme', cost: 1_000 },
    ])
    await s.settle(0)
    expect((await limiter.peek('tokens', 'user-1')).remaining).toBe(6_000)
    expect((await limiter.peek('org', 'acme')).remaining).toBe(46_000)
  })

  it('a denied reservation cannot be settled; concurrency policies and stores without charge are typed errors', async () => {
    const limiter = createLimiter({
      policies: { ...policies, jobs: { algorithm: 'concurrency', limit: 2, timeout: '30s' } },
    })
    const all = await limiter.reserve('org', 'big', { cost: 50_000 })
    await all.settle(50_000)
    const again = await limiter.reserve('org', 'big', { cost: 1 })
    expect(again.allowed).toBe(false)
    await expect(again.settle(1)).rejects.toMatchObject({ code: 'SLUICE_INVALID_OPTIONS' })
    await expect(limiter.reserve('jobs', 'k')).rejects.toMatchObject({ code: 'SLUICE_INVALID_OPTIONS' })

    const inner = memoryStore()
    // A store that cannot charge past the limit refuses it itself.
    const noCharge = forwardStore(inner, {
      name: 'plain',
      inProcess: false,
      async charge() {
        throw new UnsupportedError('plain store: no forced charge')
      },
    })
    const plain = createLimiter({ store: noCharge, policies })
    const r = await plain.reserve('tokens', 't', { cost: 10 })
    await expect(r.settle(20)).rejects.toMatchObject({ code: 'SLUICE_UNSUPPORTED' })
    await r.settle(5)
    expect((await plain.peek('tokens', 't')).remaining).toBe(9_995)
  })
})

describe('the forced charge of each algorithm (memory store)', () => {
  const shapes: Record<string, Policy> = {
    'fixed-window': { algorithm: 'fixed-window', limit: 10, window: '1s' },
    'sliding-window-log': { algorithm: 'sliding-window-log', limit: 10, window: '1s' },
    'sliding-window-counter': { algorithm: 'sliding-window-counter', limit: 10, window: '1s' },
    'token-bucket': { algorithm: 'token-bucket', limit: 10, window: '1s' },
    gcra: { algorithm: 'gcra', limit: 10, window: '1s' },
  }
  for (const [name, policy] of Object.entries(shapes)) {
    it(`${name}: a charge past the limit denies until the overshoot drains`, async () => {
      const clock = fakeClock()
      const store = fakeStore(clock)
      const limiter = createLimiter({ store, policies: { p: policy } })
      const r = await limiter.reserve('p', 'k', { cost: 8 })
      await r.settle(15)
      const d = await limiter.consume('p', 'k')
      expect(d).toMatchObject({ allowed: false, remaining: 0 })
      expect(d.retryAfterMs).toBeGreaterThan(0)
      // After the retry time the request passes, and never before.
      clock.advance(d.retryAfterMs - 1)
      expect((await limiter.consume('p', 'k')).allowed).toBe(false)
      clock.advance(1)
      expect((await limiter.consume('p', 'k')).allowed).toBe(true)
    })
  }
})

describe('throttle', () => {
  it('keeps to the limit and the concurrency cap; errors pass through', async () => {
    const limiter = createLimiter({
      policies: { out: { algorithm: 'fixed-window', limit: 4, window: 200 } },
    })
    let running = 0
    let most = 0
    const starts: number[] = []
    const t0 = performance.now()
    const call = limiter.throttle(
      'out',
      async (n: number) => {
        running++
        most = Math.max(most, running)
        starts.push(performance.now() - t0)
        await sleep(30)
        running--
        if (n === 3) throw new Error('upstream 500')
        return n * 2
      },
      { key: 'github', maxWaitMs: 2_000, concurrency: 2 },
    )
    const settled = Promise.allSettled(Array.from({ length: 8 }, (_, i) => call(i)))
    await pass(2_000)
    const results = await settled
    expect(results[3]).toMatchObject({ status: 'rejected', reason: { message: 'upstream 500' } })
    expect(results[5]).toMatchObject({ status: 'fulfilled', value: 10 })
    expect(most).toBe(2)
    // 4 per 200 ms window: the 5th call starts in the second window.
    expect(starts.filter((t) => t < 200)).toHaveLength(4)
    expect(starts[4]).toBeGreaterThanOrEqual(200)
  })

  it('stop() rejects queued calls with SLUICE_THROTTLE_STOPPED; running calls finish', async () => {
    const limiter = createLimiter({
      policies: { out: { algorithm: 'fixed-window', limit: 1, window: '1s' } },
    })
    const call = limiter.throttle(
      'out',
      async () => {
        await sleep(50)
        return 'done'
      },
      { key: 'k', maxWaitMs: 5_000, concurrency: 1 },
    )
    const first = call()
    const second = call()
    const third = call()
    await pass(10)
    expect(call.queued).toBe(2)
    call.stop()
    await expect(second).rejects.toMatchObject({ code: 'SLUICE_THROTTLE_STOPPED' })
    await expect(third).rejects.toMatchObject({ code: 'SLUICE_THROTTLE_STOPPED' })
    await pass(40)
    await expect(first).resolves.toBe('done')
    await expect(call()).rejects.toMatchObject({ code: 'SLUICE_THROTTLE_STOPPED' })
  })

  it("a call that cannot fit in maxWaitMs rejects with SLUICE_RATE_LIMITED (reason 'timeout')", async () => {
    const limiter = createLimiter({
      policies: { out: { algorithm: 'fixed-window', limit: 1, window: '10s' } },
    })
    const call = limiter.throttle('out', async () => 'ok', { key: 'k', maxWaitMs: 100 })
    await call()
    await expect(call()).rejects.toMatchObject({
      code: 'SLUICE_RATE_LIMITED',
      decision: { reason: 'timeout' },
    })
  })
})
