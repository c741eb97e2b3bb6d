// The tests' port allocator: a service and a Redis Cluster started by one test file are never given
// the same port, or one the other's cluster bus (port + 10000) will bind.
import { describe, expect, it } from 'vitest'
import { freePort as redisPort } from '../helpers/redis-harness.js'
import { freePort as servicePort } from '../helpers/service.js'

describe('freePort', () => {
  it('hands out each port and each bus port once across the harnesses', async () => {
    const bound = new Set<number>()
    for (let i = 0; i < 300; i++) {
      for (const port of [await servicePort(), await redisPort()]) {
        expect(port).toBeGreaterThanOrEqual(10_000)
        expect(port + 10_000).toBeLessThanOrEqual(32_767)
        expect(bound.has(port)).toBe(false)
        expect(bound.has(port + 10_000)).toBe(false)
        bound.add(port)
        bound.add(port + 10_000)
      }
    }
    expect(bound.size).toBe(1200)
  })
})
