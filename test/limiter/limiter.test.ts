// The limiter's behaviour above the store: layered all-or-nothing, block, leases, consumeSync, events.
import { describe, expect, it } from 'vitest'
import { createLimiter, type DecisionEvent } from '../../packages/sluice/src/limiter.js'
import { fakeClock, fakeStore } from '../helpers/fake-clock.js'

function setup() {
  const clock = fakeClock()
  const store = fakeStore(clock)
  const limiter = createLimiter({
    store,
    policies: {
      api: { algorithm: 'token-bucket', limit: 10, window: '1s', burst: 20 },
      perIp: { algorithm: 'sliding-window-counter', limit: 1000, window: '1h' },
      perUser: { algorithm: 'sliding-window-log', limit: 3, window: '1m' },
      burst: { algorithm: 'fixed-window', limit: 5, window: '1s' },
      jobs: { algorithm: 'concurrency', limit: 2, timeout: '30s' },
    },
  })
  return { clock, store, limiter }
}

describe('single checks', () => {
  it('returns the documented decision shape', async () => {
    const { limiter } = setup()
    const d = await limiter.consume('api', 'user-42')
    expect(d).toEqual({
      allowed: true,
      limit: 20,
      remaining: 19,
      resetMs: 100,
      retryAfterMs: 0,
      policy: 'api',
      key: 'user-42',
    })
    const w = await limiter.consume('api', 'user-42', { cost: 5 })
    expect(w.remaining).toBe(14)
    expect((await limiter.consume('burst', 'k')).limit).toBe(5)
  })

  it('denies with reason limit and an exact retryAfterMs', async () => {
    const { limiter, clock } = setup()
    await limiter.consume('perUser', 'u', { cost: 3 })
    clock.advance(20_000)
    const d = await limiter.consume('perUser', 'u')
    expect(d).toMatchObject({ allowed: false, reason: 'limit', remaining: 0, retryAfterMs: 40_000 })
    clock.advance(40_000)
    expect((await limiter.consume('perUser', 'u')).allowed).toBe(true)
  })

  it('peek, refund and reset', async () => {
    const { limiter } = setup()
    await limiter.consume('burst', 'k', { cost: 4 })
    expect((await limiter.peek('burst', 'k')).remaining).toBe(1)
    expect((await limiter.peek('burst', 'k', { cost: 2 })).allowed).toBe(false)
    await limiter.refund('burst', 'k', 3)
    expect((await limiter.peek('burst', 'k')).remaining).toBe(4)
    await limiter.refund('burst', 'k')
    expect((await limiter.peek('burst', 'k')).remaining).toBe(5)
    await limiter.consume('burst', 'k', { cost: 5 })
    await limiter.reset('burst', 'k')
    expect(await limiter.peek('burst', 'k')).toMatchObject({ remaining: 5, resetMs: 0 })
  })

  it('keys of different policies never share state', async () => {
    const { limiter } = setup()
    await limiter.consume('burst', 'same', { cost: 5 })
    expect((await limiter.consume('api', 'same')).allowed).toBe(true)
    expect((await limiter.consume('burst', 'other')).allowed).toBe(true)
  })
})

describe('layered checks are all-or-nothing', () => {
  it('allowed: every layer is charged; the headline is the layer closest to its limit', async () => {
    const { limiter } = setup()
    const d = await limiter.consume([
      { policy: 'perIp', key: '203.0.113.7' },
      { policy: 'perUser', key: 'u1' },
    ])
    expect(d.allowed).toBe(true)
    expect(d.deniedBy).toBeUndefined()
    expect(d.results.map((r) => [r.policy, r.remaining])).toEqual([
      ['perIp', 999],
      ['perUser', 2],
    ])
    // perUser has 2/3 left, perIp 999/1000: perUser is the tighter one.
    expect(d).toMatchObject({ policy: 'perUser', key: 'u1', remaining: 2, limit: 3 })
  })

  it('denied: no layer is charged, the decision names the layer that denied', async () => {
    const { limiter } = setup()
    await limiter.consume('perUser', 'u1', { cost: 3 })
    const before = await limiter.peek('perIp', 'ip')
    const d = await limiter.consume([
      { policy: 'perIp', key: 'ip', cost: 10 },
      { policy: 'perUser', key: 'u1' },
      { policy: 'api', key: 'u1', cost: 20 },
    ])
    expect(d.allowed).toBe(false)
    expect(d.deniedBy).toBe('perUser')
    expect(d).toMatchObject({ policy: 'perUser', reason: 'limit', remaining: 0, retryAfterMs: 60_000 })
    expect(d.results.map((r) => r.allowed)).toEqual([true, false, true])
    // Layers that would admit report their state as it is, uncharged.
    expect(d.results[0]).toMatchObject({ remaining: 1000 })
    expect(d.results[2]).toMatchObject({ remaining: 20 })
    expect(await limiter.peek('perIp', 'ip')).toEqual(before)
    expect((await limiter.peek('api', 'u1')).remaining).toBe(20)
  })

  it('the first denying layer is named when several deny', async () => {
    const { limiter } = setup()
    await limiter.consume('burst', 'k', { cost: 5 })
    await limiter.consume('perUser', 'k', { cost: 3 })
    const d = await limiter.consume([
      { policy: 'api', key: 'k' },
      { policy: 'burst', key: 'k' },
      { policy: 'perUser', key: 'k' },
    ])
    expect(d.deniedBy).toBe('burst')
    expect(d.results.filter((r) => !r.allowed).map((r) => r.policy)).toEqual(['burst', 'perUser'])
    expect((await limiter.peek('api', 'k')).remaining).toBe(20)
  })

  it('a blocked layer denies the whole check with reason blocked', async () => {
    const { limiter } = setup()
    await limiter.block('perIp', 'ip', '10m')
    const d = await limiter.consume([
      { policy: 'perUser', key: 'u' },
      { policy: 'perIp', key: 'ip' },
    ])
    expect(d).toMatchObject({ allowed: false, deniedBy: 'perIp', reason: 'blocked', retryAfterMs: 600_000 })
    expect((await limiter.peek('perUser', 'u')).remaining).toBe(3)
  })

  it('layered peek charges nothing', async () => {
    const { limiter } = setup()
    const d = await limiter.peek([
      { policy: 'perUser', key: 'u' },
      { policy: 'burst', key: 'u', cost: 5 },
    ])
    expect(d.allowed).toBe(true)
    expect((await limiter.peek('burst', 'u')).remaining).toBe(5)
  })
})

describe('block (penalty)', () => {
  it('denies for the duration whatever the units, then lifts by itself', async () => {
    const { limiter, clock } = setup()
    await limiter.consume('api', 'k')
    await limiter.block('api', 'k', '5s')
    const d = await limiter.consume('api', 'k')
    expect(d).toMatchObject({ allowed: false, reason: 'blocked', remaining: 0, retryAfterMs: 5000 })
    expect(limiter.consumeSync('api', 'k')).toMatchObject({ allowed: false, reason: 'blocked' })
    clock.advance(4999)
    expect((await limiter.consume('api', 'k')).retryAfterMs).toBe(1)
    clock.advance(1)
    expect(await limiter.consume('api', 'k')).toMatchObject({ allowed: true, remaining: 19 })
  })

  it('a longer block extends; a shorter one does not shorten', async () => {
    const { limiter } = setup()
    await limiter.block('api', 'k', 1000)
    await limiter.block('api', 'k', '1m')
    await limiter.block('api', 'k', '1s')
    expect((await limiter.peek('api', 'k')).retryAfterMs).toBe(60_000)
  })

  it('reset lifts a block', async () => {
    const { limiter } = setup()
    await limiter.block('api', 'k', '1h')
    await limiter.reset('api', 'k')
    expect((await limiter.consume('api', 'k')).allowed).toBe(true)
  })
})

describe('concurrency: acquire and release', () => {
  it('leases up to the limit; release frees a slot; double release is harmless', async () => {
    const { limiter } = setup()
    const a = await limiter.acquire('jobs', 'w')
    const b = await limiter.acquire('jobs', 'w')
    expect(a).toMatchObject({ allowed: true, remaining: 1 })
    expect(b).toMatchObject({ allowed: true, remaining: 0 })
    const c = await limiter.acquire('jobs', 'w')
    expect(c).toMatchObject({ allowed: false, reason: 'limit', retryAfterMs: 30_000 })
    expect(c.lease).toBeUndefined()
    expect(a.lease?.id).not.toBe(b.lease?.id)
    await a.lease!.release()
    await a.lease!.release()
    expect((await limiter.peek('jobs', 'w')).remaining).toBe(1)
    const d = await limiter.acquire('jobs', 'w')
    expect(d.allowed).toBe(true)
    await limiter.release('jobs', 'w', d.lease!.id)
    await limiter.release('jobs', 'w', b.lease!.id)
    expect((await limiter.peek('jobs', 'w')).remaining).toBe(2)
  })

  it('a lease never released expires after the timeout', async () => {
    const { limiter, clock } = setup()
    await limiter.acquire('jobs', 'w', { cost: 2 })
    clock.advance(29_999)
    expect((await limiter.acquire('jobs', 'w')).retryAfterMs).toBe(1)
    clock.advance(1)
    const d = await limiter.acquire('jobs', 'w', { cost: 2 })
    expect(d).toMatchObject({ allowed: true, remaining: 0, resetMs: 30_000 })
    expect(d.lease?.cost).toBe(2)
  })

  it('releasing an expired lease does not free someone else’s slot', async () => {
    const { limiter, clock } = setup()
    const old = await limiter.acquire('jobs', 'w', { cost: 2 })
    clock.advance(30_000)
    await limiter.acquire('jobs', 'w', { cost: 2 })
    await old.lease!.release()
    expect((await limiter.acquire('jobs', 'w')).allowed).toBe(false)
  })
})

describe('consumeSync', () => {
  it('decides exactly like consume', async () => {
    const a = setup()
    const b = setup()
    for (let i = 0; i < 25; i++) {
      const sync = a.limiter.consumeSync('api', 'k', { cost: 1 + (i % 3) })
      const async_ = await b.limiter.consume('api', 'k', { cost: 1 + (i % 3) })
      expect(sync).toEqual(async_)
      a.clock.advance(37)
      b.clock.advance(37)
    }
  })
})

describe('decision events', () => {
  it('one event per decision, with operation, store and timing', async () => {
    const { store, clock } = setup()
    const seen: DecisionEvent[] = []
    const limiter = createLimiter({
      store,
      policies: {
        a: { algorithm: 'fixed-window', limit: 1, window: '1s' },
        b: { algorithm: 'gcra', limit: 5, window: '1s' },
        c: { algorithm: 'concurrency', limit: 1, timeout: '1s' },
      },
      onDecision: (e) => seen.push(e),
    })
    await limiter.consume('a', 'k')
    await limiter.consume('a', 'k')
    limiter.consumeSync('b', 'k')
    await limiter.peek('b', 'k')
    await limiter.consume([
      { policy: 'a', key: 'x' },
      { policy: 'b', key: 'x' },
    ])
    await limiter.acquire('c', 'k')
    await limiter.refund('b', 'k')
    await limiter.block('a', 'k', '1s')
    clock.advance(1)
    expect(seen.map((e) => [e.operation, e.decision.policy, e.decision.allowed])).toEqual([
      ['consume', 'a', true],
      ['consume', 'a', false],
      ['consume', 'b', true],
      ['peek', 'b', true],
      // Layered: the headline is the tighter layer, a (0 of 1 left) rather than b (4 of 5).
      ['consume', 'a', true],
      ['acquire', 'c', true],
    ])
    for (const e of seen) {
      expect(e.store).toBe('memory')
      expect(e.storeSeconds).toBeGreaterThanOrEqual(0)
      expect(e.storeSeconds).toBeLessThan(1)
    }
    expect(seen[1]!.decision.reason).toBe('limit')
    expect('results' in seen[4]!.decision && seen[4]!.decision.results).toHaveLength(2)
  })

  it('subscribe adds, the returned function removes, a throwing listener breaks nothing', async () => {
    const { limiter } = setup()
    const got: string[] = []
    const off = limiter.subscribe((e) => got.push(e.decision.key))
    limiter.subscribe(() => {
      throw new Error('broken listener')
    })
    await limiter.consume('api', 'one')
    off()
    expect((await limiter.consume('api', 'two')).allowed).toBe(true)
    expect(got).toEqual(['one'])
  })
})

describe('the default store', () => {
  it('is a memory store', async () => {
    const limiter = createLimiter({ policies: { p: { algorithm: 'fixed-window', limit: 1, window: '1m' } } })
    expect(limiter.store.name).toBe('memory')
    expect((await limiter.consume('p', 'k')).allowed).toBe(true)
    expect((await limiter.consume('p', 'k')).allowed).toBe(false)
    await limiter.close()
  })
})
