// The service's /metrics and /dashboard, over real sockets: decisions through /v1/check move
// sluice_decisions_total and the dashboard snapshot, and a reload (a new limiter) keeps them.
import { request } from 'node:http'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { parseConfig } from '../../packages/sluice-server/src/server/config.js'
import { sample } from '../helpers/exposition.js'
import type { Running } from '../helpers/service.js'
import { get, post, startService } from '../helpers/service.js'

const CONFIG = `
policies:
  api:   { algorithm: fixed-window, limit: 3, window: 1m }
  login: { algorithm: sliding-window-log, limit: 2, window: 15m }
tiers:
  pro: { api: { limit: 10 } }
`

interface Snapshot {
  policies: { policy: string; totals: { allowed: number; denied: number; degraded: number } }[]
  topDenied: { policy: string; keys: { key: string; count: number }[] }[]
  stores: { store: string; up: boolean | null; samples: number }[]
}

let running: Running
beforeEach(async () => {
  running = await startService(CONFIG, { observability: { flushMs: 50, pushIntervalMs: 100 } })
})
afterEach(async () => {
  await running.service.close()
})
const at = (path: string) => `${running.url}${path}`

async function metrics(): Promise<string> {
  const res = await fetch(at('/metrics'))
  expect(res.status).toBe(200)
  return res.text()
}

async function snapshot(): Promise<Snapshot> {
  const res = await get(at('/dashboard/snapshot.json'))
  expect(res.status).toBe(200)
  return res.body as unknown as Snapshot
}

const totalsOf = (snap: Snapshot, policy: string) => snap.policies.find((p) => p.policy === policy)?.totals

describe('the service serves metrics and the dashboard', () => {
  it('counts decisions from /v1/check under configured policy names', async () => {
    const before = await metrics()
    expect(sample(before, 'sluice_decisions_total', { policy: 'api', outcome: 'allowed' })).toBeUndefined()
    for (let i = 0; i < 5; i++) await post(at('/v1/check'), { policy: 'api', key: 'user-1' })
    await post(at('/v1/check'), { policy: 'api', key: 'user-2', tier: 'pro' })
    await post(at('/v1/peek'), { policy: 'api', key: 'user-1' })

    const text = await metrics()
    expect(sample(text, 'sluice_decisions_total', { policy: 'api', outcome: 'allowed' })).toBe(3)
    expect(sample(text, 'sluice_decisions_total', { policy: 'api', outcome: 'denied' })).toBe(2)
    expect(sample(text, 'sluice_decisions_total', { policy: 'api.pro', outcome: 'allowed' })).toBe(1)
    expect(text).not.toMatch(/policy="api\._\./)
    // The peek is timed, not counted.
    expect(sample(text, 'sluice_store_duration_seconds_count', { store: 'memory', operation: 'peek' })).toBe(
      1,
    )
    expect(sample(text, 'sluice_store_up', { store: 'memory' })).toBe(1)

    const snap = await snapshot()
    expect(totalsOf(snap, 'api')).toEqual({ allowed: 3, denied: 2, degraded: 0 })
    expect(totalsOf(snap, 'api.pro')).toEqual({ allowed: 1, denied: 0, degraded: 0 })
    const deniedApi = snap.topDenied.find((t) => t.policy === 'api')
    expect(deniedApi?.keys[0]).toMatchObject({ key: 'user-1', count: 2 })
    expect(snap.stores.find((s) => s.store === 'memory')).toMatchObject({ up: true })
  })

  it('keeps counting across a reload (a new limiter over the same store)', async () => {
    for (let i = 0; i < 4; i++) await post(at('/v1/check'), { policy: 'api', key: 'r' })
    running.service.reload(parseConfig(CONFIG.replace('limit: 3,', 'limit: 6,'), 'reloaded.yaml'))
    // The counter survived (same algorithm and window: 3 spent), so the new limit leaves 3 more.
    const after = []
    for (let i = 0; i < 4; i++)
      after.push((await post(at('/v1/check'), { policy: 'api', key: 'r' })).body.allowed)
    expect(after).toEqual([true, true, true, false])

    const text = await metrics()
    expect(sample(text, 'sluice_decisions_total', { policy: 'api', outcome: 'allowed' })).toBe(6)
    expect(sample(text, 'sluice_decisions_total', { policy: 'api', outcome: 'denied' })).toBe(2)
    expect(totalsOf(await snapshot(), 'api')).toEqual({ allowed: 6, denied: 2, degraded: 0 })
  })

  it('serves the dashboard page and a live event stream that sees new decisions', async () => {
    const page = await fetch(at('/dashboard'))
    expect(page.status).toBe(200)
    expect(page.headers.get('content-type')).toContain('text/html')
    expect(await page.text()).toContain('<html')

    const frames: Snapshot[] = []
    const stream = await new Promise<import('node:http').IncomingMessage>((resolve, reject) => {
      request(at('/dashboard/events'), (res) => resolve(res))
        .on('error', reject)
        .end()
    })
    expect(stream.headers['content-type']).toContain('text/event-stream')
    let buffer = ''
    stream.on('data', (chunk: Buffer) => {
      buffer += chunk.toString()
      let end = buffer.indexOf('\n\n')
      while (end >= 0) {
        const data = buffer
          .slice(0, end)
          .split('\n')
          .find((line) => line.startsWith('data: '))
        if (data !== undefined) frames.push(JSON.parse(data.slice(6)) as Snapshot)
        buffer = buffer.slice(end + 2)
        end = buffer.indexOf('\n\n')
      }
    })
    for (let i = 0; i < 4; i++) await post(at('/v1/check'), { policy: 'login', key: 'sse' })
    // Frames come every 100 ms; wait for one taken after the four decisions.
    const deadline = Date.now() + 5000
    const latest = () => (frames.length === 0 ? undefined : totalsOf(frames.at(-1)!, 'login'))
    while (Date.now() < deadline && latest()?.denied !== 2) await new Promise((r) => setTimeout(r, 50))
    expect(totalsOf(frames.at(-1)!, 'login')).toEqual({ allowed: 2, denied: 2, degraded: 0 })
    // close() ends the stream rather than waiting for the client to leave.
    const ended = new Promise<void>((resolve) => stream.once('end', () => resolve()))
    await running.service.close(1000)
    await ended
  })

  it('with observability: false, /metrics serves the registry only and /dashboard is 404', async () => {
    const bare = await startService(CONFIG, { observability: false })
    try {
      await post(`${bare.url}/v1/check`, { policy: 'api', key: 'x' })
      const text = await (await fetch(`${bare.url}/metrics`)).text()
      expect(text).not.toContain('sluice_decisions_total')
      expect((await get(`${bare.url}/dashboard`)).status).toBe(404)
      expect(bare.service.observability).toBeUndefined()
    } finally {
      await bare.service.close()
    }
  })
})
