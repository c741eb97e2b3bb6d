// Allow and deny lists through every adapter on a real listening server: a rule's deny list answers
// 403 (by client IP or by the rule's key) without a store call, its allow list skips that layer
// only, and a policy's own lists answer the same way through the middleware.
import { afterEach, describe, expect, it } from 'vitest'
import { createHttpLimiter, type HttpLimiterOptions } from '../../packages/sluice/src/http/index.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { forwardStore, type Step } from '../../packages/sluice/src/store.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { adapters, call, type Running } from './servers.js'

const policies = {
  perIp: { algorithm: 'fixed-window', limit: 2, window: '1m' },
  perUser: { algorithm: 'fixed-window', limit: 2, window: '1m' },
  listed: {
    algorithm: 'fixed-window',
    limit: 1,
    window: '1m',
    deny: { ips: ['198.51.100.0/24'] },
    allow: { ips: ['192.0.2.1'] },
  },
} as const

const user = (r: { header(name: string): string | undefined }) => r.header('x-user')
const from = (ip: string, more: Record<string, string> = {}) => ({
  headers: { 'x-forwarded-for': ip, ...more },
})

for (const adapter of adapters) {
  describe(`allow and deny lists: ${adapter.name}`, () => {
    let running: Running | undefined
    afterEach(async () => {
      await running?.close()
      running = undefined
    })

    async function start(options: Omit<HttpLimiterOptions, 'limiter'>) {
      const seen: Step[] = []
      const memory = memoryStore()
      const store = forwardStore(memory, {
        apply(steps, mode) {
          seen.push(...steps)
          return memory.apply(steps, mode)
        },
      })
      const limiter = createLimiter({ store, policies })
      running = await adapter.start(createHttpLimiter({ limiter, trustProxy: ['loopback'], ...options }), {
        port: 0,
      })
      const target = running.target
      const get = (path: string, init: { headers?: Record<string, string> } = {}) => call(target, path, init)
      return { get, seen }
    }

    it("a rule's deny list answers 403 by client IP (v4 and v6) and by key, without a store call", async () => {
      const { get, seen } = await start({
        rules: [
          { policy: 'perIp', key: 'ip', deny: { ips: ['203.0.113.0/24', '2001:db8:bad::/48'] } },
          { policy: 'perUser', key: 'user', deny: { keys: ['user:mallory'] } },
        ],
        user,
      })
      for (const init of [
        from('203.0.113.9'),
        from('2001:db8:bad:0:1::5'),
        from('::ffff:203.0.113.200'),
        from('192.0.2.50', { 'x-user': 'mallory' }),
      ]) {
        const r = await get('/hello', init)
        expect(r.status).toBe(403)
        expect(JSON.parse(r.body)).toEqual({
          error: 'forbidden',
          message: 'This client is not allowed to call this API.',
        })
        expect(r.headers['retry-after']).toBeUndefined()
      }
      expect(running?.handled()).toBe(0)
      expect(seen).toEqual([])
      // Not listed: limited as usual.
      expect((await get('/hello', from('192.0.2.50', { 'x-user': 'alice' }))).status).toBe(200)
      expect(seen.length).toBe(2)
    })

    it("a rule's allow list skips that layer only; the other layers still limit", async () => {
      const { get, seen } = await start({
        rules: [
          { policy: 'perIp', key: 'ip', allow: { ips: ['10.0.0.0/8'] } },
          { policy: 'perUser', key: 'user' },
        ],
        user,
      })
      const statuses: number[] = []
      for (let i = 0; i < 4; i++) statuses.push((await get('/hello', from('10.1.2.3'))).status)
      // Anonymous from an allowed address: no layer applies, never limited.
      expect(statuses).toEqual([200, 200, 200, 200])
      expect(seen).toEqual([])
      const withUser: number[] = []
      for (let i = 0; i < 3; i++)
        withUser.push((await get('/hello', from('10.1.2.3', { 'x-user': 'a' }))).status)
      expect(withUser).toEqual([200, 200, 429])
      expect(seen.every((s) => s.policy.name === 'perUser')).toBe(true)
      // Another address: the IP layer limits.
      const other: number[] = []
      for (let i = 0; i < 3; i++) other.push((await get('/hello', from('192.0.2.7'))).status)
      expect(other).toEqual([200, 200, 429])
    })

    it("a policy's own lists answer through the middleware: 403 for a denied IP, no limit for an allowed one", async () => {
      const { get, seen } = await start({ rules: [{ policy: 'listed', key: 'ip' }] })
      const denied = await get('/hello', from('198.51.100.4'))
      expect(denied.status).toBe(403)
      expect(JSON.parse(denied.body)).toMatchObject({ error: 'forbidden' })
      for (let i = 0; i < 3; i++) expect((await get('/hello', from('192.0.2.1'))).status).toBe(200)
      expect(seen).toEqual([])
      expect((await get('/hello', from('192.0.2.2'))).status).toBe(200)
      expect((await get('/hello', from('192.0.2.2'))).status).toBe(429)
    })

    it('in shadow mode a denied client passes, logged', async () => {
      const warned: string[] = []
      const { get } = await start({
        rules: [{ policy: 'perIp', key: 'ip', deny: { ips: ['203.0.113.0/24'] } }],
        shadow: true,
        logger: { warn: (_, message) => warned.push(message), error: () => {} },
      })
      expect((await get('/hello', from('203.0.113.9'))).status).toBe(200)
      expect(warned).toEqual(['sluice: shadow mode would refuse a denied client'])
    })
  })
}

describe('rule list options', () => {
  const limiter = createLimiter({ policies })
  it.each([
    [{ deny: { ips: ['10.0.0.0/33'] } }, 'rules[0].deny.ips[0]'],
    [{ allow: { keys: [''] } }, 'rules[0].allow.keys[0]'],
    [{ allow: { key: ['a'] } }, "did you mean 'keys'"],
    [{ deny: 'x' }, 'rules[0].deny'],
  ])('refuses %j with SLUICE_INVALID_LIST', (lists, named) => {
    expect(() =>
      createHttpLimiter({ limiter, rules: [{ policy: 'perIp', key: 'ip', ...(lists as object) }] }),
    ).toThrow(
      expect.objectContaining({ code: 'SLUICE_INVALID_LIST', message: expect.stringContaining(named) }),
    )
  })
})
