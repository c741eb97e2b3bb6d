// A client must not choose its own tier or address. A real nginx runs the
// SHIPPED examples/nginx/sluice.conf (ports replaced) in front of the real service running the
// SHIPPED examples/sluice.yaml (api: token bucket, burst 20; enterprise: burst 2000), and the client
// sends the headers the service trusts.
import { readFileSync } from 'node:fs'
import type { Server } from 'node:http'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Writable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { pino } from 'pino'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { RunningNginx } from '../helpers/nginx-harness.js'
import { startShippedNginx } from '../helpers/nginx-harness.js'
import type { Running } from '../helpers/service.js'
import { freePort, get, post, servicesClosedAfterEach, startService } from '../helpers/service.js'

const EXAMPLE_YAML = readFileSync(
  fileURLToPath(new URL('../../packages/sluice-server/examples/sluice.yaml', import.meta.url)),
  'utf8',
)
// The shipped api policy: a burst of 20 by default, 2000 for enterprise.
const DEFAULT_BURST = 20

describe('the shipped nginx config in front of the shipped service config', () => {
  let sluice: Running
  let upstream: Server
  let nginx: RunningNginx | undefined
  let seen: Record<string, string | string[] | undefined>[] = []

  beforeAll(async () => {
    sluice = await startService(EXAMPLE_YAML)
    upstream = createServer((req, res) => {
      seen.push(req.headers)
      res.writeHead(200, { 'content-type': 'text/plain' }).end('upstream ok')
    })
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
    nginx = await startShippedNginx({
      sluice: Number(new URL(sluice.url).port),
      upstream: (upstream.address() as AddressInfo).port,
      nginx: await freePort(),
    })
  })

  beforeEach(async () => {
    seen = []
    for (const address of ['127.0.0.1', '1.2.3.4', '198.51.100.7'])
      for (const entry of sluice.service.config.entries.values())
        await sluice.service.limiter.reset(entry.displayName, `ip:${address}`)
  })

  afterAll(async () => {
    await nginx?.stop()
    await new Promise((resolve) => upstream?.close(resolve))
    await sluice?.service.close()
  })

  async function burst(n: number, headers: Record<string, string>) {
    const out: { status: number; headers: Headers }[] = []
    for (let i = 0; i < n; i++) {
      const res = await fetch(`http://127.0.0.1:${nginx!.port}/page`, { headers })
      await res.arrayBuffer()
      out.push({ status: res.status, headers: res.headers })
    }
    return out
  }

  it('X-Sluice-Tier: enterprise from the client gets the default budget, not enterprise', async () => {
    const started = Date.now()
    const results = await burst(2 * DEFAULT_BURST, { 'x-sluice-tier': 'enterprise' })
    const admitted = results.filter((r) => r.status === 200).length
    // The bucket refills 100/min (one token per 600 ms) while the burst runs; enterprise would
    // admit all 40.
    const refilled = Math.ceil((Date.now() - started) / 600)
    expect(admitted).toBeGreaterThanOrEqual(DEFAULT_BURST)
    expect(admitted).toBeLessThanOrEqual(DEFAULT_BURST + refilled)
    expect(results.filter((r) => r.status === 429).length).toBeGreaterThan(0)
    expect(results[0]!.headers.get('x-ratelimit-limit')).toBe(String(DEFAULT_BURST))
  })

  it('X-Sluice-Tier: nosuch from the client is the default tier, never a 500', async () => {
    const results = await burst(3, { 'x-sluice-tier': 'nosuch' })
    expect(results.map((r) => r.status)).toEqual([200, 200, 200])
    expect(results[0]!.headers.get('x-ratelimit-limit')).toBe(String(DEFAULT_BURST))
  })

  it('X-Real-IP, X-Forwarded-For and Forwarded spoofs: the key is nginx $remote_addr', async () => {
    await burst(3, {
      'x-real-ip': '1.2.3.4',
      'x-forwarded-for': '198.51.100.7',
      forwarded: 'for=198.51.100.7',
    })
    const peek = async (key: string) =>
      (await post(`${sluice.url}/v1/peek`, { policy: 'api', key })).body as { remaining: number }
    expect((await peek('ip:127.0.0.1')).remaining).toBeLessThanOrEqual(DEFAULT_BURST - 3)
    expect((await peek('ip:1.2.3.4')).remaining).toBe(DEFAULT_BURST)
    expect((await peek('ip:198.51.100.7')).remaining).toBe(DEFAULT_BURST)
  })

  it('RateLimit and RateLimit-Policy reach the client on 200 and on 429', async () => {
    const results = await burst(2 * DEFAULT_BURST, {})
    const ok = results[0]!
    const denied = results.find((r) => r.status === 429)
    expect(ok.status).toBe(200)
    expect(denied).toBeDefined()
    for (const r of [ok, denied!]) {
      expect(r.headers.get('ratelimit-policy')).toMatch(/^"api";q=\d+;w=\d+/)
      expect(r.headers.get('ratelimit')).toMatch(/^"api";r=\d+;t=\d+$/)
    }
    expect(denied!.headers.get('ratelimit')).toMatch(/^"api";r=0;/)
  })
})

describe('/v1/authz without nginx: tier and identity headers', () => {
  const service = servicesClosedAfterEach()
  const TIERS =
    'policies:\n  api: { algorithm: fixed-window, limit: 2, window: 1m }\n' +
    'tiers:\n  pro: { api: { limit: 50 } }\n'

  it('an unknown tier in the tier header falls back to the default tier (logged), not an error', async () => {
    const lines: string[] = []
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(chunk.toString())
        done()
      },
    })
    const r = await service(`${TIERS}authz: { tierHeader: x-sluice-tier }\n`, {
      logger: pino({ level: 'info' }, sink),
    })
    const res = await get(`${r.url}/v1/authz?policy=api`, { 'x-sluice-tier': 'nosuch' })
    expect(res.status).toBe(200)
    expect(res.headers.get('x-ratelimit-limit')).toBe('2')
    const logged = lines.map((line) => JSON.parse(line) as Record<string, unknown>)
    expect(logged).toContainEqual(
      expect.objectContaining({
        tier: 'nosuch',
        msg: 'unknown tier in x-sluice-tier; using the default tier',
      }),
    )
    // A known tier from a trusted peer (loopback, the default) still applies.
    const pro = await get(`${r.url}/v1/authz?policy=api`, { 'x-sluice-tier': 'pro' })
    expect(pro.headers.get('x-ratelimit-limit')).toBe('50')
  })

  it('tier and key headers are read only from authz.trustedPeers', async () => {
    // The test's requests come from 127.0.0.1, which this config does not trust.
    const r = await service(
      `${TIERS}authz: { tierHeader: x-sluice-tier, keyHeader: x-api-key, trustedPeers: [10.0.0.0/8] }\n`,
    )
    const statuses: number[] = []
    for (let i = 0; i < 3; i++) {
      const res = await get(`${r.url}/v1/authz?policy=api`, {
        'x-sluice-tier': 'pro',
        'x-api-key': `key-${i}`,
      })
      expect(res.headers.get('x-ratelimit-limit')).toBe('2')
      statuses.push(res.status)
    }
    // Neither header was believed: one budget, the peer's address.
    expect(statuses).toEqual([200, 200, 429])
    expect((await post(`${r.url}/v1/peek`, { policy: 'api', key: 'ip:127.0.0.1' })).body).toMatchObject({
      allowed: false,
    })
  })

  it('refuses a bad authz.trustedPeers with file, line and path', async () => {
    const { parseConfig } = await import('../../packages/sluice-server/src/server/config.js')
    expect(() => parseConfig(`${TIERS}authz:\n  trustedPeers: [nowhere]\n`, 'bad.yaml')).toThrow(
      /bad\.yaml:6: authz\.trustedPeers: "nowhere" is not an address/,
    )
  })
})
