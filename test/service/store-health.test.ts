// Store health into metrics: the failover layer's view of a real redis-server (up, circuit state,
// errors) reaches sluice_store_up, sluice_circuit_state and sluice_store_errors_total when the
// server stops; and the hook itself, on a plain limiter.
import { spawn } from 'node:child_process'
import { Redis } from 'ioredis'
import { afterAll, describe, expect, it } from 'vitest'
import type { StoreHealthEvent } from '../../packages/sluice/src/failover/index.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { redisStore } from '../../packages/sluice/src/stores/redis/index.js'
import { openStore } from '../../packages/sluice-server/src/server/store-url.js'
import { sample } from '../helpers/exposition.js'
import { startRedis } from '../helpers/redis-harness.js'
import type { Running } from '../helpers/service.js'
import { get, post, startService } from '../helpers/service.js'

const CONFIG = `
prefix: health-test
policies:
  api:   { algorithm: token-bucket, limit: 1000, window: 1m }
  login: { algorithm: fixed-window, limit: 1000, window: 1m, onStoreError: closed }
`

async function until(what: string, test: () => Promise<boolean>, timeoutMs = 8000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await test())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 30))
  }
}

describe('store health in the service metrics (real redis-server)', () => {
  const running: Running[] = []
  afterAll(async () => {
    for (const r of running) await r.service.close(500)
  })

  it('store up, circuit closed, then down, errors counted and circuit open once the server stops', async () => {
    const server = await startRedis()
    const r = await startService(CONFIG, {
      store: await openStore(server.url, { prefix: 'health-test' }),
      observability: { flushMs: 50 },
    })
    running.push(r)
    const metrics = async () => (await fetch(`${r.url}/metrics`)).text()

    for (let i = 0; i < 3; i++)
      expect((await post(`${r.url}/v1/check`, { policy: 'api', key: 'k' })).body).toMatchObject({
        allowed: true,
      })
    let text = await metrics()
    expect(sample(text, 'sluice_store_up', { store: 'redis' })).toBe(1)
    expect(sample(text, 'sluice_circuit_state', { store: 'redis' })).toBe(0)
    expect(sample(text, 'sluice_store_errors_total', { store: 'redis' })).toBeUndefined()
    expect(sample(text, 'sluice_decisions_total', { policy: 'api', outcome: 'allowed' })).toBe(3)

    await server.stop()
    // Requests keep coming; the breaker opens after 5 failures spread over at least storeTimeout.
    await until('the circuit to open', async () => {
      await post(`${r.url}/v1/check`, { policy: 'api', key: 'k' })
      return sample(await metrics(), 'sluice_circuit_state', { store: 'redis' }) === 2
    })
    text = await metrics()
    expect(sample(text, 'sluice_store_up', { store: 'redis' })).toBe(0)
    expect(sample(text, 'sluice_store_errors_total', { store: 'redis' })).toBeGreaterThanOrEqual(5)
    expect(sample(text, 'sluice_decisions_total', { policy: 'api', outcome: 'degraded' })).toBeGreaterThan(0)

    // A closed policy now denies as store_unavailable; that is counted as degraded too.
    const denied = await post(`${r.url}/v1/check`, { policy: 'login', key: 'k' })
    expect(denied.body).toMatchObject({ allowed: false, reason: 'store_unavailable' })
    await new Promise((resolve) => setTimeout(resolve, 100))
    expect(sample(await metrics(), 'sluice_decisions_total', { policy: 'login', outcome: 'degraded' })).toBe(
      1,
    )

    const snapshot = (await get(`${r.url}/dashboard/snapshot.json`)).body as {
      stores: { store: string; up: boolean | null; circuit: string | null; errors: number }[]
    }
    const redis = snapshot.stores.find((s) => s.store === 'redis')
    expect(redis).toMatchObject({ up: false, circuit: 'open' })
    expect(redis!.errors).toBeGreaterThanOrEqual(5)
  })

  it('onStoreHealth on a limiter: state on the first call, errors and transitions after a stop', async () => {
    const server = await startRedis()
    const client = new Redis({ host: '127.0.0.1', port: server.port, maxRetriesPerRequest: 1 })
    client.on('error', () => {})
    const events: StoreHealthEvent[] = []
    let restarted: ReturnType<typeof spawn> | undefined
    const limiter = createLimiter({
      store: redisStore(client, { prefix: 'hook-test' }),
      policies: { api: { algorithm: 'gcra', limit: 100, window: '1s' } },
      storeTimeout: '50ms',
      breaker: { failures: 3, cooldown: '200ms' },
      logger: { warn() {} },
      onStoreHealth: (event) => events.push(event),
    })
    try {
      await limiter.consume('api', 'k')
      await limiter.consume('api', 'k')
      // One state event for the first call; none for the second (nothing changed).
      expect(events).toEqual([{ type: 'state', store: 'redis', up: true, circuit: 'closed' }])
      await server.stop()
      const deadline = Date.now() + 5000
      while (Date.now() < deadline && !events.some((e) => e.type === 'state' && e.circuit === 'open')) {
        await limiter.consume('api', 'k')
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
      const states = events.filter((e) => e.type === 'state').map((e) => `${e.up}/${e.circuit}`)
      expect(states.slice(0, 3)).toEqual(['true/closed', 'false/closed', 'false/open'])
      expect(events.filter((e) => e.type === 'error').length).toBeGreaterThanOrEqual(3)
      for (const e of events) if (e.type === 'error') expect(e.error.code).toMatch(/^SLUICE_STORE_/)
      // After the cool-down the next call is the half-open probe; it fails and the circuit reopens.
      await new Promise((resolve) => setTimeout(resolve, 250))
      await limiter.consume('api', 'k')
      const later = events.filter((e) => e.type === 'state').map((e) => e.type === 'state' && e.circuit)
      expect(later.slice(-2)).toEqual(['half-open', 'open'])

      // A redis-server on the same port again: the next probe succeeds, the store is up, circuit closed.
      restarted = spawn(
        'redis-server',
        ['--port', String(server.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
        { stdio: 'ignore' },
      )
      const back = Date.now() + 8000
      const last = () => events.filter((e) => e.type === 'state').at(-1)
      while (Date.now() < back && !(last()?.type === 'state' && (last() as { up: boolean }).up)) {
        await limiter.consume('api', 'k')
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      expect(last()).toEqual({ type: 'state', store: 'redis', up: true, circuit: 'closed' })
    } finally {
      client.disconnect()
      if (restarted !== undefined && restarted.exitCode === null) {
        const exited = new Promise((resolve) => restarted?.once('exit', resolve))
        restarted.kill('SIGKILL')
        await exited
      }
    }
  })
})
