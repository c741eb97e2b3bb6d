// Durations in weeks, months and years: a week is 7 days, a month 30 days and a year 365 days, on
// every path that reads a duration (policies, block, waiting options, the service's YAML), and the
// spellings that are refused name the one to write.
import { describe, expect, it } from 'vitest'
import { parseDuration } from '../../packages/sluice/src/duration.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { limiterPolicies, parseConfig } from '../../packages/sluice-server/src/server/config.js'
import { fakeClock, fakeStore } from '../helpers/fake-clock.js'

const DAY = 86_400_000

describe('durations in weeks, months and years', () => {
  it.each([
    ['1w', 7 * DAY],
    ['2w', 14 * DAY],
    ['1.5w', 10.5 * DAY],
    ['1mo', 30 * DAY],
    ['3mo', 90 * DAY],
    ['1y', 365 * DAY],
    [' 2 y ', 730 * DAY],
  ])('%j is %d ms', (input, ms) => {
    expect(parseDuration(input)).toBe(ms)
  })

  it('are accepted as a window, a block and a waiting option', async () => {
    const clock = fakeClock()
    const limiter = createLimiter({
      store: fakeStore(clock),
      policies: {
        monthly: { algorithm: 'fixed-window', limit: 2, window: '1mo' },
        yearly: { algorithm: 'sliding-window-counter', limit: 1000, window: '1y' },
      },
      waiting: { concurrencyRecheck: '1w' },
    })
    expect(limiter.policies.monthly.windowMs).toBe(30 * DAY)
    expect(limiter.policies.yearly.windowMs).toBe(365 * DAY)

    await limiter.consume('monthly', 'u')
    await limiter.consume('monthly', 'u')
    expect((await limiter.consume('monthly', 'u')).retryAfterMs).toBe(30 * DAY)
    clock.advance(30 * DAY)
    expect((await limiter.consume('monthly', 'u')).allowed).toBe(true)

    await limiter.block('yearly', 'v', '1w')
    const blocked = await limiter.consume('yearly', 'v')
    expect(blocked).toMatchObject({ allowed: false, reason: 'blocked', retryAfterMs: 7 * DAY })
    clock.advance(7 * DAY)
    expect((await limiter.consume('yearly', 'v')).allowed).toBe(true)
  })

  it("are accepted in the service's YAML", () => {
    const config = parseConfig(
      'policies:\n  monthly: { algorithm: fixed-window, limit: 100, window: 1mo }\n  weekly: { algorithm: token-bucket, limit: 10, window: 1w }\n',
      'conf.yaml',
    )
    const limiter = createLimiter({ policies: limiterPolicies(config) })
    expect(limiter.policies.monthly?.windowMs).toBe(30 * DAY)
    expect(limiter.policies.weekly?.windowMs).toBe(7 * DAY)
  })
})

describe('a refused duration spelling', () => {
  it.each([
    ['1week', "'1w'"],
    ['2weeks', "'2w'"],
    ['1month', "'1mo'"],
    ['6months', "'6mo'"],
    ['1year', "'1y'"],
    ['5min', "'5m'"],
    ['2 hours', "'2h'"],
    ['30sec', "'30s'"],
    ['1D', "'1d'"],
    ['1M', "'1m' (a minute) or '1mo' (30 days)"],
  ])('%j is SLUICE_INVALID_DURATION naming %s', (input, meant) => {
    expect(() => parseDuration(input, 'window')).toThrow(
      expect.objectContaining({
        code: 'SLUICE_INVALID_DURATION',
        message: expect.stringContaining(`did you mean ${meant}?`),
      }),
    )
  })

  it('without a close spelling names none', () => {
    expect(() => parseDuration('10 parsecs', 'window')).toThrow(
      expect.objectContaining({
        code: 'SLUICE_INVALID_DURATION',
        message: expect.not.stringContaining('did you mean'),
      }),
    )
  })
})
