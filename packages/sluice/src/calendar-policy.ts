// The policy options `align: 'calendar'` and `timeZone`, checked and resolved to a calendar spec.
import { type CalendarSpec, type CalendarUnit, canonicalTimeZone } from './calendar.js'
import { InvalidPolicyError } from './errors.js'

export type { CalendarSpec } from './calendar.js'

const HOUR_MS = 3_600_000
const DAY_MS = 24 * HOUR_MS

/**
 * The windows a calendar policy may have, by their length as a duration (`1d`, `1w`, `1mo`, `1y`),
 * and the longest period of each: a day or a week an hour longer when the clocks go back, a month
 * of 31 days, a year of 366.
 */
const UNITS: readonly { windowMs: number; unit: CalendarUnit; longestMs: number }[] = [
  { windowMs: DAY_MS, unit: 'day', longestMs: DAY_MS + HOUR_MS },
  { windowMs: 7 * DAY_MS, unit: 'week', longestMs: 7 * DAY_MS + HOUR_MS },
  { windowMs: 30 * DAY_MS, unit: 'month', longestMs: 31 * DAY_MS + HOUR_MS },
  { windowMs: 365 * DAY_MS, unit: 'year', longestMs: 366 * DAY_MS + HOUR_MS },
]

/** The algorithms whose windows have edges to put on the calendar. */
const CALENDAR_ALGORITHMS: readonly string[] = ['fixed-window', 'sliding-window-counter']

interface CalendarOptions {
  algorithm: string
  windowMs: number
  align: 'calendar' | undefined
  timeZone: string | undefined
  mode: string | undefined
  scope: string | undefined
}

/**
 * The calendar spec of a policy with `align` or `timeZone`, and the length of its longest period.
 * Throws `InvalidPolicyError` for a combination that means nothing: a zone without the alignment, an
 * algorithm without window edges, a window that is not one calendar unit, an unknown zone.
 */
export function calendarSpec(
  name: string,
  options: CalendarOptions,
): { spec: CalendarSpec; longestMs: number } {
  const at = `policies.${name}`
  if (options.align === undefined)
    throw new InvalidPolicyError(
      `${at}.timeZone: only calendar windows have a time zone; add align: 'calendar' or remove timeZone`,
    )
  if (!CALENDAR_ALGORITHMS.includes(options.algorithm))
    throw new InvalidPolicyError(
      `${at}.align: ${options.algorithm} has no window edges to put on the calendar (it refills or spaces requests continuously); use fixed-window or sliding-window-counter, or remove align`,
    )
  const unit = UNITS.find((u) => u.windowMs === options.windowMs)
  if (unit === undefined)
    throw new InvalidPolicyError(
      `${at}.window: a calendar window is one day, week, month or year; use '1d', '1w', '1mo' or '1y' (for several, use a policy of each unit or a rolling window without align)`,
    )
  if (options.mode === 'hybrid')
    throw new InvalidPolicyError(
      `${at}.align: a hybrid policy decides on counters synced by its own windows; use mode 'exact' with align: 'calendar'`,
    )
  if (options.scope === 'global')
    throw new InvalidPolicyError(
      `${at}.align: a global limit counts windows every region draws alike on its own clock; use scope 'region' with align: 'calendar'`,
    )
  const timeZone = canonicalTimeZone(options.timeZone ?? 'UTC')
  if (timeZone === undefined)
    throw new InvalidPolicyError(
      `${at}.timeZone: ${JSON.stringify(options.timeZone)} is not a time zone this runtime knows; use an IANA name such as 'UTC', 'Europe/Berlin' or 'America/New_York'`,
    )
  return { spec: Object.freeze({ unit: unit.unit, timeZone }), longestMs: unit.longestMs }
}
