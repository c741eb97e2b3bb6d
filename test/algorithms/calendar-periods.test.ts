// Calendar periods in IANA zones: month lengths, leap years, ISO weeks, DST days of 23 and 25 hours,
// midnights a zone skips or repeats, and zones far from UTC.
import { describe, expect, it } from 'vitest'
import { type CalendarUnit, calendarPeriod, periodAt } from '../../packages/sluice/src/calendar.js'

const HOUR = 3_600_000
const iso = (ms: number) => new Date(ms).toISOString()

function period(at: string, unit: CalendarUnit, zone: string) {
  const p = calendarPeriod(Date.parse(at), unit, zone)
  return {
    previous: iso(p.previousStartMs),
    start: iso(p.startMs),
    end: iso(p.endMs),
    next: iso(p.nextEndMs),
    hours: (p.endMs - p.startMs) / HOUR,
  }
}

describe('calendarPeriod', () => {
  it('months have their own lengths: January 31 days, February 28, or 29 in a leap year', () => {
    expect(period('2026-01-31T23:59:59.999Z', 'month', 'UTC')).toEqual({
      previous: '2025-12-01T00:00:00.000Z',
      start: '2026-01-01T00:00:00.000Z',
      end: '2026-02-01T00:00:00.000Z',
      next: '2026-03-01T00:00:00.000Z',
      hours: 31 * 24,
    })
    expect(period('2026-02-01T00:00:00.000Z', 'month', 'UTC').hours).toBe(28 * 24)
    expect(period('2024-02-29T12:00:00.000Z', 'month', 'UTC')).toMatchObject({
      start: '2024-02-01T00:00:00.000Z',
      end: '2024-03-01T00:00:00.000Z',
      hours: 29 * 24,
    })
  })

  it('years start on January 1 local, 365 or 366 days long', () => {
    expect(period('2024-07-01T00:00:00.000Z', 'year', 'UTC').hours).toBe(366 * 24)
    expect(period('2026-12-31T23:59:59.999Z', 'year', 'UTC')).toEqual({
      previous: '2025-01-01T00:00:00.000Z',
      start: '2026-01-01T00:00:00.000Z',
      end: '2027-01-01T00:00:00.000Z',
      next: '2028-01-01T00:00:00.000Z',
      hours: 365 * 24,
    })
  })

  it('weeks start on Monday 00:00 local (ISO), across a year boundary', () => {
    // 2026-12-02 is a Wednesday; 2027-01-01 a Friday, in the week from Monday 2026-12-28.
    expect(period('2026-12-02T12:00:00.000Z', 'week', 'UTC')).toMatchObject({
      start: '2026-11-30T00:00:00.000Z',
      end: '2026-12-07T00:00:00.000Z',
      hours: 168,
    })
    expect(period('2027-01-01T00:00:00.000Z', 'week', 'Europe/Berlin')).toMatchObject({
      previous: '2026-12-20T23:00:00.000Z',
      start: '2026-12-27T23:00:00.000Z',
      end: '2027-01-03T23:00:00.000Z',
    })
    // A Sunday evening is still in the week that began the Monday before.
    expect(period('2026-12-06T23:30:00.000Z', 'week', 'UTC').start).toBe('2026-11-30T00:00:00.000Z')
  })

  it('a DST day is 23 hours in spring and 25 in autumn (America/New_York, Europe/Berlin)', () => {
    expect(period('2026-03-08T12:00:00.000Z', 'day', 'America/New_York')).toMatchObject({
      start: '2026-03-08T05:00:00.000Z',
      end: '2026-03-09T04:00:00.000Z',
      hours: 23,
    })
    expect(period('2026-11-01T12:00:00.000Z', 'day', 'America/New_York')).toMatchObject({
      start: '2026-11-01T04:00:00.000Z',
      end: '2026-11-02T05:00:00.000Z',
      hours: 25,
    })
    expect(period('2026-03-29T12:00:00.000Z', 'day', 'Europe/Berlin').hours).toBe(23)
    expect(period('2026-10-25T12:00:00.000Z', 'day', 'Europe/Berlin').hours).toBe(25)
    // A month holding a DST change is an hour short of its days (March in Berlin).
    expect(period('2026-03-15T00:00:00.000Z', 'month', 'Europe/Berlin').hours).toBe(31 * 24 - 1)
  })

  it('a midnight the zone skips starts the day at the first instant after the gap (America/Santiago)', () => {
    // 2026-09-06 00:00 -04 jumps to 01:00 -03: the day starts at 04:00Z and lasts 23 hours.
    expect(period('2026-09-06T12:00:00.000Z', 'day', 'America/Santiago')).toMatchObject({
      start: '2026-09-06T04:00:00.000Z',
      end: '2026-09-07T03:00:00.000Z',
      hours: 23,
    })
    // 2026-04-05 00:00 -03 goes back to 23:00 -04: April 4 lasts 25 hours, April 5 starts at the
    // one midnight it has.
    expect(period('2026-04-04T12:00:00.000Z', 'day', 'America/Santiago')).toMatchObject({
      start: '2026-04-04T03:00:00.000Z',
      end: '2026-04-05T04:00:00.000Z',
      hours: 25,
    })
    expect(period('2026-04-05T03:30:00.000Z', 'day', 'America/Santiago').start).toBe(
      '2026-04-04T03:00:00.000Z',
    )
  })

  it('zones at -11 and +14 draw the boundaries of their own dates', () => {
    // 2026-12-31T23:00Z is 2027-01-01 13:00 in Kiritimati (+14) and 2026-12-31 12:00 in Pago Pago (-11).
    expect(period('2026-12-31T23:00:00.000Z', 'year', 'Pacific/Kiritimati')).toMatchObject({
      start: '2026-12-31T10:00:00.000Z',
      end: '2027-12-31T10:00:00.000Z',
    })
    expect(period('2026-12-31T23:00:00.000Z', 'year', 'Pacific/Pago_Pago')).toMatchObject({
      start: '2026-01-01T11:00:00.000Z',
      end: '2027-01-01T11:00:00.000Z',
    })
    expect(period('2026-06-15T10:59:59.999Z', 'day', 'Pacific/Tongatapu')).toMatchObject({
      start: '2026-06-14T11:00:00.000Z',
      end: '2026-06-15T11:00:00.000Z',
      next: '2026-06-16T11:00:00.000Z',
    })
  })

  it('a date the zone skipped is no period: its neighbours skip it (Samoa, 2011-12-30)', () => {
    expect(period('2011-12-29T12:00:00.000Z', 'day', 'Pacific/Apia')).toMatchObject({
      start: '2011-12-29T10:00:00.000Z',
      end: '2011-12-30T10:00:00.000Z',
      next: '2011-12-31T10:00:00.000Z',
    })
    expect(period('2011-12-30T12:00:00.000Z', 'day', 'Pacific/Apia').previous).toBe(
      '2011-12-29T10:00:00.000Z',
    )
  })

  it('the last millisecond belongs to the period, the boundary to the next', () => {
    const end = Date.parse('2026-02-01T00:00:00.000Z')
    expect(calendarPeriod(end - 1, 'month', 'UTC').endMs).toBe(end)
    expect(calendarPeriod(end, 'month', 'UTC').startMs).toBe(end)
  })
})

describe('periodAt', () => {
  it('answers the cached period until it ends, then the next one, and goes back with the clock', () => {
    const spec = { unit: 'day', timeZone: 'Asia/Tokyo' } as const
    const noon = Date.parse('2026-12-02T03:00:00.000Z')
    const first = periodAt(noon, spec)
    expect(periodAt(noon + HOUR, spec)).toBe(first)
    const next = periodAt(first.endMs, spec)
    expect(next.startMs).toBe(first.endMs)
    expect(periodAt(noon, spec)).toEqual(first)
  })
})
