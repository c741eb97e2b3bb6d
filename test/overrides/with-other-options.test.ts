// A per-key override on a policy that also has a near-limit line or calendar windows: the line
// follows the override's limit, and a calendar policy's windows stay the calendar's.
import { describe, expect, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'

describe('overrides with nearLimit and calendar windows', () => {
  it("the near-limit line is drawn on the override's limit", async () => {
    const limiter = createLimiter({
      store: memoryStore(),
      policies: { api: { algorithm: 'fixed-window', limit: 100, window: '1m', nearLimit: 0.8 } },
    })
    await limiter.setOverride('api', 'small', { limit: 10 })
    const near: number[] = []
    for (let i = 0; i < 10; i++) {
      const d = await limiter.consume('api', 'small')
      if (d.nearLimit === true) near.push(d.remaining)
    }
    // 80% of 10 used: the decisions leaving 2, 1 and 0 (the policy's own line, 20, would mark all ten).
    expect(near).toEqual([2, 1, 0])
    await limiter.close()
  })

  it("a calendar policy takes a limit override but refuses a window one: its windows are the calendar's", async () => {
    let now = Date.UTC(2026, 0, 31, 23, 0, 0)
    const limiter = createLimiter({
      store: memoryStore({ now: () => now }),
      policies: {
        monthly: { algorithm: 'fixed-window', limit: 5, window: '1mo', align: 'calendar' },
      },
    })
    await expect(limiter.setOverride('monthly', 'k', { window: '1d' })).rejects.toMatchObject({
      code: 'SLUICE_INVALID_OPTIONS',
    })
    expect(await limiter.getOverride('monthly', 'k')).toBeUndefined()
    await limiter.setOverride('monthly', 'k', { limit: 1 })
    const first = await limiter.consume('monthly', 'k')
    expect(first).toMatchObject({ allowed: true, limit: 1, resetMs: 60 * 60 * 1000 })
    expect((await limiter.consume('monthly', 'k')).allowed).toBe(false)
    now += 60 * 60 * 1000
    expect((await limiter.consume('monthly', 'k')).allowed).toBe(true)
    await limiter.close()
  })
})
