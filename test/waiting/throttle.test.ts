// throttle across 4 OS processes sharing one key on a real Redis, calling a real local HTTP server:
// the rate is measured where it matters, at the server; the function's own errors pass through.
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { describe, expect, inject, it } from 'vitest'
import { freshPrefix } from '../helpers/redis-clients.js'
import { expectWithinRate, workers } from './waiting-workers.js'

describe('throttle across processes', () => {
  it('4 processes calling a local server keep to the shared rate, measured at the server; errors pass through', {
    timeout: 40_000,
  }, async () => {
    const arrivals: number[] = []
    const server = createServer((req, res) => {
      arrivals.push(Date.now())
      if (req.url === '/fail') {
        res.statusCode = 500
        res.end('no')
      } else res.end('ok')
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    try {
      const before = Date.now()
      const results = await workers(4, {
        mode: 'throttle',
        ports: [inject('redis').port],
        cluster: false,
        prefix: freshPrefix('throttle'),
        algorithm: 'token-bucket',
        limit: 10,
        window: 1_000,
        burst: 2,
        calls: 10,
        maxWaitMs: 15_000,
        url,
      })
      const all = results.flat()
      expect(arrivals.length).toBe(40)
      expectWithinRate(arrivals, before + 2_500 - 50, 2, 10 / 1_000)
      // Calls to /fail reject with the function's own error; the others succeed.
      const failed = all.filter((o) => !o.allowed)
      expect(failed.length).toBe(8)
      expect(new Set(failed.map((o) => o.error))).toEqual(new Set(['upstream 500']))
    } finally {
      server.close()
    }
  })
})
