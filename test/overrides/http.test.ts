// Per-key overrides through the HTTP middleware of every adapter (real servers): the rule's key gets
// the override's limit in the decision and the headers, an unlimited key is never refused, a
// blocked one is refused with 429 at once.
import { afterEach, describe, expect, it } from 'vitest'
import { createHttpLimiter } from '../../packages/sluice/src/http/index.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { adapters, call, type Running } from '../http/servers.js'

const policies = { api: { algorithm: 'fixed-window', limit: 1, window: '1m' } } as const

for (const adapter of adapters) {
  describe(`overrides through ${adapter.name}`, () => {
    let running: Running | undefined
    afterEach(async () => {
      await running?.close()
      running = undefined
    })

    it('a raised limit, unlimited and blocked apply to the rule key', async () => {
      const limiter = createLimiter({ policies })
      const http = createHttpLimiter({
        limiter,
        rules: [{ policy: 'api', key: (req) => req.header('x-user') ?? 'anon' }],
      })
      running = await adapter.start(http, { port: 0 })
      const as = (user: string) => call(running!.target, '/hello', { headers: { 'x-user': user } })
      // A key function's value is keyed as `fn:<value>` (docs/http.md): the override names that key.
      await limiter.setOverride('api', 'fn:raised', { limit: 3 })
      await limiter.setOverride('api', 'fn:free', { unlimited: true })
      await limiter.setOverride('api', 'fn:banned', { blocked: true, ttl: '30s' })
      const raised = [await as('raised'), await as('raised'), await as('raised'), await as('raised')]
      expect(raised.map((r) => r.status)).toEqual([200, 200, 200, 429])
      expect(raised[0]!.headers['ratelimit-policy']).toBe('"api";q=3')
      for (let i = 0; i < 5; i++) expect((await as('free')).status).toBe(200)
      const banned = await as('banned')
      expect(banned.status).toBe(429)
      expect(Number(banned.headers['retry-after'])).toBe(30)
      expect((await as('plain')).status).toBe(200)
      expect((await as('plain')).status).toBe(429)
    })
  })
}
