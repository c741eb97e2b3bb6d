// The limiter's single-check path on the memory store (straight to the store's single-step call, no
// arrays) and the algorithms' `into` (the memory store rewrites a stored state in place): each must
// decide exactly what the general path decides, and events must still see every decision.
import { describe, expect, it } from 'vitest'
import { algorithms } from '../../../packages/sluice/src/algorithms/index.js'
import { InvalidOptionsError } from '../../../packages/sluice/src/errors.js'
import { createLimiter, type DecisionEvent } from '../../../packages/sluice/src/limiter.js'
import { resolvePolicy } from '../../../packages/sluice/src/policy.js'
import type { Store } from '../../../packages/sluice/src/store.js'
import { memoryStore } from '../../../packages/sluice/src/stores/memory.js'
import { fakeClock } from '../../helpers/fake-clock.js'

const POLICIES = {
  bucket: { algorithm: 'token-bucket', limit: 5, window: '1s', burst: 8 },
  fixed: { algorithm: 'fixed-window', limit: 4, window: '1s' },
  counter: { algorithm: 'sliding-window-counter', limit: 6, window: '1s' },
  log: { algorithm: 'sliding-window-log', limit: 3, window: '1s' },
  cell: { algorithm: 'gcra', limit: 5, window: '1s', burst: 3 },
} as const
type Name = keyof typeof POLICIES
const NAMES = Object.keys(POLICIES) as Name[]

/** A memory store behind a wrapper of its own: the limiter cannot take the single-step path. */
function wrapped(now: () => number): { store: Store; applies: () => number } {
  const inner = memoryStore({ now })
  let applies = 0
  const store: Store = {
    name: 'memory',
    inProcess: true,
    apply(steps, mode) {
      applies++
      return inner.apply(steps, mode)
    },
    refund: (steps) => inner.refund(steps),
    charge: (steps) => inner.charge(steps),
    block: (steps, ms) => inner.block(steps, ms),
    reset: (steps) => inner.reset(steps),
    close: () => inner.close(),
    now: () => inner.now(),
    records: inner.records,
  }
  return { store, applies: () => applies }
}

/** A small deterministic generator, so a failure replays. */
function random(seed: number): () => number {
  let s = seed
  return () => {
    s = (s * 1_103_515_245 + 12_345) % 2_147_483_648
    return s / 2_147_483_648
  }
}

describe('the single-check path on the memory store', () => {
  it('decides exactly like the general path: consume, peek, cost > 1, blocks, refunds, time', async () => {
    const clock = fakeClock()
    const fast = createLimiter({ store: memoryStore({ now: clock.now }), policies: POLICIES })
    const reference = wrapped(clock.now)
    const slow = createLimiter({ store: reference.store, policies: POLICIES })
    const next = random(7)
    for (let i = 0; i < 3_000; i++) {
      const policy = NAMES[Math.floor(next() * NAMES.length)]!
      const key = `k${Math.floor(next() * 4)}`
      const roll = next()
      if (roll < 0.05) {
        await fast.block(policy, key, 300)
        await slow.block(policy, key, 300)
      } else if (roll < 0.1) {
        await fast.refund(policy, key, 1)
        await slow.refund(policy, key, 1)
      } else if (roll < 0.2) {
        clock.advance(Math.floor(next() * 400))
      } else {
        const cost = 1 + Math.floor(next() * 3)
        const method = roll < 0.35 ? 'peek' : roll < 0.6 ? 'consumeSync' : 'consume'
        const got =
          method === 'consumeSync'
            ? fast.consumeSync(policy, key, { cost })
            : await fast[method](policy, key, { cost })
        const want =
          method === 'consumeSync'
            ? slow.consumeSync(policy, key, { cost })
            : await slow[method](policy, key, { cost })
        expect(got, `${i}: ${method} ${policy} ${key} cost ${cost}`).toStrictEqual(want)
      }
    }
    // The reference really went the general way (its own apply), every decision.
    expect(reference.applies()).toBeGreaterThan(2_000)
  })

  it('near-limit marks, limits and blocks come out as on the general path, with their keys in the same order', async () => {
    const clock = fakeClock()
    const near = {
      bucket: { algorithm: 'token-bucket', limit: 5, window: '1s', burst: 8, nearLimit: 0.5 },
      fixed: { algorithm: 'fixed-window', limit: 4, window: '1s', nearLimit: 0.75 },
    } as const
    const fast = createLimiter({ store: memoryStore({ now: clock.now }), policies: near })
    const slow = createLimiter({ store: wrapped(clock.now).store, policies: near })
    const next = random(11)
    let marked = 0
    for (let i = 0; i < 400; i++) {
      const policy = next() < 0.5 ? 'bucket' : 'fixed'
      const key = `k${Math.floor(next() * 3)}`
      const roll = next()
      if (roll < 0.05) {
        await fast.block(policy, key, 200)
        await slow.block(policy, key, 200)
        continue
      }
      if (roll < 0.15) clock.advance(Math.floor(next() * 300))
      const cost = 1 + Math.floor(next() * 2)
      const got =
        roll < 0.5 ? fast.consumeSync(policy, key, { cost }) : await fast.consume(policy, key, { cost })
      const want =
        roll < 0.5 ? slow.consumeSync(policy, key, { cost }) : await slow.consume(policy, key, { cost })
      // JSON keeps the order the keys were set in: what a service answering with it would print.
      expect(JSON.stringify(got), `${i}: ${policy} ${key} cost ${cost}`).toBe(JSON.stringify(want))
      if (got.nearLimit) marked++
    }
    expect(marked).toBeGreaterThan(20)
  })

  it('reads the clock once per decision', async () => {
    const clock = fakeClock()
    let reads = 0
    const store = memoryStore({
      now: () => {
        reads++
        return clock.now()
      },
    })
    const limiter = createLimiter({ store, policies: POLICIES })
    // The limiter's first read of the stored overrides and lists reads the clock too, once, at start.
    await new Promise((resolve) => setImmediate(resolve))
    const before = reads
    for (let i = 0; i < 30; i++) {
      const policy = NAMES[i % NAMES.length]!
      await limiter.consume(policy, `k${i % 4}`)
      limiter.consumeSync(policy, `k${i % 4}`)
      await limiter.peek(policy, `k${i % 4}`)
      clock.advance(7)
    }
    expect(reads - before).toBe(90)
  })

  it('a blocked key denies with reason blocked; peek charges nothing; a cost above one is charged whole', async () => {
    const clock = fakeClock()
    const limiter = createLimiter({ store: memoryStore({ now: clock.now }), policies: POLICIES })
    expect((await limiter.consume('bucket', 'a', { cost: 3 })).remaining).toBe(5)
    expect((await limiter.peek('bucket', 'a', { cost: 2 })).remaining).toBe(5)
    expect(limiter.consumeSync('bucket', 'a', { cost: 5 }).remaining).toBe(0)
    const denied = await limiter.consume('bucket', 'a')
    expect(denied).toMatchObject({ allowed: false, reason: 'limit', retryAfterMs: 200 })
    await limiter.block('fixed', 'b', 1_000)
    expect(await limiter.consume('fixed', 'b')).toMatchObject({ allowed: false, reason: 'blocked' })
    clock.advance(1_000)
    expect(await limiter.consume('fixed', 'b')).toMatchObject({ allowed: true, remaining: 3 })
  })

  it('a store whose apply was replaced, or a copy with its own apply, is called: no shortcut past it', async () => {
    let calls = 0
    const store = memoryStore()
    const original = store.apply
    store.apply = (steps, mode) => {
      calls++
      return original(steps, mode)
    }
    const limiter = createLimiter({ store, policies: POLICIES })
    await limiter.consume('bucket', 'a')
    limiter.consumeSync('bucket', 'a')
    expect(calls).toBe(2)

    const inner = memoryStore()
    const copy: Store = {
      ...inner,
      apply(steps, mode) {
        calls++
        return inner.apply(steps, mode)
      },
    }
    const overCopy = createLimiter({ store: copy, policies: POLICIES })
    await overCopy.consume('fixed', 'a')
    expect(calls).toBe(3)
  })

  it('events: a listener subscribed after decisions started sees the next one, and none after it leaves', async () => {
    const limiter = createLimiter({ store: memoryStore({ now: fakeClock().now }), policies: POLICIES })
    for (let i = 0; i < 100; i++) await limiter.consume('counter', `k${i}`)
    const seen: DecisionEvent[] = []
    const off = limiter.subscribe((e) => seen.push(e))
    await limiter.consume('counter', 'x')
    limiter.consumeSync('counter', 'y')
    await limiter.peek('counter', 'x')
    await limiter.consume([{ policy: 'counter', key: 'z' }])
    expect(seen.map((e) => [e.operation, e.decision.key, e.store])).toEqual([
      ['consume', 'x', 'memory'],
      ['consume', 'y', 'memory'],
      ['peek', 'x', 'memory'],
      ['consume', 'z', 'memory'],
    ])
    expect(seen.every((e) => e.storeSeconds >= 0 && e.cached === undefined)).toBe(true)
    off()
    await limiter.consume('counter', 'x')
    expect(seen).toHaveLength(4)
    // Decisions go on as before without anyone listening.
    expect((await limiter.consume('counter', 'x')).remaining).toBe(3)
  })

  it('onDecision sees every single check from the first one', async () => {
    const seen: string[] = []
    const limiter = createLimiter({
      store: memoryStore({ now: fakeClock().now }),
      policies: POLICIES,
      onDecision: (e) => seen.push(`${e.operation} ${e.decision.policy} ${e.decision.allowed}`),
    })
    await limiter.consume('fixed', 'a', { cost: 4 })
    limiter.consumeSync('fixed', 'a')
    await limiter.peek('fixed', 'a')
    expect(seen).toEqual(['consume fixed true', 'consume fixed false', 'peek fixed false'])
  })

  it('bad input still rejects consume and throws from consumeSync, with the typed errors', async () => {
    const limiter = createLimiter({ store: memoryStore(), policies: POLICIES })
    await expect(limiter.consume('nope' as Name, 'a')).rejects.toMatchObject({
      code: 'SLUICE_UNKNOWN_POLICY',
    })
    await expect(limiter.consume('fixed', '')).rejects.toMatchObject({ code: 'SLUICE_INVALID_KEY' })
    expect(() => limiter.consumeSync('fixed', 'a', { cost: 0 })).toThrow(
      expect.objectContaining({ code: 'SLUICE_INVALID_COST' }),
    )
    // consumeSync over an asynchronous store still refuses.
    const inner = memoryStore()
    const slowStore: Store = { ...inner, inProcess: true, apply: async (s, m) => inner.apply(s, m) }
    const overAsync = createLimiter({ store: slowStore, policies: POLICIES })
    expect(() => overAsync.consumeSync('fixed', 'a')).toThrow(InvalidOptionsError)
  })
})

describe('algorithms: `into` (a state object the caller replaces on commit)', () => {
  const cases = [
    ['token-bucket', POLICIES.bucket],
    ['fixed-window', POLICIES.fixed],
    ['sliding-window-counter', POLICIES.counter],
    ['gcra', POLICIES.cell],
  ] as const
  for (const [algorithm, shape] of cases) {
    it(`${algorithm}: a commit writes the new state into it, the same numbers as without; nothing else writes it`, () => {
      const policy = resolvePolicy('p', shape)
      const transition = algorithms[algorithm]
      const at = 1_700_000_000_000
      const first = transition.consume(undefined, policy, at, 1, false)
      // A commit over a live state: `into` is that state, rewritten.
      const live = structuredClone(first.state)
      const pure = transition.consume(structuredClone(first.state), policy, at + 150, 2, false)
      const inPlace = transition.consume(live, policy, at + 150, 2, false, undefined, live)
      expect(inPlace.state).toBe(live)
      expect(inPlace).toStrictEqual(pure)
      // A commit over an expired state (the caller passes no state, only its dead object).
      const dead = structuredClone(first.state)
      const fresh = transition.consume(undefined, policy, at + 60_000, 1, false, undefined, dead)
      expect(fresh.state).toBe(dead)
      expect(fresh).toStrictEqual(transition.consume(undefined, policy, at + 60_000, 1, false))
      // A peek and a denial commit nothing: `into` and the state stay as they were.
      const before = structuredClone(live)
      transition.consume(live, policy, at + 150, 1, true, undefined, live)
      transition.consume(live, policy, at + 150, policy.capacity, false, undefined, live)
      expect(live).toStrictEqual(before)
    })
  }
})
