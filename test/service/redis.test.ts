// The service on real Redis (the harness's redis-server): store URLs opened with ioredis, counters
// shared by two service instances, readiness when Redis goes away, and Redis Cluster.
import { Redis } from 'ioredis'
import { afterAll, describe, expect, inject, it } from 'vitest'
import { openStore } from '../../packages/sluice-server/src/server/store-url.js'
import { startRedis } from '../helpers/redis-harness.js'
import type { Running } from '../helpers/service.js'
import { get, post, startService } from '../helpers/service.js'

const CONFIG = 'prefix: svc-test\npolicies:\n  api: { algorithm: sliding-window-log, limit: 3, window: 1m }\n'

describe('the service on Redis', () => {
  const running: Running[] = []
  afterAll(async () => {
    for (const r of running) await r.service.close()
  })

  it('redis://: two instances share counters, keys carry the prefix and a TTL', async () => {
    const { url: redisUrl, port } = inject('redis')
    const prefix = `svc-${process.pid}-${Date.now()}`
    for (let i = 0; i < 2; i++) {
      const store = await openStore(`${redisUrl}/0`, { prefix })
      running.push(await startService(CONFIG, { store }))
    }
    const [a, b] = running as [Running, Running]
    const key = `user-${Date.now()}`
    const allowed = []
    for (let i = 0; i < 4; i++) {
      const target = i % 2 === 0 ? a : b
      allowed.push((await post(`${target.url}/v1/check`, { policy: 'api', key })).body.allowed)
    }
    expect(allowed).toEqual([true, true, true, false])
    expect(await get(`${a.url}/readyz`)).toMatchObject({
      status: 200,
      body: { ready: true, reachable: true, store: `${redisUrl}/0` },
    })

    const redis = new Redis({ host: '127.0.0.1', port })
    try {
      const keys = await redis.keys(`${prefix}:*`)
      expect(keys.length).toBeGreaterThan(0)
      expect(keys.some((k) => k.includes(key) && k.includes('api._.'))).toBe(true)
      for (const k of keys) expect(await redis.pttl(k)).toBeGreaterThan(0)
    } finally {
      redis.disconnect()
    }
  })

  it('when Redis goes away: open admits degraded and stays ready; closed denies and /readyz is 503', async () => {
    const server = await startRedis()
    const open = await startService(CONFIG, { store: await openStore(server.url, { prefix: 'gone' }) })
    running.push(open)
    const closedConfig = CONFIG.replace('window: 1m }', 'window: 1m, onStoreError: closed }')
    const closed = await startService(closedConfig, {
      store: await openStore(server.url, { prefix: 'gone2' }),
    })
    running.push(closed)
    for (const r of [open, closed]) {
      expect((await post(`${r.url}/v1/check`, { policy: 'api', key: 'k' })).body).toMatchObject({
        allowed: true,
      })
    }
    await server.stop()
    const admitted = await post(`${open.url}/v1/check`, { policy: 'api', key: 'k' })
    expect(admitted).toMatchObject({ status: 200, body: { allowed: true, degraded: true } })
    expect(await get(`${open.url}/readyz`)).toMatchObject({
      status: 200,
      body: { ready: true, reachable: false, serving: 'failure modes: open' },
    })
    const denied = await post(`${closed.url}/v1/check`, { policy: 'api', key: 'k' })
    expect(denied).toMatchObject({ status: 200, body: { allowed: false, reason: 'store_unavailable' } })
    expect(await get(`${closed.url}/readyz`)).toMatchObject({
      status: 503,
      body: { ready: false, reachable: false },
    })
  })

  it('refuses to start on a Redis that does not answer', async () => {
    const server = await startRedis()
    const url = server.url
    await server.stop()
    await expect(openStore(url, { prefix: 'x' })).rejects.toMatchObject({ code: 'SLUICE_STORE_ERROR' })
  })

  it('redis+cluster://: decisions on Redis Cluster', async () => {
    const { nodes } = inject('redisCluster')
    const url = `redis+cluster://${nodes.map((n) => `${n.host}:${n.port}`).join(',')}`
    const store = await openStore(url, { prefix: 'svc-cluster' })
    const r = await startService(CONFIG, { store })
    running.push(r)
    const key = `c-${Date.now()}`
    const results = []
    for (let i = 0; i < 4; i++)
      results.push((await post(`${r.url}/v1/check`, { policy: 'api', key })).body.allowed)
    expect(results).toEqual([true, true, true, false])
    const layered = await post(`${r.url}/v1/check`, {
      checks: [
        { policy: 'api', key: `${key}-other` },
        { policy: 'api', key },
      ],
    })
    expect(layered.body).toMatchObject({ allowed: false, deniedBy: 'api' })
    expect(await get(`${r.url}/readyz`)).toMatchObject({ status: 200, body: { store: url } })
  })
})
