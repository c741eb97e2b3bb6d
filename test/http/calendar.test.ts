// Calendar quotas through the HTTP middleware on real sockets: the reset headers name the end of
// the calendar period in the policy's zone, for the fixed window and the sliding window counter.
import { afterEach, describe, expect, it } from 'vitest'
import { createHttpLimiter } from '../../packages/sluice/src/http/index.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { adapters, call, type Running } from './servers.js'

const node = adapters.find((a) => a.name === 'node:http')!
// 2026-02-28 23:00 in Berlin (CET, +01): March begins at 2026-02-28T23:00Z, an hour away. March
// lasts 31 days less the hour the clocks skip on the 29th: not the nominal 30 days of '1mo'.
const NOW = Date.parse('2026-02-28T22:00:00.000Z')
const MARCH = Date.parse('2026-02-28T23:00:00.000Z')
const MARCH_MS = (31 * 24 - 1) * 3_600_000

let running: Running | undefined
afterEach(async () => {
  await running?.close()
  running = undefined
})

async function start(algorithm: 'fixed-window' | 'sliding-window-counter') {
  const clock = { t: NOW }
  const limiter = createLimiter({
    store: memoryStore({ now: () => clock.t }),
    policies: {
      monthly: { algorithm, limit: 2, window: '1mo', align: 'calendar', timeZone: 'Europe/Berlin' },
    },
  })
  const http = createHttpLimiter({ limiter, rules: [{ policy: 'monthly', key: 'ip' }], now: () => clock.t })
  running = await node.start(http, { port: 0 })
  const target = running.target
  return { clock, get: () => call(target, '/hello') }
}

describe('calendar quotas over HTTP', () => {
  it('fixed window: X-RateLimit-Reset and RateLimit t name the month end in the zone, then March', async () => {
    const { clock, get } = await start('fixed-window')
    const first = await get()
    expect(first.status).toBe(200)
    expect(first.headers['x-ratelimit-reset']).toBe(String(MARCH / 1000))
    expect(first.headers.ratelimit).toBe('"monthly";r=1;t=3600')
    await get()
    const denied = await get()
    expect(denied.status).toBe(429)
    expect(denied.headers['retry-after']).toBe('3600')
    clock.t = MARCH
    const march = await get()
    expect(march.status).toBe(200)
    expect(march.headers['x-ratelimit-reset']).toBe(String((MARCH + MARCH_MS) / 1000))
  })

  it('sliding window counter: the reset is the month end, where the counters roll', async () => {
    const { get } = await start('sliding-window-counter')
    const first = await get()
    expect(first.status).toBe(200)
    expect(first.headers['x-ratelimit-reset']).toBe(String(MARCH / 1000))
    expect(first.headers.ratelimit).toBe('"monthly";r=1;t=3600')
  })
})
