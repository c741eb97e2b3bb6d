// `penalty` on a policy through createLimiter on the memory store: synchronous all the way, the
// defaults, what the store did not decide counts for nothing, and every bad value is a typed error
// raised before anything reaches the store.
import { describe, expect, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { resolvePolicy } from '../../packages/sluice/src/policy.js'
import { forwardStore } from '../../packages/sluice/src/store.js'
import { fakeClock, fakeStore } from '../helpers/fake-clock.js'
import { switchableStore } from '../helpers/switchable-store.js'

const login = {
  algorithm: 'fixed-window',
  limit: 1,
  window: '1s',
  penalty: { after: 3, within: '1m', block: '10s' },
} as const

describe('penalty', () => {
  it('is answered synchronously on the memory store (consumeSync, decide)', () => {
    const clock = fakeClock()
    const limiter = createLimiter({ store: fakeStore(clock), policies: { login } })
    expect(limiter.consumeSync('login', 'u').allowed).toBe(true)
    expect(limiter.consumeSync('login', 'u').reason).toBe('limit')
    expect(limiter.consumeSync('login', 'u').reason).toBe('limit')
    expect(limiter.consumeSync('login', 'u')).toMatchObject({
      reason: 'blocked',
      retryAfterMs: 10_000,
      penalty: { level: 0, blockMs: 10_000 },
    })
    clock.advance(9999)
    const d = limiter.decide('login', 'u')
    expect(d).not.toBeInstanceOf(Promise)
    expect(d).toMatchObject({ reason: 'blocked', retryAfterMs: 1 })
  })

  it('defaults to factor 2 and max 24h (or block when longer)', () => {
    expect(resolvePolicy('p', login).penalty).toEqual({
      after: 3,
      withinMs: 60_000,
      blockMs: 10_000,
      factor: 2,
      maxMs: 86_400_000,
      memoryMs: 172_800_000,
      blocksMs: [
        10_000, 20_000, 40_000, 80_000, 160_000, 320_000, 640_000, 1_280_000, 2_560_000, 5_120_000,
        10_240_000, 20_480_000, 40_960_000, 81_920_000, 86_400_000,
      ],
    })
    const long = resolvePolicy('p', { ...login, penalty: { after: 1, within: '1m', block: '2d' } })
    expect(long.penalty).toMatchObject({ blockMs: 172_800_000, maxMs: 172_800_000, blocksMs: [172_800_000] })
    const flat = resolvePolicy('p', { ...login, penalty: { after: 1, within: '1m', block: '1m', factor: 1 } })
    expect(flat.penalty?.blocksMs).toEqual([60_000])
  })

  it('the block of each level, rounded to whole ms and capped at max', () => {
    const p = resolvePolicy('p', {
      ...login,
      penalty: { after: 2, within: '1s', block: 1000, factor: 1.5, max: 4000 },
    })
    expect(p.penalty?.blocksMs).toEqual([1000, 1500, 2250, 3375, 4000])
  })

  it("a denial by the store's fallback counts for nothing", async () => {
    const clock = fakeClock()
    const store = switchableStore('fail', clock.now)
    const limiter = createLimiter({
      store,
      policies: { login: { ...login, onStoreError: 'memory' } },
      localDenyCache: false,
      logger: { warn: () => {} },
    })
    for (let i = 0; i < 6; i++) {
      const d = await limiter.consume('login', 'u')
      expect(d.degraded).toBe(true)
      expect(d.penalty).toBeUndefined()
    }
    expect(store.calls.block).toBe(0)
    await limiter.close()
  })

  it('a block the store cannot write leaves the denial as the store gave it', async () => {
    const clock = fakeClock()
    const store = forwardStore(switchableStore('answer', clock.now), {
      block: () => Promise.reject(new Error('connection reset (test)')),
    })
    const limiter = createLimiter({
      store,
      policies: { login },
      localDenyCache: false,
      logger: { warn: () => {} },
    })
    await limiter.consume('login', 'u')
    await limiter.consume('login', 'u')
    await limiter.consume('login', 'u')
    expect(await limiter.consume('login', 'u')).toMatchObject({ reason: 'limit', retryAfterMs: 1000 })
    expect((await limiter.consume('login', 'u')).penalty).toBeUndefined()
    await limiter.close()
  })
})

describe('penalty validation', () => {
  const make =
    (penalty: unknown, extra: Record<string, unknown> = {}) =>
    () =>
      createLimiter({
        policies: { p: { algorithm: 'fixed-window', limit: 1, window: '1s', penalty, ...extra } as never },
      })
  const ok = { after: 3, within: '1m', block: '10s' }

  it.each([
    ['not an object', 5, 'SLUICE_INVALID_POLICY', 'policies.p.penalty: use { after, within, block'],
    ['an array', [], 'SLUICE_INVALID_POLICY', 'policies.p.penalty: use'],
    ['a misspelled key', { ...ok, afer: 3 }, 'SLUICE_INVALID_POLICY', "did you mean 'after'?"],
    ['no after', { within: '1m', block: '1s' }, 'SLUICE_INVALID_POLICY', 'policies.p.penalty.after'],
    ['after 0', { ...ok, after: 0 }, 'SLUICE_INVALID_POLICY', 'policies.p.penalty.after'],
    ['after 1.5', { ...ok, after: 1.5 }, 'SLUICE_INVALID_POLICY', 'policies.p.penalty.after'],
    ['after as text', { ...ok, after: '3' }, 'SLUICE_INVALID_POLICY', 'policies.p.penalty.after'],
    ['after too large', { ...ok, after: 1_000_001 }, 'SLUICE_INVALID_POLICY', 'policies.p.penalty.after'],
    ['no within', { after: 3, block: '1s' }, 'SLUICE_INVALID_DURATION', 'policies.p.penalty.within'],
    ['within 0', { ...ok, within: 0 }, 'SLUICE_INVALID_DURATION', 'policies.p.penalty.within'],
    ['block negative', { ...ok, block: -5 }, 'SLUICE_INVALID_DURATION', 'policies.p.penalty.block'],
    ['block a word', { ...ok, block: 'soon' }, 'SLUICE_INVALID_DURATION', 'policies.p.penalty.block'],
    ['max 0', { ...ok, max: 0 }, 'SLUICE_INVALID_DURATION', 'policies.p.penalty.max'],
    ['max below block', { ...ok, max: '5s' }, 'SLUICE_INVALID_POLICY', 'policies.p.penalty.max'],
    ['factor below 1', { ...ok, factor: 0.5 }, 'SLUICE_INVALID_POLICY', 'policies.p.penalty.factor'],
    ['factor NaN', { ...ok, factor: Number.NaN }, 'SLUICE_INVALID_POLICY', 'policies.p.penalty.factor'],
    ['factor as text', { ...ok, factor: '2' }, 'SLUICE_INVALID_POLICY', 'policies.p.penalty.factor'],
    [
      'a factor that never reaches max',
      { ...ok, block: 1, factor: 1.000001, max: '1d' },
      'SLUICE_INVALID_POLICY',
      'policies.p.penalty.factor',
    ],
    [
      'after x within too large',
      { ...ok, after: 1_000_000, within: '100y' },
      'SLUICE_INVALID_POLICY',
      'after x within',
    ],
  ])('%s is refused', (_, penalty, code, message) => {
    expect(make(penalty)).toThrow(
      expect.objectContaining({ code, message: expect.stringContaining(message) }),
    )
  })

  it('is refused with blockDuration, in hybrid mode and on concurrency, saying why', () => {
    expect(make(ok, { blockDuration: '1m' })).toThrow(
      expect.objectContaining({
        code: 'SLUICE_INVALID_POLICY',
        message: expect.stringMatching(/blockDuration .* penalty/),
      }),
    )
    expect(make(ok, { mode: 'hybrid' })).toThrow(
      expect.objectContaining({
        code: 'SLUICE_INVALID_POLICY',
        message: expect.stringContaining('policies.p.penalty: a hybrid'),
      }),
    )
    expect(() =>
      createLimiter({
        policies: { c: { algorithm: 'concurrency', limit: 1, timeout: '1s', penalty: ok } as never },
      }),
    ).toThrow(
      expect.objectContaining({
        code: 'SLUICE_INVALID_POLICY',
        message: expect.stringContaining('policies.c.penalty: a concurrency'),
      }),
    )
  })

  it('a refused policy reaches no store', () => {
    const clock = fakeClock()
    const store = switchableStore('answer', clock.now)
    expect(() =>
      createLimiter({ store, policies: { p: { ...login, penalty: { ...ok, factor: 0 } } } }),
    ).toThrow(expect.objectContaining({ code: 'SLUICE_INVALID_POLICY' }))
    expect(Object.values(store.calls).every((n) => n === 0)).toBe(true)
  })
})
