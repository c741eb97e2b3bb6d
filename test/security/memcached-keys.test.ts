// Keys as an attacker sends them, through the real service on a real memcached: memcached's text
// protocol ends commands at CR LF and keys at a space, so a key that smuggled those through would
// be a second command (`flush_all`) or another item. The store speaks the binary protocol and
// hashes every key that is not short printable ASCII; these requests prove that nothing leaks: each
// attack key gets its own counter, nobody else's counter moves, nothing is flushed, and every item
// key stays printable with an expiry.
import { describe, expect, inject, it } from 'vitest'
import { openStore } from '../../packages/sluice-server/src/server/store-url.js'
import { dumpKeys } from '../helpers/memcached-text-protocol.js'
import { post, servicesClosedAfterEach } from '../helpers/service.js'

const startService = servicesClosedAfterEach()
const YAML = 'policies:\n  api: { algorithm: fixed-window, limit: 5, window: 1m }\n'

const ATTACKS = [
  'victim\r\nflush_all\r\n',
  'victim flush_all',
  'victim\r\ndelete sluice-sec:api._.x:victim\r\n',
  'victim\u0000',
  'victim ',
  '#victim',
  'v'.repeat(1000),
  'ключ\r\n',
  '"victim"',
]

describe('memcached: keys that try to be commands or other items', () => {
  it('each gets its own counter; the victim is untouched, nothing is flushed, every item key is safe', async () => {
    const { port } = inject('memcached')
    const prefix = `sec-${process.pid}-${Date.now()}`
    const store = await openStore(`memcached://127.0.0.1:${port}`, { prefix })
    const { url } = await startService(YAML, { store })
    const check = (key: string) => post(`${url}/v1/check`, { policy: 'api', key })
    for (let i = 0; i < 3; i++) expect((await check('victim')).body.allowed).toBe(true)
    for (const attack of ATTACKS) {
      const first = await check(attack)
      expect(first, JSON.stringify(attack)).toMatchObject({
        status: 200,
        body: { allowed: true, remaining: 4 },
      })
    }
    // The victim's counter is where it was (3 spent), not flushed, deleted or shared.
    expect((await check('victim')).body).toMatchObject({ allowed: true, remaining: 1 })
    const items = await dumpKeys(port, prefix)
    expect(items.length).toBe(ATTACKS.length + 1)
    for (const { key, exp } of items) {
      expect(key, 'printable ASCII, no space').toMatch(/^[!-~]{1,250}$/)
      expect(exp, key).toBeGreaterThan(0)
    }
  })
})
