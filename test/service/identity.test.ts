// Service identity: the limiter's policies carry the configured names (`api`, `api.pro`,
// `envoy:<composite key>`) and a storage id (`api._.<shape>`) the store keys on. Decisions, events
// and headers show the names with no rename step; the stored keys are built from the ids, and a
// reshaped policy gets a fresh id on reload.
import { createHash, randomBytes } from 'node:crypto'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, inject, it } from 'vitest'
import type { DecisionEvent } from '../../packages/sluice/src/limiter.js'
import { parseEnvoyConfig } from '../../packages/sluice-server/src/envoy/config.js'
import { parseConfig } from '../../packages/sluice-server/src/server/config.js'
import { createService } from '../../packages/sluice-server/src/server/service.js'
import { openStore } from '../../packages/sluice-server/src/server/store-url.js'
import { d, rlsClient } from '../helpers/envoy.js'
import type { Running } from '../helpers/service.js'
import { get, post, quietLogger, servicesClosedAfterEach } from '../helpers/service.js'

const CONFIG = `
policies:
  api:   { algorithm: fixed-window, limit: 3, window: 1m }
  login: { algorithm: sliding-window-log, limit: 2, window: 15m }
tiers:
  pro: { api: { limit: 10 } }
authz: { tierHeader: x-sluice-tier }
`
// The storage id: `<policy>.<tier or _>.<sha1(algorithm|windowMs)>`.
const shape = (algorithm: string, windowMs: number) =>
  createHash('sha1').update(`${algorithm}|${windowMs}`).digest('hex').slice(0, 6)
const API_ID = `api._.${shape('fixed-window', 60_000)}`
const API_PRO_ID = `api.pro.${shape('fixed-window', 60_000)}`
const LOGIN_ID = `login._.${shape('sliding-window-log', 900_000)}`

const start = servicesClosedAfterEach()

describe('the service names policies as configured', () => {
  it('service.subscribe events carry `api` and `api.pro`, as decided (no rename step)', async () => {
    const r = await start(CONFIG)
    const events: DecisionEvent[] = []
    r.service.subscribe((e) => events.push(e))
    await post(`${r.url}/v1/check`, { policy: 'api', key: 'k' })
    await post(`${r.url}/v1/check`, { policy: 'api', tier: 'pro', key: 'k' })
    await post(`${r.url}/v1/check`, {
      checks: [
        { policy: 'login', key: 'k' },
        { policy: 'api', key: 'k' },
      ],
    })
    expect(events.map((e) => e.decision.policy).slice(0, 2)).toEqual(['api', 'api.pro'])
    const layered = events[2]!.decision
    expect('results' in layered && layered.results.map((x) => x.policy)).toEqual(['login', 'api'])
    expect(['login', 'api']).toContain(layered.policy)
  })

  it('service.limiter answers to the configured names; its policies carry the ids', async () => {
    const r = await start(CONFIG)
    const limiter = r.service.limiter
    expect(Object.keys(limiter.policies).sort()).toEqual(['api', 'api.pro', 'login'])
    expect(limiter.policies.api!.id).toBe(API_ID)
    expect(limiter.policies['api.pro']!.id).toBe(API_PRO_ID)
    expect(limiter.policies.login!.id).toBe(LOGIN_ID)
    await post(`${r.url}/v1/check`, { policy: 'api', tier: 'pro', key: 'lim' })
    const d = await limiter.peek('api.pro', 'lim')
    expect(d).toMatchObject({ policy: 'api.pro', limit: 10, remaining: 9 })
  })

  it('/v1/authz headers and denial body name the limiter policy (`api.pro` for a tier)', async () => {
    const r = await start(CONFIG.replace('limit: 10', 'limit: 1'))
    const headers = { 'x-real-ip': '9.9.9.9', 'x-sluice-tier': 'pro' }
    const ok = await get(`${r.url}/v1/authz?policy=api`, headers)
    expect(ok.headers.get('ratelimit-policy')).toBe('"api.pro";q=1;w=60')
    const denied = await get(`${r.url}/v1/authz?policy=api`, headers)
    expect(denied.status).toBe(429)
    expect(denied.body).toMatchObject({ policy: 'api.pro' })
    const base = await get(`${r.url}/v1/authz?policy=api`, { 'x-real-ip': '9.9.9.9' })
    expect(base.headers.get('ratelimit-policy')).toBe('"api";q=3;w=60')
  })

  it('admin /v1/reset and /v1/block act on the configured policy, every tier', async () => {
    const r = await start(`${CONFIG}admin: { token: identity-admin-token }\n`)
    const admin = { authorization: 'Bearer identity-admin-token' }
    for (let i = 0; i < 3; i++) await post(`${r.url}/v1/check`, { policy: 'api', key: 'adm' })
    await post(`${r.url}/v1/check`, { policy: 'api', tier: 'pro', key: 'adm' })
    const reset = await post(`${r.url}/v1/reset`, { policy: 'api', key: 'adm' }, admin)
    expect(reset.body).toEqual({ ok: true, action: 'reset', policy: 'api', key: 'adm' })
    expect((await r.service.limiter.peek('api', 'adm')).remaining).toBe(3)
    expect((await r.service.limiter.peek('api.pro', 'adm')).remaining).toBe(10)
    await post(`${r.url}/v1/block`, { policy: 'api', key: 'adm', duration: '1m' }, admin)
    expect(await r.service.limiter.peek('api.pro', 'adm')).toMatchObject({
      allowed: false,
      reason: 'blocked',
    })
  })

  it('Envoy limits are limiter policies named `envoy:<composite key>` with a hashed id', async () => {
    const envoy = parseEnvoyConfig([
      {
        file: 'rules.yaml',
        text: 'domain: d\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 5 }\n',
      },
    ])
    expect(Object.keys(envoy.policies)).toEqual(['envoy:d.user'])
    const service = createService({
      config: parseConfig('policies:\n  api: { algorithm: fixed-window, limit: 1, window: 1m }\n', 't.yaml'),
      logger: quietLogger,
      envoy,
      grpc: { port: 0 },
    })
    const events: DecisionEvent[] = []
    service.subscribe((e) => events.push(e))
    await service.listen(0)
    const client = rlsClient(service.grpcAddress!.url)
    try {
      await client.shouldRateLimit({ domain: 'd', descriptors: [d(['user', 'a'])] })
      expect(events.map((e) => e.decision.policy)).toEqual(['envoy:d.user'])
      expect(service.limiter.policies['envoy:d.user']!.id).toMatch(/^envoy\.[0-9a-f]{6}\.[0-9a-f]{6}$/)
    } finally {
      client.close()
      await service.close(500)
    }
  })
})

describe('the store keys on the id (real Redis)', () => {
  let redis: Redis | undefined
  afterEach(() => redis?.disconnect())

  async function onRedis(yaml: string): Promise<{ r: Running; prefix: string }> {
    const prefix = `ident-${randomBytes(4).toString('hex')}`
    const store = await openStore(`${inject('redis').url}/0`, { prefix })
    return { r: await start(yaml, { store }), prefix }
  }

  it('keys are <policy>.<tier>.<hash of the algorithm and window>, so a reload that keeps them keeps the counters', async () => {
    const { r, prefix } = await onRedis(CONFIG)
    await post(`${r.url}/v1/check`, { policy: 'api', key: 'u1' })
    await post(`${r.url}/v1/check`, { policy: 'api', tier: 'pro', key: 'u1' })
    await post(`${r.url}/v1/check`, { policy: 'login', key: 'u1' })
    redis = new Redis({ host: '127.0.0.1', port: inject('redis').port })
    expect((await redis.keys(`${prefix}:*`)).sort()).toEqual(
      [`${prefix}:{u1}:${API_ID}`, `${prefix}:{u1}:${API_PRO_ID}`, `${prefix}:{u1}:${LOGIN_ID}`].sort(),
    )
  })

  it('a reload keeps the counters of unchanged policies and starts fresh ones for a reshaped one', async () => {
    const { r, prefix } = await onRedis(CONFIG)
    for (let i = 0; i < 2; i++) {
      await post(`${r.url}/v1/check`, { policy: 'api', key: 'u2' })
      await post(`${r.url}/v1/check`, { policy: 'api', tier: 'pro', key: 'u2' })
      await post(`${r.url}/v1/check`, { policy: 'login', key: 'u2' })
    }
    // api: a new limit (same shape, same id); login: a new window (a new id).
    const next = CONFIG.replace('limit: 3, window: 1m', 'limit: 5, window: 1m').replace('15m', '10m')
    r.service.reload(parseConfig(next, 'next.yaml'))
    expect(r.service.limiter.policies.api!.id).toBe(API_ID)
    const newLogin = `login._.${shape('sliding-window-log', 600_000)}`
    expect(r.service.limiter.policies.login!.id).toBe(newLogin)
    const peek = async (body: Record<string, string>) =>
      (await post(`${r.url}/v1/peek`, { ...body, key: 'u2' })).body
    expect(await peek({ policy: 'api' })).toMatchObject({ policy: 'api', limit: 5, remaining: 3 })
    expect(await peek({ policy: 'api', tier: 'pro' })).toMatchObject({ tier: 'pro', limit: 10, remaining: 8 })
    expect(await peek({ policy: 'login' })).toMatchObject({ policy: 'login', limit: 2, remaining: 2 })
    await post(`${r.url}/v1/check`, { policy: 'login', key: 'u2' })
    redis = new Redis({ host: '127.0.0.1', port: inject('redis').port })
    const keys = await redis.keys(`${prefix}:*`)
    expect(keys).toContain(`${prefix}:{u2}:${LOGIN_ID}`) // the old shape's counter, untouched
    expect(keys).toContain(`${prefix}:{u2}:${newLogin}`)
  })
})
