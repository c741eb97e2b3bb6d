// `costAboveCapacity: 'deny'` on a policy: a cost the policy can never admit is answered as a denial
// (reason `cost_above_capacity`, remaining as it is) instead of SLUICE_INVALID_COST; nothing is
// committed, since the store is only asked to peek. The default stays the error.
import { describe, expect, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { forwardStore, type Step } from '../../packages/sluice/src/store.js'
import { fakeClock, fakeStore } from '../helpers/fake-clock.js'

function setup() {
  const clock = fakeClock()
  const inner = fakeStore(clock)
  const calls: { mode: string; costs: number[] }[] = []
  const store = forwardStore(inner, {
    apply(steps: readonly Step[], mode: 'consume' | 'peek') {
      calls.push({ mode, costs: steps.map((s) => s.cost) })
      return inner.apply(steps, mode)
    },
  })
  const limiter = createLimiter({
    store,
    policies: {
      upload: { algorithm: 'token-bucket', limit: 10, window: '1s', costAboveCapacity: 'deny' },
      login: {
        algorithm: 'fixed-window',
        limit: 5,
        window: '60s',
        blockDuration: '5m',
        costAboveCapacity: 'deny',
      },
      strict: { algorithm: 'fixed-window', limit: 5, window: '1s' },
    },
  })
  return { clock, limiter, calls }
}

describe("costAboveCapacity: 'deny'", () => {
  it('answers a cost above capacity as a denial with the key as it is, committing nothing', async () => {
    const { limiter, calls } = setup()
    await limiter.consume('upload', 'u', { cost: 3 })
    calls.length = 0
    const d = await limiter.consume('upload', 'u', { cost: 11 })
    expect(d).toEqual({
      allowed: false,
      reason: 'cost_above_capacity',
      limit: 10,
      remaining: 7,
      resetMs: 300,
      // The request never fits: the wait named is at least a window, so a client does not retry at once.
      retryAfterMs: 1000,
      policy: 'upload',
      key: 'u',
    })
    // The store was only asked to peek, so nothing could be committed.
    expect(calls.map((c) => c.mode)).toEqual(['peek'])
    expect(await limiter.peek('upload', 'u')).toMatchObject({ allowed: true, remaining: 7 })
  })

  it('on every decision path: decide, consumeSync, peek', async () => {
    const { limiter } = setup()
    const d = limiter.decide('upload', 'u', { cost: 100 })
    expect(d).not.toBeInstanceOf(Promise)
    expect(d).toMatchObject({ allowed: false, reason: 'cost_above_capacity', remaining: 10 })
    expect(limiter.consumeSync('upload', 'u', { cost: 100 })).toMatchObject({ reason: 'cost_above_capacity' })
    expect(await limiter.peek('upload', 'u', { cost: 100 })).toMatchObject({ reason: 'cost_above_capacity' })
    expect(await limiter.consume('upload', 'u', { cost: 10 })).toMatchObject({ allowed: true, remaining: 0 })
  })

  it('never blocks, even on a policy with blockDuration', async () => {
    const { limiter } = setup()
    expect(await limiter.consume('login', 'u', { cost: 6 })).toMatchObject({
      reason: 'cost_above_capacity',
      retryAfterMs: 60_000,
    })
    expect(await limiter.consume('login', 'u', { cost: 5 })).toMatchObject({ allowed: true })
  })

  it('denies a layered check, committing no layer', async () => {
    const { limiter } = setup()
    const d = await limiter.consume([
      { policy: 'strict', key: 'k', cost: 2 },
      { policy: 'upload', key: 'k', cost: 50 },
    ])
    expect(d).toMatchObject({ allowed: false, deniedBy: 'upload', reason: 'cost_above_capacity' })
    expect(d.results[0]).toMatchObject({ allowed: true, remaining: 5, retryAfterMs: 0 })
    expect(d.results[1]).toMatchObject({ allowed: false, reason: 'cost_above_capacity', remaining: 10 })
    expect(await limiter.peek('strict', 'k')).toMatchObject({ remaining: 5 })
  })

  it('a cost that fits is decided as usual', async () => {
    const { limiter } = setup()
    expect(await limiter.consume('upload', 'u', { cost: 10 })).toMatchObject({ allowed: true })
    expect(await limiter.consume('upload', 'u', { cost: 1 })).toMatchObject({ reason: 'limit' })
  })

  it('leaves the other errors: a bad cost, and refunds above capacity', async () => {
    const { limiter } = setup()
    await expect(limiter.consume('upload', 'u', { cost: 0 })).rejects.toMatchObject({
      code: 'SLUICE_INVALID_COST',
    })
    await expect(limiter.refund('upload', 'u', 11)).rejects.toMatchObject({ code: 'SLUICE_INVALID_COST' })
  })

  it('is off by default: a policy without it throws SLUICE_INVALID_COST', async () => {
    const { limiter, calls } = setup()
    await expect(limiter.consume('strict', 'u', { cost: 6 })).rejects.toMatchObject({
      code: 'SLUICE_INVALID_COST',
    })
    expect(calls).toEqual([])
  })

  it('is validated', () => {
    expect(() =>
      createLimiter({
        policies: {
          p: { algorithm: 'fixed-window', limit: 1, window: '1s', costAboveCapacity: 'allow' as 'deny' },
        },
      }),
    ).toThrow(
      expect.objectContaining({
        code: 'SLUICE_INVALID_POLICY',
        message: expect.stringContaining('policies.p.costAboveCapacity'),
      }),
    )
  })
})
