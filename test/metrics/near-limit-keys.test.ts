// The dashboard's near-limit keys: createObservability keeps the keys whose decisions crossed their
// policy's nearLimit line, newest first, until their window resets, at most 20; the page shows them.
import { afterEach, describe, expect, it } from 'vitest'
import { dashboardPage } from '../../packages/sluice/src/dashboard/page.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { createObservability, type Observability } from '../../packages/sluice/src/metrics/observability.js'
import { fakeClock, fakeStore } from '../helpers/fake-clock.js'

let obs: Observability | undefined
afterEach(() => {
  obs?.close()
  obs = undefined
})

describe('near-limit keys on the dashboard', () => {
  it('lists the keys that crossed, newest first, until their window resets', async () => {
    const clock = fakeClock()
    const limiter = createLimiter({
      policies: {
        api: { algorithm: 'fixed-window', limit: 10, window: '1m', nearLimit: 0.8 },
        plain: { algorithm: 'fixed-window', limit: 10, window: '1m' },
      },
      store: fakeStore(clock),
    })
    obs = createObservability({ limiter, now: clock.now })
    for (let i = 0; i < 8; i++) await limiter.consume('api', 'alice')
    clock.advance(1000)
    for (let i = 0; i < 9; i++) await limiter.consume('api', 'bob')
    for (let i = 0; i < 10; i++) await limiter.consume('plain', 'carol')
    // Each key's window starts with its first request: alice's a second before bob's.
    const bob = {
      policy: 'api',
      key: 'bob',
      limit: 10,
      remaining: 2,
      at: clock.now(),
      resetAt: clock.now() + 60_000,
    }
    expect(obs.snapshot().nearLimit).toEqual([
      bob,
      {
        policy: 'api',
        key: 'alice',
        limit: 10,
        remaining: 2,
        at: clock.now() - 1000,
        resetAt: clock.now() + 59_000,
      },
    ])
    clock.advance(59_000)
    expect(obs.snapshot().nearLimit).toEqual([bob])
    clock.advance(1000)
    expect(obs.snapshot().nearLimit).toEqual([])
  })

  it('holds at most 20 keys', async () => {
    const clock = fakeClock()
    const limiter = createLimiter({
      policies: { api: { algorithm: 'fixed-window', limit: 2, window: '1m', nearLimit: 0.5 } },
      store: fakeStore(clock),
    })
    obs = createObservability({ limiter, now: clock.now })
    for (let k = 0; k < 30; k++) await limiter.consume('api', `k${k}`)
    const keys = obs.snapshot().nearLimit.map((n) => n.key)
    expect(keys).toHaveLength(20)
    expect(keys[0]).toBe('k29')
  })

  it('the page has a near-limit section', () => {
    expect(dashboardPage('/dashboard')).toContain('<tbody id="near-limit"></tbody>')
  })
})
