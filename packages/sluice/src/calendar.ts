// Calendar periods (a day, an ISO week, a month, a year) in an IANA time zone, as epoch ms: what a
// policy with `align: 'calendar'` counts in. Zone arithmetic through Intl, with no dependency.

/** The calendar units a calendar-aligned window can be. */
export type CalendarUnit = 'day' | 'week' | 'month' | 'year'

/** A calendar-aligned window: the unit and the zone whose wall clock draws its boundaries. */
export interface CalendarSpec {
  readonly unit: CalendarUnit
  readonly timeZone: string
}

/**
 * The period holding an instant and its neighbours, in epoch ms: `[startMs, endMs)` is the period,
 * `previousStartMs` the start of the one before (it ends at `startMs`), `nextEndMs` the end of the
 * one after (it starts at `endMs`).
 */
export interface CalendarPeriod {
  readonly previousStartMs: number
  readonly startMs: number
  readonly endMs: number
  readonly nextEndMs: number
}

const DAY_MS = 86_400_000

// One formatter per zone: building one costs far more than formatting with it.
const formatters = new Map<string, Intl.DateTimeFormat>()

function formatterOf(timeZone: string): Intl.DateTimeFormat {
  let format = formatters.get(timeZone)
  if (format === undefined) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
      era: 'short',
    })
    formatters.set(timeZone, format)
  }
  return format
}

/** The zone's canonical name, or undefined when Intl does not know it. */
export function canonicalTimeZone(timeZone: string): string | undefined {
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone }).resolvedOptions().timeZone
  } catch {
    return undefined
  }
}

/** The wall clock of `timeZone` at instant `ms`, read as if it were UTC (whole seconds). */
function wallClock(ms: number, timeZone: string): number {
  const fields: Record<string, number> = {}
  let bc = false
  for (const part of formatterOf(timeZone).formatToParts(ms)) {
    if (part.type === 'era') bc = part.value.startsWith('B')
    else if (part.type !== 'literal') fields[part.type] = Number(part.value)
  }
  const year = bc ? 1 - fields.year! : fields.year!
  const wall = new Date(0)
  wall.setUTCFullYear(year, fields.month! - 1, fields.day!)
  wall.setUTCHours(fields.hour!, fields.minute!, fields.second!, 0)
  return wall.getTime()
}

/** The zone's offset from UTC at instant `ms`, in ms (wall clock minus UTC). */
function offsetAt(ms: number, timeZone: string): number {
  const second = Math.floor(ms / 1000) * 1000
  return wallClock(second, timeZone) - second
}

/**
 * The first instant whose wall clock in `timeZone` reads `wallMs` (a local midnight written as if it
 * were UTC) or later: the midnight itself, the first of two when the clocks go back over it, or the
 * first instant after the gap when the clocks jump over it.
 */
function firstInstantAt(wallMs: number, timeZone: string): number {
  const before = wallMs - offsetAt(wallMs - DAY_MS, timeZone)
  const after = wallMs - offsetAt(wallMs + DAY_MS, timeZone)
  const candidates = before <= after ? [before, after] : [after, before]
  for (const instant of candidates) if (wallClock(instant, timeZone) === wallMs) return instant
  // Midnight falls in a gap: the clocks jump from before it to after it at one instant between the
  // candidates; find it to the millisecond (zones change on whole seconds, so 30-odd steps at most).
  let low = candidates[0]!
  let high = candidates[1]!
  while (high - low > 1) {
    const middle = Math.floor((low + high) / 2)
    if (middle + offsetAt(middle, timeZone) >= wallMs) high = middle
    else low = middle
  }
  return high
}

/** The local midnight starting the period `shift` periods after the one holding local date `wall`. */
function periodStartWall(wall: Date, unit: CalendarUnit, shift: number): number {
  const year = wall.getUTCFullYear()
  const month = wall.getUTCMonth()
  const day = wall.getUTCDate()
  const start = new Date(0)
  if (unit === 'day') start.setUTCFullYear(year, month, day + shift)
  else if (unit === 'week') {
    // ISO weeks start on Monday: getUTCDay() is 0 on Sunday.
    const sinceMonday = (wall.getUTCDay() + 6) % 7
    start.setUTCFullYear(year, month, day - sinceMonday + 7 * shift)
  } else if (unit === 'month') start.setUTCFullYear(year, month + shift, 1)
  else start.setUTCFullYear(year + shift, 0, 1)
  return start.getTime()
}

/** The calendar period of `unit` in `timeZone` holding instant `nowMs`, with its neighbours. */
export function calendarPeriod(nowMs: number, unit: CalendarUnit, timeZone: string): CalendarPeriod {
  const wall = new Date(wallClock(nowMs, timeZone))
  const at = (shift: number) => firstInstantAt(periodStartWall(wall, unit, shift), timeZone)
  return neighbours(nowMs, at)
}

/**
 * The period holding `nowMs` and its neighbours, given the first instant of the period `shift` from
 * the one of `nowMs`'s wall date. A date the zone skipped (Samoa's 2011-12-30) is a period of no
 * length: the neighbours skip it.
 */
function neighbours(nowMs: number, at: (shift: number) => number): CalendarPeriod {
  let startMs = at(0)
  let endMs = at(1)
  // Where the clocks go back over midnight, the wall date of `nowMs` may be the earlier day's while
  // the instant is already past the later day's first midnight (or the reverse): step to the period
  // that holds it.
  let shift = 0
  while (nowMs < startMs) {
    shift -= 1
    endMs = startMs
    startMs = at(shift)
  }
  while (nowMs >= endMs) {
    shift += 1
    startMs = endMs
    endMs = at(shift + 1)
  }
  let before = shift - 1
  while (at(before) === startMs) before -= 1
  let after = shift + 2
  while (at(after) === endMs) after += 1
  return { previousStartMs: at(before), startMs, endMs, nextEndMs: at(after) }
}

/** The period a calendar policy last computed, per zone and unit, reused until it ends. */
const current = new Map<string, Partial<Record<CalendarUnit, CalendarPeriod>>>()

/**
 * `calendarPeriod`, cached per zone and unit until the period ends: a calendar policy's decisions
 * read two numbers and compare, and call Intl once per period (or when a clock goes back past it).
 */
export function periodAt(nowMs: number, spec: CalendarSpec): CalendarPeriod {
  let zone = current.get(spec.timeZone)
  const cached = zone?.[spec.unit]
  if (cached !== undefined && nowMs >= cached.startMs && nowMs < cached.endMs) return cached
  const period = calendarPeriod(nowMs, spec.unit, spec.timeZone)
  if (zone === undefined) {
    zone = {}
    current.set(spec.timeZone, zone)
  }
  zone[spec.unit] = period
  return period
}
