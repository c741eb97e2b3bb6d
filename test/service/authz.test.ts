// GET /v1/authz: the client address under the HTTP core's rules (trusted proxies, forwarding header,
// IPv6 grouping), and what it answers when the store fails (503 by default, 429 when configured).
import { describe, expect, it } from 'vitest'
import { forwardStore } from '../../packages/sluice/src/store.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { parseConfig } from '../../packages/sluice-server/src/server/config.js'
import { openStore } from '../../packages/sluice-server/src/server/store-url.js'
import { startRedis } from '../helpers/redis-harness.js'
import type { Running } from '../helpers/service.js'
import { get, post, servicesClosedAfterEach } from '../helpers/service.js'

const POLICY = 'policies:\n  api: { algorithm: fixed-window, limit: 2, window: 1m }\n'

const service = servicesClosedAfterEach()

/** Status of three authz calls with these headers: [200, 200, 429] when they share one key. */
async function three(r: Running, headers: Record<string, string>): Promise<number[]> {
  const out = []
  for (let i = 0; i < 3; i++) out.push((await get(`${r.url}/v1/authz?policy=api`, headers)).status)
  return out
}

describe('/v1/authz: who is asking', () => {
  it('default: X-Real-IP from a loopback proxy; X-Forwarded-For is not read', async () => {
    const r = await service(POLICY)
    expect(await three(r, { 'x-real-ip': '203.0.113.7' })).toEqual([200, 200, 429])
    expect(await three(r, { 'x-real-ip': '203.0.113.8' })).toEqual([200, 200, 429])
    // A spoofed X-Forwarded-For changes nothing: the key is the socket's 127.0.0.1 each time.
    expect((await get(`${r.url}/v1/authz?policy=api`, { 'x-forwarded-for': '198.51.100.1' })).status).toBe(
      200,
    )
    expect((await get(`${r.url}/v1/authz?policy=api`, { 'x-forwarded-for': '198.51.100.2' })).status).toBe(
      200,
    )
    expect((await get(`${r.url}/v1/authz?policy=api`, { 'x-forwarded-for': '198.51.100.3' })).status).toBe(
      429,
    )
    // The key is the HTTP core's name for the address, so /v1/check callers sending it share the budget.
    expect((await post(`${r.url}/v1/peek`, { policy: 'api', key: 'ip:203.0.113.7' })).body).toMatchObject({
      allowed: false,
    })
  })

  it('names the address as the HTTP core does (ip:...): one key in the store, top keys and abuse tables', async () => {
    const r = await service(`${POLICY}  per-user: { algorithm: fixed-window, limit: 100, window: 1m }\n`, {
      observability: { flushMs: 50, pushIntervalMs: 100 },
    })
    expect(await three(r, { 'x-real-ip': '203.0.113.7' })).toEqual([200, 200, 429])
    // Layered /v1/check calls naming the same client the HTTP core's way spend the same budget.
    for (const user of ['user:a', 'user:b']) {
      const res = await post(`${r.url}/v1/check`, {
        checks: [
          { policy: 'api', key: 'ip:203.0.113.7' },
          { policy: 'per-user', key: user },
        ],
      })
      expect(res.body).toMatchObject({ allowed: false, deniedBy: 'api' })
    }
    const snapshot = (await get(`${r.url}/dashboard/snapshot.json`)).body as {
      topDenied: { policy: string; keys: { key: string; count: number }[] }[]
      abuse: { identitiesPerAddress: { key: string; distinct: number }[] }
    }
    const denied = snapshot.topDenied.find((t) => t.policy === 'api')!.keys
    expect(denied.map((k) => [k.key, k.count])).toEqual([['ip:203.0.113.7', 3]])
    expect(snapshot.abuse.identitiesPerAddress.map((e) => [e.key, e.distinct])).toEqual([
      ['ip:203.0.113.7', 2],
    ])
  })

  it('a peer that is not a trusted proxy cannot choose its key', async () => {
    for (const trust of ['false', '[10.0.0.0/8]', '[]']) {
      const r = await service(`${POLICY}authz: { trustProxy: ${trust} }\n`)
      // Every call comes from 127.0.0.1, which is not trusted: a new X-Real-IP each time is ignored.
      const statuses = []
      for (let i = 0; i < 3; i++)
        statuses.push((await get(`${r.url}/v1/authz?policy=api`, { 'x-real-ip': `203.0.113.${i}` })).status)
      expect(statuses, `trustProxy: ${trust}`).toEqual([200, 200, 429])
    }
  })

  it('X-Forwarded-For: walks trusted hops from the nearest, by list or by hop count', async () => {
    const byList = await service(
      `${POLICY}authz: { proxyHeader: x-forwarded-for, trustProxy: [loopback, 198.51.100.0/24] }\n`,
    )
    // The client-supplied first entry counts only through trusted hops: 203.0.113.7 is the client.
    expect(await three(byList, { 'x-forwarded-for': '203.0.113.7, 198.51.100.1' })).toEqual([200, 200, 429])
    expect(
      (await get(`${byList.url}/v1/authz?policy=api`, { 'x-forwarded-for': '203.0.113.7' })).status,
    ).toBe(429)
    // A forged entry before an untrusted hop is not reached: 192.0.2.1 is the client.
    expect(
      (await get(`${byList.url}/v1/authz?policy=api`, { 'x-forwarded-for': '203.0.113.7, 192.0.2.1' }))
        .status,
    ).toBe(200)

    const byHops = await service(`${POLICY}authz: { proxyHeader: x-forwarded-for, trustProxy: 1 }\n`)
    // One hop: the last entry is the client, whatever precedes it.
    expect(
      await three(byHops, { 'x-forwarded-for': `192.0.2.${Math.floor(Math.random() * 200)}, 198.51.100.9` }),
    ).toEqual([200, 200, 429])
  })

  it('groups IPv6 clients by authz.ipv6Prefix (default /64)', async () => {
    const r = await service(POLICY)
    expect((await get(`${r.url}/v1/authz?policy=api`, { 'x-real-ip': '2001:db8:1:2::1' })).status).toBe(200)
    expect((await get(`${r.url}/v1/authz?policy=api`, { 'x-real-ip': '2001:db8:1:2:ffff::9' })).status).toBe(
      200,
    )
    expect((await get(`${r.url}/v1/authz?policy=api`, { 'x-real-ip': '2001:db8:1:2::abcd' })).status).toBe(
      429,
    )
    expect((await get(`${r.url}/v1/authz?policy=api`, { 'x-real-ip': '2001:db8:1:3::1' })).status).toBe(200)
    expect(
      (await post(`${r.url}/v1/peek`, { policy: 'api', key: 'ip:2001:db8:1:2::/64' })).body,
    ).toMatchObject({
      allowed: false,
    })

    const wide = await service(`${POLICY}authz: { ipv6Prefix: 48 }\n`)
    expect(await three(wide, { 'x-real-ip': '2001:db8:1:2::1' }).then((s) => s.slice(0, 1))).toEqual([200])
    expect((await get(`${wide.url}/v1/authz?policy=api`, { 'x-real-ip': '2001:db8:1:3::1' })).status).toBe(
      429,
    )
  })

  it('refuses bad authz settings with file, line and path', () => {
    expect(() => parseConfig(`${POLICY}authz:\n  trustProxy: [nowhere]\n`, 'bad.yaml')).toThrow(
      /bad\.yaml:4: authz\.trustProxy: "nowhere" is not an address/,
    )
    expect(() => parseConfig(`${POLICY}authz:\n  proxyHeader: x-client\n`, 'bad.yaml')).toThrow(
      /bad\.yaml:4: authz\.proxyHeader: must be x-real-ip, x-forwarded-for or forwarded/,
    )
    expect(() => parseConfig(`${POLICY}authz:\n  storeUnavailableStatus: 500\n`, 'bad.yaml')).toThrow(
      /authz\.storeUnavailableStatus: must be 503 or 429/,
    )
  })
})

describe('/v1/authz when the store fails (real redis-server, stopped)', () => {
  it('a closed policy answers 503 with Retry-After (429 when configured); an open one passes', async () => {
    const server = await startRedis()
    const yaml = (extra: string) =>
      'policies:\n' +
      '  strict: { algorithm: fixed-window, limit: 100, window: 1m, onStoreError: closed }\n' +
      '  lenient: { algorithm: fixed-window, limit: 100, window: 1m }\n' +
      extra
    const r503 = await service(yaml(''), { store: await openStore(server.url, { prefix: 'authz-a' }) })
    const r429 = await service(yaml('authz: { storeUnavailableStatus: 429 }\n'), {
      store: await openStore(server.url, { prefix: 'authz-b' }),
    })
    for (const r of [r503, r429]) expect((await get(`${r.url}/v1/authz?policy=strict`)).status).toBe(200)
    await server.stop()

    for (const [r, status] of [
      [r503, 503],
      [r429, 429],
    ] as const) {
      const denied = await get(`${r.url}/v1/authz?policy=strict`)
      expect(denied.status).toBe(status)
      expect(Number(denied.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
      expect(denied.body).toMatchObject({ error: 'store_unavailable', policy: 'strict' })
      // Fail-open: degraded but admitted.
      expect(await get(`${r.url}/v1/authz?policy=lenient`)).toMatchObject({
        status: 200,
        body: { allowed: true },
      })
    }
  })
})

describe('/v1/authz during a reload', () => {
  it('answers with the headers of the config it checked under when a reload drops its policy meanwhile', async () => {
    // A store that holds each decision until released, so a reload lands between check and answer.
    const inner = memoryStore()
    const waiting: (() => void)[] = []
    const held = forwardStore(inner, {
      name: 'held',
      inProcess: false,
      async apply(steps, mode) {
        await new Promise<void>((release) => waiting.push(release))
        return inner.apply(steps, mode)
      },
    })
    const r = await service(POLICY, {
      store: { store: held, description: 'held', ping: async () => {} },
    })
    const answer = get(`${r.url}/v1/authz?policy=api`)
    for (let i = 0; i < 200 && waiting.length === 0; i++) await new Promise((done) => setTimeout(done, 10))
    expect(waiting).toHaveLength(1)
    r.service.reload(
      parseConfig('policies:\n  other: { algorithm: gcra, limit: 5, window: 1s }\n', 'next.yaml'),
    )
    waiting.shift()!()
    const res = await answer
    expect(res.status).toBe(200)
    expect(res.headers.get('ratelimit-policy')).toBe('"api";q=2;w=60')
    expect(res.headers.get('x-ratelimit-limit')).toBe('2')
  })
})
