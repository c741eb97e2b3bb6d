// Allow and deny lists in the service's YAML: /v1/check and /v1/authz answer a denied key or address
// without a store call (authz: 403), an allowed one is not limited, a reload replaces the lists,
// and a bad list is a config error naming its line.
import { readFileSync } from 'node:fs'
import { describe, expect, inject, it } from 'vitest'
import { forwardStore, type Step } from '../../packages/sluice/src/store.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { parseConfig } from '../../packages/sluice-server/src/server/config.js'
import { openStore, type StoreHandle } from '../../packages/sluice-server/src/server/store-url.js'
import { get, post, servicesClosedAfterEach } from '../helpers/service.js'

const service = servicesClosedAfterEach()

const CONFIG = `policies:
  api:
    algorithm: fixed-window
    limit: 2
    window: 1m
    deny:
      keys: [mallory]
      ips: [203.0.113.0/24, "2001:db8:bad::/48"]
    allow:
      keys: [ci-runner]
      ips: [10.0.0.0/8]
`

/** A memory store handle whose apply calls are recorded: what reaches the store. */
function countedMemory() {
  const seen: Step[] = []
  const memory = memoryStore()
  const store = forwardStore(memory, {
    apply(steps, mode) {
      seen.push(...steps)
      return memory.apply(steps, mode)
    },
  })
  const handle: StoreHandle = { store, description: 'memory', ping: async () => {} }
  return { seen, handle }
}

describe('allow and deny lists in the service', () => {
  it('/v1/check: a denied key or address is refused without a store call; an allowed one is not limited', async () => {
    const { seen, handle } = countedMemory()
    const r = await service(CONFIG, { store: handle })
    for (const key of ['mallory', 'ip:203.0.113.9', 'ip:2001:db8:bad:1::/64']) {
      const res = await post(`${r.url}/v1/check`, { policy: 'api', key })
      expect(res.status).toBe(200)
      expect(res.body).toMatchObject({ allowed: false, reason: 'denied', listed: 'deny', policy: 'api' })
    }
    for (let i = 0; i < 4; i++)
      expect((await post(`${r.url}/v1/check`, { policy: 'api', key: 'ci-runner' })).body).toMatchObject({
        allowed: true,
        listed: 'allow',
        remaining: 2,
      })
    expect(seen).toEqual([])
    const layered = await post(`${r.url}/v1/check`, {
      checks: [
        { policy: 'api', key: 'someone' },
        { policy: 'api', key: 'mallory' },
      ],
    })
    expect(layered.body).toMatchObject({ allowed: false, deniedBy: 'api', reason: 'denied' })
    expect(seen).toEqual([])
  })

  it('/v1/authz: 403 for a denied client address, no limit for an allowed one', async () => {
    const r = await service(CONFIG)
    const denied = await get(`${r.url}/v1/authz?policy=api`, { 'x-real-ip': '203.0.113.7' })
    expect(denied.status).toBe(403)
    expect(denied.body).toMatchObject({ error: 'forbidden', policy: 'api' })
    expect(denied.headers.get('retry-after')).toBeNull()
    const statuses: number[] = []
    for (let i = 0; i < 4; i++)
      statuses.push((await get(`${r.url}/v1/authz?policy=api`, { 'x-real-ip': '10.9.8.7' })).status)
    expect(statuses).toEqual([200, 200, 200, 200])
    const other: number[] = []
    for (let i = 0; i < 3; i++)
      other.push((await get(`${r.url}/v1/authz?policy=api`, { 'x-real-ip': '198.51.100.1' })).status)
    expect(other).toEqual([200, 200, 429])
  })

  it('a reload replaces the lists of the YAML', async () => {
    const r = await service(CONFIG)
    const check = async (key: string) => (await post(`${r.url}/v1/check`, { policy: 'api', key })).body
    expect(await check('mallory')).toMatchObject({ allowed: false, reason: 'denied' })
    r.service.reload(parseConfig(CONFIG.replace('keys: [mallory]', 'keys: [eve]'), 'next.yaml'))
    expect(await check('mallory')).toMatchObject({ allowed: true, remaining: 1 })
    expect(await check('eve')).toMatchObject({ allowed: false, reason: 'denied' })
    r.service.reload(
      parseConfig('policies:\n  api: { algorithm: fixed-window, limit: 2, window: 1m }\n', 'bare'),
    )
    expect(await check('eve')).toMatchObject({ allowed: true })
    expect((await check('ci-runner')).listed).toBeUndefined()
  })

  it('on Redis: the lists decide before the store', async () => {
    const { url } = inject('redis')
    const r = await service(CONFIG, {
      store: await openStore(`${url}/0`, { prefix: `lists-${process.pid}-${Date.now()}` }),
    })
    expect((await post(`${r.url}/v1/check`, { policy: 'api', key: 'ip:203.0.113.1' })).body).toMatchObject({
      allowed: false,
      reason: 'denied',
    })
    expect((await post(`${r.url}/v1/check`, { policy: 'api', key: 'u' })).body).toMatchObject({
      allowed: true,
      remaining: 1,
    })
  })

  it.each([
    ['a bad CIDR', 'ips: [10.0.0.0/33]', 'policies.api.deny.ips[0]'],
    ['an empty key', "keys: ['']", 'policies.api.deny.keys[0]'],
    ['an unknown key', 'ip: [10.0.0.1]', "did you mean 'ips'"],
  ])('refuses %s as a config error naming the line', (_, line, named) => {
    const yaml = `policies:\n  api:\n    algorithm: fixed-window\n    limit: 2\n    window: 1m\n    deny:\n      ${line}\n`
    expect(() => parseConfig(yaml, 'bad.yaml')).toThrow(
      expect.objectContaining({
        code: 'SLUICE_INVALID_CONFIG',
        message: expect.stringMatching(new RegExp(`bad\\.yaml:6.*${named.replace(/[.[\]]/g, '\\$&')}`)),
      }),
    )
  })

  it("loads docs/service.md's example", async () => {
    const doc = readFileSync(new URL('../../docs/service.md', import.meta.url), 'utf8')
    const from = doc.indexOf('### Allow and deny lists')
    const yaml = /```yaml\n([\s\S]*?)```/.exec(doc.slice(from))![1]!
    const r = await service(yaml)
    expect((await post(`${r.url}/v1/check`, { policy: 'api', key: 'user-666' })).body).toMatchObject({
      allowed: false,
      reason: 'denied',
    })
    expect((await post(`${r.url}/v1/check`, { policy: 'api', key: 'ip:10.1.1.1' })).body).toMatchObject({
      listed: 'allow',
    })
  })

  it("the dashboard shows the lists in force, and a reload's", async () => {
    const r = await service(CONFIG)
    const lists = async () => (await get(`${r.url}/dashboard/snapshot.json`)).body.lists
    expect(await lists()).toEqual([
      {
        policy: 'api',
        deny: { keys: 1, ips: 2, shown: { keys: ['mallory'], ips: ['203.0.113.0/24', '2001:db8:bad::/48'] } },
        allow: { keys: 1, ips: 1, shown: { keys: ['ci-runner'], ips: ['10.0.0.0/8'] } },
      },
    ])
    r.service.reload(
      parseConfig('policies:\n  api: { algorithm: fixed-window, limit: 2, window: 1m }\n', 'bare'),
    )
    expect(await lists()).toEqual([])
  })
})
