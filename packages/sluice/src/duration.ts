// Durations in config: integer milliseconds, or strings like `250ms`, `10s`, `5m`, `1h`, `1d`, `1w`,
// `1mo`, `1y`. A month is 30 days and a year 365 days, never calendar months: a window has one
// length, as the Envoy config's `unit: month` counts it.
import { InvalidDurationError } from './errors.js'

/**
 * A duration: integer milliseconds or a string such as `'500ms'`, `'10s'`, `'1.5m'`, `'1h'`, `'1d'`,
 * `'1w'` (7 days), `'1mo'` (30 days, not the calendar month) or `'1y'` (365 days).
 */
export type Duration = number | `${number}${'ms' | 's' | 'm' | 'h' | 'd' | 'w' | 'mo' | 'y'}` | (string & {})

const DAY_MS = 86_400_000
const UNIT_MS: Record<string, number> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: DAY_MS,
  w: 7 * DAY_MS,
  mo: 30 * DAY_MS,
  y: 365 * DAY_MS,
}
// `mo` before `m` and `ms` before `m`/`s`: the alternation takes the first unit that matches.
const PATTERN = /^\s*(\d+(?:\.\d+)?)\s*(ms|mo|s|m|h|d|w|y)\s*$/
// A number followed by a word that is not a unit: what a user coming from another library writes.
const WORDED = /^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*$/

/** The unit users mean by the words other libraries accept (`min`, `week`, `months`), lower case. */
const UNIT_WORDS: Record<string, string> = {
  msec: 'ms',
  msecs: 'ms',
  millisecond: 'ms',
  milliseconds: 'ms',
  sec: 's',
  secs: 's',
  second: 's',
  seconds: 's',
  min: 'm',
  mins: 'm',
  minute: 'm',
  minutes: 'm',
  hr: 'h',
  hrs: 'h',
  hour: 'h',
  hours: 'h',
  day: 'd',
  days: 'd',
  wk: 'w',
  wks: 'w',
  week: 'w',
  weeks: 'w',
  mon: 'mo',
  mth: 'mo',
  mths: 'mo',
  month: 'mo',
  months: 'mo',
  yr: 'y',
  yrs: 'y',
  year: 'y',
  years: 'y',
}

/** `did you mean '1w'?` for a refused spelling whose unit is clear, else nothing. */
function suggestion(value: string): string {
  const match = WORDED.exec(value)
  if (!match) return ''
  const amount = match[1]!
  const written = match[2]!
  // `M` is a month in some libraries and a minute in others: name both.
  if (written === 'M') return `; did you mean '${amount}m' (a minute) or '${amount}mo' (30 days)?`
  const lower = written.toLowerCase()
  const unit = UNIT_MS[lower] !== undefined ? lower : UNIT_WORDS[lower]
  return unit === undefined ? '' : `; did you mean '${amount}${unit}'?`
}

/**
 * Parse a duration into whole milliseconds (> 0).
 * @example parseDuration('1m') // 60000
 * @example parseDuration('1mo') // 2592000000 (30 days)
 */
export function parseDuration(value: unknown, what = 'duration'): number {
  if (typeof value === 'number') {
    if (Number.isSafeInteger(value) && value > 0) return value
    throw new InvalidDurationError(
      `${what}: ${String(value)} is not a duration; use a positive whole number of milliseconds or a string like '10s'`,
    )
  }
  if (typeof value === 'string') {
    const match = PATTERN.exec(value)
    if (match) {
      const ms = Number(match[1]) * UNIT_MS[match[2]!]!
      if (Number.isSafeInteger(ms) && ms > 0) return ms
    }
    throw new InvalidDurationError(
      `${what}: ${JSON.stringify(value)} is not a duration; use a number with a unit: 500ms, 10s, 10m, 1h, 1d${match ? '' : suggestion(value)}`,
    )
  }
  throw new InvalidDurationError(
    `${what}: expected a duration (milliseconds or a string like '10s'), got ${value === null ? 'null' : typeof value}`,
  )
}
