// `blockDuration` on a policy: a consume denied for lack of units blocks the key for exactly that
// long and reports the block as its wait; peek never blocks; a layered check blocks the layers that
// ran out; a bad value or a policy where a block means nothing is a typed error.
import { describe, expect, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { forwardStore } from '../../packages/sluice/src/store.js'
import { fakeClock, fakeStore } from '../helpers/fake-clock.js'
import { switchableStore } from '../helpers/switchable-store.js'

function setup() {
  const clock = fakeClock()
  const limiter = createLimiter({
    store: fakeStore(clock),
    policies: {
      login: { algorithm: 'fixed-window', limit: 2, window: '1s', blockDuration: '5s' },
      perIp: { algorithm: 'token-bucket', limit: 10, window: '1s', blockDuration: 20_000 },
      plain: { algorithm: 'fixed-window', limit: 1, window: '1s' },
    },
  })
  return { clock, limiter }
}

describe('blockDuration', () => {
  it('blocks a key denied for lack of units for exactly that long, and the denial reports it', async () => {
    const { clock, limiter } = setup()
    expect((await limiter.consume('login', 'u')).allowed).toBe(true)
    expect((await limiter.consume('login', 'u')).allowed).toBe(true)
    expect(await limiter.consume('login', 'u')).toMatchObject({
      allowed: false,
      reason: 'limit',
      remaining: 0,
      retryAfterMs: 5000,
      resetMs: 5000,
    })
    // The window (1 s) has ended; the block has not.
    clock.advance(1000)
    expect(await limiter.consume('login', 'u')).toMatchObject({
      allowed: false,
      reason: 'blocked',
      retryAfterMs: 4000,
    })
    clock.advance(3999)
    expect(await limiter.consume('login', 'u')).toMatchObject({ reason: 'blocked', retryAfterMs: 1 })
    clock.advance(1)
    expect(await limiter.consume('login', 'u')).toMatchObject({ allowed: true, remaining: 1 })
  })

  it('a denial inside the block does not extend it', async () => {
    const { clock, limiter } = setup()
    for (let i = 0; i < 3; i++) await limiter.consume('login', 'u')
    for (let i = 0; i < 4; i++) {
      clock.advance(1000)
      expect((await limiter.consume('login', 'u')).reason).toBe('blocked')
    }
    clock.advance(1000)
    expect((await limiter.consume('login', 'u')).allowed).toBe(true)
  })

  it('is answered synchronously on the memory store (consumeSync, decide)', () => {
    const { clock, limiter } = setup()
    limiter.consumeSync('login', 'u')
    limiter.consumeSync('login', 'u')
    expect(limiter.consumeSync('login', 'u')).toMatchObject({ allowed: false, retryAfterMs: 5000 })
    clock.advance(4999)
    const d = limiter.decide('login', 'u')
    expect(d).not.toBeInstanceOf(Promise)
    expect(d).toMatchObject({ reason: 'blocked', retryAfterMs: 1 })
  })

  it('peek never blocks', async () => {
    const { clock, limiter } = setup()
    await limiter.consume('login', 'u')
    await limiter.consume('login', 'u')
    expect(await limiter.peek('login', 'u')).toMatchObject({
      allowed: false,
      reason: 'limit',
      retryAfterMs: 1000,
    })
    clock.advance(1000)
    expect((await limiter.consume('login', 'u')).allowed).toBe(true)
  })

  it('a policy without blockDuration is not blocked', async () => {
    const { clock, limiter } = setup()
    await limiter.consume('plain', 'u')
    expect(await limiter.consume('plain', 'u')).toMatchObject({ reason: 'limit', retryAfterMs: 1000 })
    clock.advance(1000)
    expect((await limiter.consume('plain', 'u')).allowed).toBe(true)
  })

  it('a layered check blocks the layers that ran out of units, each for its own duration, and no other', async () => {
    const { clock, limiter } = setup()
    await limiter.consume('login', 'u')
    await limiter.consume('login', 'u')
    const d = await limiter.consume([
      { policy: 'perIp', key: 'ip' },
      { policy: 'login', key: 'u' },
    ])
    expect(d).toMatchObject({ allowed: false, deniedBy: 'login', retryAfterMs: 5000 })
    expect(d.results[0]).toMatchObject({ allowed: true, remaining: 10 })
    expect(d.results[1]).toMatchObject({ allowed: false, reason: 'limit', retryAfterMs: 5000 })
    // perIp admitted (uncharged, unblocked): it is full and admits alone.
    expect(await limiter.consume('perIp', 'ip')).toMatchObject({ allowed: true, remaining: 9 })
    clock.advance(1000)
    expect((await limiter.consume('login', 'u')).reason).toBe('blocked')

    // Both layers out of units: each is blocked for its own duration.
    await limiter.consume('perIp', 'ip2', { cost: 10 })
    await limiter.consume('login', 'v')
    await limiter.consume('login', 'v')
    const both = await limiter.consume([
      { policy: 'perIp', key: 'ip2' },
      { policy: 'login', key: 'v' },
    ])
    expect(both.results.map((r) => r.retryAfterMs)).toEqual([20_000, 5000])
    clock.advance(5000)
    expect((await limiter.consume('login', 'v')).allowed).toBe(true)
    expect(await limiter.consume('perIp', 'ip2')).toMatchObject({ reason: 'blocked', retryAfterMs: 15_000 })
  })

  it('a blocked key is not blocked again by its own denials, and limiter.block never shortens it', async () => {
    const { clock, limiter } = setup()
    await limiter.block('login', 'u', '1m')
    expect(await limiter.consume('login', 'u')).toMatchObject({ reason: 'blocked', retryAfterMs: 60_000 })
    clock.advance(59_999)
    expect(await limiter.consume('login', 'u')).toMatchObject({ reason: 'blocked', retryAfterMs: 1 })
  })
})

describe('blockDuration when the store did not decide or cannot block', () => {
  const login = { algorithm: 'fixed-window', limit: 1, window: '1s', blockDuration: '5s' } as const

  it("a denial by the store's fallback blocks nothing", async () => {
    const clock = fakeClock()
    const store = switchableStore('fail', clock.now)
    const limiter = createLimiter({
      store,
      policies: { login: { ...login, onStoreError: 'memory' } },
      localDenyCache: false,
      logger: { warn: () => {} },
    })
    expect((await limiter.consume('login', 'u')).degraded).toBe(true)
    const denied = await limiter.consume('login', 'u')
    expect(denied).toMatchObject({ allowed: false, degraded: true, reason: 'limit' })
    // The fallback's own wait (its memory store keeps real time), not the block's 5 s.
    expect(denied.retryAfterMs).toBeLessThanOrEqual(1000)
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
    expect(await limiter.consume('login', 'u')).toMatchObject({
      allowed: false,
      reason: 'limit',
      retryAfterMs: 1000,
    })
    clock.advance(1000)
    expect((await limiter.consume('login', 'u')).allowed).toBe(true)
    await limiter.close()
  })
})

describe('blockDuration validation', () => {
  const make = (policy: unknown) => () =>
    createLimiter({ policies: { p: policy as { algorithm: 'fixed-window'; limit: 1; window: '1s' } } })

  it.each([
    ['zero', 0, 'SLUICE_INVALID_DURATION'],
    ['negative', -1000, 'SLUICE_INVALID_DURATION'],
    ['a word', '5 minutes', 'SLUICE_INVALID_DURATION'],
    ['not a duration at all', true, 'SLUICE_INVALID_POLICY'],
  ])('%s is refused', (_, blockDuration, code) => {
    expect(make({ algorithm: 'fixed-window', limit: 1, window: '1s', blockDuration })).toThrow(
      expect.objectContaining({ code, message: expect.stringContaining('policies.p.blockDuration') }),
    )
  })

  it('is refused on a concurrency policy, saying why', () => {
    expect(make({ algorithm: 'concurrency', limit: 1, timeout: '1s', blockDuration: '1m' })).toThrow(
      expect.objectContaining({
        code: 'SLUICE_INVALID_POLICY',
        message: expect.stringMatching(/policies\.p\.blockDuration: .*concurrency/),
      }),
    )
  })

  it('is refused in hybrid mode, which cannot block', () => {
    expect(
      make({ algorithm: 'fixed-window', limit: 1, window: '1s', mode: 'hybrid', blockDuration: '1m' }),
    ).toThrow(
      expect.objectContaining({
        code: 'SLUICE_INVALID_POLICY',
        message: expect.stringMatching(/policies\.p\.blockDuration: .*hybrid/),
      }),
    )
  })

  it('resolves to whole milliseconds', () => {
    const limiter = createLimiter({
      policies: { p: { algorithm: 'gcra', limit: 1, window: '1s', blockDuration: '1.5m' } },
    })
    expect(limiter.policies.p.blockDurationMs).toBe(90_000)
  })
})
