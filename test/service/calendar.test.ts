// Calendar quotas in the service: align and timeZone on YAML policies, `sluice check`'s description,
// /v1/check answering the reset at the calendar boundary, and bad values named at their line.
import { describe, expect, it } from 'vitest'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { describeConfig, parseConfig } from '../../packages/sluice-server/src/server/config.js'
import { post, servicesClosedAfterEach } from '../helpers/service.js'

const start = servicesClosedAfterEach()
const YAML = `
policies:
  monthly: { algorithm: fixed-window, limit: 2, window: 1mo, align: calendar, timeZone: Europe/Berlin }
  daily: { algorithm: sliding-window-counter, limit: 5, window: 1d, align: calendar }
  rolling: { algorithm: fixed-window, limit: 2, window: 1mo }
`
// 2026-03-31 23:00 in Berlin: April begins at 22:00Z, an hour away; the UTC day ends at 24:00Z.
const NOW = Date.parse('2026-03-31T21:00:00.000Z')
const HOUR = 3_600_000

describe('calendar policies in the YAML', () => {
  it('sluice check names the calendar unit and zone', () => {
    const text = describeConfig(parseConfig(YAML, 'test.yaml'))
    expect(text).toMatch(
      /monthly: fixed-window, 2 per 2592000000ms, capacity 2, calendar month in Europe\/Berlin,/,
    )
    expect(text).toMatch(/daily: sliding-window-counter, 5 per 86400000ms, capacity 5, calendar day in UTC,/)
    expect(text).toMatch(/rolling: fixed-window, 2 per 2592000000ms, capacity 2, onStoreError/)
  })

  it('a calendar policy keeps counters of its own: adding align or changing the zone changes the id', () => {
    const id = (yaml: string) => parseConfig(yaml, 'test.yaml').entries.get('p')!.id
    const rolling = id('policies:\n  p: { algorithm: fixed-window, limit: 2, window: 1mo }\n')
    const utc = id('policies:\n  p: { algorithm: fixed-window, limit: 2, window: 1mo, align: calendar }\n')
    const berlin = id(
      'policies:\n  p: { algorithm: fixed-window, limit: 2, window: 1mo, align: calendar, timeZone: Europe/Berlin }\n',
    )
    expect(new Set([rolling, utc, berlin]).size).toBe(3)
  })

  it.each([
    [
      'an unknown zone',
      'align: calendar, timeZone: Mars/Base',
      /policies\.p\.timeZone: "Mars\/Base" is not a time zone/,
    ],
    ['a zone without align', 'timeZone: UTC', /policies\.p\.timeZone: only calendar windows/],
    ['another align', 'align: rolling', /policies\.p\.align: must be 'calendar'/],
  ])('%s is refused at its line', (_what, extra, message) => {
    const yaml = `policies:\n  p: { algorithm: fixed-window, limit: 2, window: 1mo, ${extra} }\n`
    expect(() => parseConfig(yaml, 'test.yaml')).toThrow(
      expect.objectContaining({ code: 'SLUICE_INVALID_CONFIG', message: expect.stringMatching(message) }),
    )
  })
})

describe('POST /v1/check on calendar policies', () => {
  it('answers the reset at the calendar boundary, and a fresh period after it', async () => {
    const clock = { t: NOW }
    const store = memoryStore({ now: () => clock.t })
    const r = await start(YAML, { store: { store, description: 'memory', ping: async () => {} } })
    const check = async (policy: string) => (await post(`${r.url}/v1/check`, { policy, key: 'k' })).body
    expect(await check('monthly')).toMatchObject({ allowed: true, remaining: 1, resetMs: HOUR })
    expect(await check('rolling')).toMatchObject({ allowed: true, resetMs: 30 * 24 * HOUR })
    // The UTC day ends 3 hours later; the current count of a sliding counter ends with the next day.
    expect(await check('daily')).toMatchObject({ allowed: true, remaining: 4, resetMs: 3 * HOUR + 24 * HOUR })
    await check('monthly')
    expect(await check('monthly')).toMatchObject({ allowed: false, retryAfterMs: HOUR, reason: 'limit' })
    clock.t += HOUR
    expect(await check('monthly')).toMatchObject({ allowed: true, remaining: 1, resetMs: 30 * 24 * HOUR })
  })
})
