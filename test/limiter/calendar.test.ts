// Calendar quotas through createLimiter on the memory store with an injected clock: windows that
// start and end at the calendar boundaries of a zone, the sliding counter across months of unequal
// length, and the options refused with SLUICE_INVALID_POLICY.
import { describe, expect, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import type { Policy } from '../../packages/sluice/src/policy.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'

const HOUR = 3_600_000
const DAY = 24 * HOUR

function limiterAt(at: string, policy: Policy) {
  const clock = { t: Date.parse(at) }
  const limiter = createLimiter({ store: memoryStore({ now: () => clock.t }), policies: { p: policy } })
  return { clock, limiter }
}

describe('calendar fixed window', () => {
  it('a month quota ends at the month boundary and opens again with the next month', async () => {
    const { clock, limiter } = limiterAt('2026-01-31T23:00:00.000Z', {
      algorithm: 'fixed-window',
      limit: 2,
      window: '1mo',
      align: 'calendar',
    })
    expect(await limiter.consume('p', 'k')).toMatchObject({ allowed: true, remaining: 1, resetMs: HOUR })
    expect(await limiter.consume('p', 'k')).toMatchObject({ allowed: true, remaining: 0 })
    clock.t += HOUR - 1
    expect(await limiter.consume('p', 'k')).toMatchObject({ allowed: false, retryAfterMs: 1, resetMs: 1 })
    clock.t += 1
    // February 1, 00:00 UTC: a fresh window of the 28 days of February.
    expect(await limiter.consume('p', 'k')).toMatchObject({ allowed: true, remaining: 1, resetMs: 28 * DAY })
  })

  it('a day in Europe/Berlin ends at local midnight: 23 hours on the spring DST day', async () => {
    // 2026-03-29 01:00Z is 03:00 CEST, two hours into a day that began at 23:00Z and ends at 22:00Z.
    const { limiter } = limiterAt('2026-03-29T01:00:00.000Z', {
      algorithm: 'fixed-window',
      limit: 5,
      window: '1d',
      align: 'calendar',
      timeZone: 'Europe/Berlin',
    })
    expect(await limiter.consume('p', 'k')).toMatchObject({ allowed: true, resetMs: 21 * HOUR })
  })

  it('the same window without align opens at the first request and lasts 30 days', async () => {
    const { limiter } = limiterAt('2026-01-31T23:00:00.000Z', {
      algorithm: 'fixed-window',
      limit: 2,
      window: '1mo',
    })
    expect(await limiter.consume('p', 'k')).toMatchObject({ resetMs: 30 * DAY })
  })

  it('a week starts on Monday 00:00 in the zone', async () => {
    // Wednesday 2026-12-02 12:00 in New York (-05): the week ends Monday 2026-12-07 05:00Z.
    const { limiter } = limiterAt('2026-12-02T17:00:00.000Z', {
      algorithm: 'fixed-window',
      limit: 5,
      window: '1w',
      align: 'calendar',
      timeZone: 'America/New_York',
    })
    const d = await limiter.consume('p', 'k')
    expect(d.resetMs).toBe(Date.parse('2026-12-07T05:00:00.000Z') - Date.parse('2026-12-02T17:00:00.000Z'))
  })
})

describe('calendar sliding window counter', () => {
  const policy: Policy = {
    algorithm: 'sliding-window-counter',
    limit: 10,
    window: '1mo',
    align: 'calendar',
  }

  it("February's count weighs what is left of March: half of it halfway through March's 31 days", async () => {
    const { clock, limiter } = limiterAt('2026-02-10T00:00:00.000Z', policy)
    for (let i = 0; i < 10; i++) expect((await limiter.consume('p', 'k')).allowed).toBe(true)
    // At the end of February: full. Its own count ends with the month after (March), 28 + 31 days
    // after February began.
    const full = await limiter.peek('p', 'k')
    expect(full).toMatchObject({ remaining: 0, resetMs: Date.parse('2026-04-01T00:00:00.000Z') - clock.t })
    clock.t = Date.parse('2026-03-01T00:00:00.000Z')
    expect(await limiter.consume('p', 'k')).toMatchObject({ allowed: false, remaining: 0 })
    // March 16, 12:00: 15.5 of 31 days gone, February's 10 weigh 5.
    clock.t = Date.parse('2026-03-16T12:00:00.000Z')
    expect(await limiter.peek('p', 'k')).toMatchObject({ remaining: 5 })
    // Only a count of March remains after it: the key is full again at April 1.
    expect(await limiter.consume('p', 'k')).toMatchObject({
      allowed: true,
      remaining: 4,
      resetMs: Date.parse('2026-05-01T00:00:00.000Z') - clock.t,
    })
  })

  it('a denied request waits until the previous period weighs little enough', async () => {
    const { clock, limiter } = limiterAt('2026-02-10T00:00:00.000Z', policy)
    await limiter.consume('p', 'k', { cost: 10 })
    clock.t = Date.parse('2026-03-01T00:00:00.000Z')
    // One unit fits once 10 x (31d - elapsed) / 31d <= 9: elapsed >= 3.1 days.
    const d = await limiter.consume('p', 'k')
    expect(d).toMatchObject({ allowed: false, retryAfterMs: Math.ceil((31 * DAY) / 10) })
  })

  it('a period two periods back counts nothing', async () => {
    const { clock, limiter } = limiterAt('2026-01-10T00:00:00.000Z', policy)
    await limiter.consume('p', 'k', { cost: 10 })
    clock.t = Date.parse('2026-03-01T00:00:00.000Z')
    expect(await limiter.consume('p', 'k')).toMatchObject({ allowed: true, remaining: 9 })
  })
})

describe('calendar options refused', () => {
  const base = { algorithm: 'fixed-window', limit: 5, window: '1d' } as const
  // Each with the field it names and what the message says (none of them an unknown option).
  const refused: [string, Record<string, unknown>, RegExp][] = [
    ['a zone without align', { ...base, timeZone: 'UTC' }, /^policies\.p\.timeZone: only calendar windows/],
    [
      'an unknown zone',
      { ...base, align: 'calendar', timeZone: 'Mars/Olympus_Mons' },
      /^policies\.p\.timeZone: "Mars\/Olympus_Mons" is not a time zone/,
    ],
    [
      'a zone that is not text',
      { ...base, align: 'calendar', timeZone: 3 },
      /^policies\.p\.timeZone: must be a string/,
    ],
    [
      'an align other than calendar',
      { ...base, align: 'rolling' },
      /^policies\.p\.align: must be 'calendar'/,
    ],
    [
      'two days',
      { ...base, window: '2d', align: 'calendar' },
      /^policies\.p\.window: a calendar window is one day/,
    ],
    [
      'an hour',
      { ...base, window: '1h', align: 'calendar' },
      /^policies\.p\.window: a calendar window is one day/,
    ],
    [
      'token bucket',
      { algorithm: 'token-bucket', limit: 5, window: '1d', align: 'calendar' },
      /^policies\.p\.align: token-bucket has no window edges/,
    ],
    [
      'gcra',
      { algorithm: 'gcra', limit: 5, window: '1d', align: 'calendar' },
      /^policies\.p\.align: gcra has no window/,
    ],
    [
      'sliding window log',
      { algorithm: 'sliding-window-log', limit: 5, window: '1d', align: 'calendar' },
      /^policies\.p\.align: sliding-window-log has no window/,
    ],
    [
      'concurrency',
      { algorithm: 'concurrency', limit: 5, timeout: '1d', align: 'calendar' },
      /^policies\.p\.align: a concurrency policy has no window/,
    ],
    ['hybrid mode', { ...base, align: 'calendar', mode: 'hybrid' }, /^policies\.p\.align: a hybrid policy/],
    [
      'scope global',
      { algorithm: 'sliding-window-counter', limit: 5, window: '1d', align: 'calendar', scope: 'global' },
      /^policies\.p\.align: a global limit/,
    ],
    [
      'a limit too large to count exactly over 31 days',
      { ...base, window: '1mo', align: 'calendar', limit: 420_000 },
      /^policies\.p: limit \(or burst\) x window is too large/,
    ],
  ]
  it.each(refused)('%s', (_what, policy, message) => {
    expect(() =>
      createLimiter({ store: memoryStore(), policies: { p: policy as unknown as Policy } }),
    ).toThrow(
      expect.objectContaining({ code: 'SLUICE_INVALID_POLICY', message: expect.stringMatching(message) }),
    )
  })

  it('the same limit is counted exactly without align (a 30-day window)', () => {
    expect(() =>
      createLimiter({ store: memoryStore(), policies: { p: { ...base, window: '1mo', limit: 420_000 } } }),
    ).not.toThrow()
  })

  it('names the time zone as Intl does', async () => {
    const { limiter } = limiterAt('2026-06-01T00:00:00.000Z', {
      ...base,
      align: 'calendar',
      timeZone: 'europe/berlin',
    })
    expect(limiter.policies.p.calendar).toEqual({ unit: 'day', timeZone: 'Europe/Berlin' })
  })
})
