// Conformance vectors of calendar windows (`align: 'calendar'`): periods of their own lengths in a
// zone, the fixed window's boundaries and the sliding counter's weighting across unequal months.
// Times are epoch ms of real dates; a comment beside a step shows the arithmetic.
import type { Policy } from '../policy.js'
import type { Vector } from './vectors.js'

const HOUR = 3_600_000
const DAY = 24 * HOUR
const at = (iso: string): number => Date.parse(iso)

const monthly = (algorithm: 'fixed-window' | 'sliding-window-counter', limit: number): Policy => ({
  algorithm,
  limit,
  window: '1mo',
  align: 'calendar',
})

export const calendarVectors: Vector[] = [
  {
    name: 'calendar fixed-window: a month ends at its last millisecond and the next opens at once',
    policy: monthly('fixed-window', 2),
    start: at('2026-01-31T23:59:59.000Z'),
    steps: [
      { expect: { allowed: true, remaining: 1, retryAfterMs: 0, resetMs: 1000 } },
      { expect: { allowed: true, remaining: 0, resetMs: 1000 } },
      { expect: { allowed: false, remaining: 0, retryAfterMs: 1000, resetMs: 1000 } },
      { after: 999, expect: { allowed: false, retryAfterMs: 1, resetMs: 1 } },
      // February 1: a window of February's 28 days.
      { after: 1, expect: { allowed: true, remaining: 1, resetMs: 28 * DAY } },
      { op: 'refund', expect: {} },
      { op: 'peek', expect: { allowed: true, remaining: 2, resetMs: 0 } },
    ],
  },
  {
    name: 'calendar fixed-window: a day of America/New_York lasts 25 hours when the clocks go back',
    policy: {
      algorithm: 'fixed-window',
      limit: 1,
      window: '1d',
      align: 'calendar',
      timeZone: 'America/New_York',
    },
    // 2026-11-01 00:00 EDT.
    start: at('2026-11-01T04:00:00.000Z'),
    steps: [
      { expect: { allowed: true, remaining: 0, resetMs: 25 * HOUR } },
      { after: 25 * HOUR - 1, expect: { allowed: false, retryAfterMs: 1, resetMs: 1 } },
      // 2026-11-02 00:00 EST: a day of 24 hours.
      { after: 1, expect: { allowed: true, remaining: 0, resetMs: 24 * HOUR } },
    ],
  },
  {
    name: 'calendar fixed-window: a year of Pacific/Kiritimati (+14) starts 14 hours before UTC',
    policy: {
      algorithm: 'fixed-window',
      limit: 3,
      window: '1y',
      align: 'calendar',
      timeZone: 'Pacific/Kiritimati',
    },
    // 2027-01-01 00:00 local is 2026-12-31T10:00Z.
    start: at('2026-12-31T09:59:59.000Z'),
    steps: [
      { cost: 3, expect: { allowed: true, remaining: 0, resetMs: 1000 } },
      { after: 1000, cost: 3, expect: { allowed: true, remaining: 0, resetMs: 365 * DAY } },
    ],
  },
  {
    name: "calendar sliding-window-counter: February's count weighs what is left of March",
    policy: monthly('sliding-window-counter', 10),
    start: at('2026-02-10T00:00:00.000Z'),
    steps: [
      // Current 10 in February; it counts until March ends (April 1).
      {
        cost: 10,
        expect: {
          allowed: true,
          remaining: 0,
          resetMs: at('2026-04-01T00:00:00.000Z') - at('2026-02-10T00:00:00.000Z'),
        },
      },
      // March 1: previous 10 at full weight. One unit fits when 10 x (31d - e) / 31d <= 9: e >= 3.1 days.
      {
        after: at('2026-03-01T00:00:00.000Z') - at('2026-02-10T00:00:00.000Z'),
        expect: { allowed: false, remaining: 0, retryAfterMs: (31 * DAY) / 10, resetMs: 31 * DAY },
      },
      { after: (31 * DAY) / 10 - 1, expect: { allowed: false, retryAfterMs: 1 } },
      // e = 3.1 days: 9 + 1 fits; the current 1 counts until April ends, 30 days after March.
      { after: 1, expect: { allowed: true, remaining: 0, resetMs: 31 * DAY - (31 * DAY) / 10 + 30 * DAY } },
    ],
  },
  {
    name: "calendar sliding-window-counter: a cost only the next period fits waits on that period's length",
    policy: monthly('sliding-window-counter', 10),
    start: at('2026-02-01T00:00:00.000Z'),
    steps: [
      { cost: 6, expect: { allowed: true, remaining: 4, resetMs: 28 * DAY + 31 * DAY } },
      // 6 + 5 > 10 in February. In March (31 days) the 6 weigh 6 x (31d - e) / 31d <= 5: e >= 31d / 6.
      { cost: 5, expect: { allowed: false, remaining: 4, retryAfterMs: 28 * DAY + (31 * DAY) / 6 } },
      { after: 28 * DAY + (31 * DAY) / 6, cost: 5, expect: { allowed: true, remaining: 0 } },
    ],
  },
  {
    name: 'calendar sliding-window-counter: a count two periods old counts nothing',
    policy: monthly('sliding-window-counter', 10),
    start: at('2026-01-10T00:00:00.000Z'),
    steps: [
      { cost: 10 },
      {
        after: at('2026-03-01T00:00:00.000Z') - at('2026-01-10T00:00:00.000Z'),
        expect: { allowed: true, remaining: 9, resetMs: 61 * DAY },
      },
    ],
  },
]
