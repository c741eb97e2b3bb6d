// Calendar windows on multiRegionStore (scope 'region', the Redis clock): the local region decides
// in the calendar period drawn by this process's clock, and a region's counts stay its own.
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { calendarPeriod } from '../../../packages/sluice/src/calendar.js'
import { createLimiter } from '../../../packages/sluice/src/limiter.js'
import { multiRegionStore } from '../../../packages/sluice/src/stores/multi-region/index.js'
import { type RedisServer, startRedis } from '../../helpers/redis-harness.js'

describe('multiRegionStore with calendar windows', () => {
  let servers: RedisServer[] = []
  let eu: Redis
  let us: Redis
  beforeAll(async () => {
    servers = await Promise.all([startRedis(), startRedis()])
    eu = new Redis(servers[0]!.port, '127.0.0.1')
    us = new Redis(servers[1]!.port, '127.0.0.1')
  })
  afterAll(async () => {
    eu.disconnect()
    us.disconnect()
    await Promise.all(servers.map((s) => s.stop()))
  })

  it('a monthly quota per region ends at the month end in the zone', async () => {
    const policies = {
      monthly: {
        algorithm: 'fixed-window',
        limit: 2,
        window: '1mo',
        align: 'calendar',
        timeZone: 'Asia/Tokyo',
      },
    } as const
    const inEu = multiRegionStore({ region: 'eu', regions: { eu, us }, prefix: 'cal' })
    const inUs = multiRegionStore({ region: 'us', regions: { eu, us }, prefix: 'cal' })
    const euLimiter = createLimiter({ store: inEu, policies, localDenyCache: false })
    const usLimiter = createLimiter({ store: inUs, policies, localDenyCache: false })
    try {
      const before = Date.now()
      const first = await euLimiter.consume('monthly', 'k')
      const after = Date.now()
      // Redis's clock and this process's are the same host's: the reset is the month end from a
      // time between the two readings.
      const end = calendarPeriod(before, 'month', 'Asia/Tokyo').endMs
      expect(first.allowed).toBe(true)
      expect(first.resetMs).toBeGreaterThanOrEqual(end - after)
      expect(first.resetMs).toBeLessThanOrEqual(end - before)
      await euLimiter.consume('monthly', 'k')
      expect((await euLimiter.consume('monthly', 'k')).allowed).toBe(false)
      expect((await usLimiter.consume('monthly', 'k')).allowed).toBe(true)
    } finally {
      await euLimiter.close()
      await usLimiter.close()
    }
  })
})
