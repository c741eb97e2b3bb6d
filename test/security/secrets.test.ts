// With authz.keyHeader the client's API key is a secret. Against a real
// redis-server and the real service over HTTP: the raw key must appear in no Redis key, no
// dashboard snapshot, no /metrics line and no log line; top keys show a short fingerprint.
import { Writable } from 'node:stream'
import { Redis } from 'ioredis'
import { pino } from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { hashedApiKey } from '../../packages/sluice/src/http/keys.js'
import { openStore } from '../../packages/sluice-server/src/server/store-url.js'
import type { RedisServer } from '../helpers/redis-harness.js'
import { startRedis } from '../helpers/redis-harness.js'
import type { Running } from '../helpers/service.js'
import { get, startService } from '../helpers/service.js'

const SECRET = 'sk_live_9Fq2SECRETxYz0123456789'
const OTHER = 'sk_live_other-SECRET-42'

describe('API keys never stored, counted or logged in clear (real Redis)', () => {
  let redis: RedisServer
  let running: Running
  let client: Redis
  const logs: string[] = []

  beforeAll(async () => {
    redis = await startRedis()
    client = new Redis(redis.port, '127.0.0.1', { lazyConnect: true })
    await client.connect()
    // Debug: every request is logged too, so any field carrying the key would show here.
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        logs.push(chunk.toString())
        done()
      },
    })
    running = await startService(
      'policies:\n  api: { algorithm: fixed-window, limit: 2, window: 1m }\n' +
        '  slow: { algorithm: sliding-window-log, limit: 5, window: 1m }\n' +
        'authz: { keyHeader: x-api-key }\n',
      {
        store: await openStore(redis.url, { prefix: 'secrets' }),
        logger: pino({ level: 'debug' }, sink),
      },
    )
    for (const [policy, key, n] of [
      ['api', SECRET, 5],
      ['api', OTHER, 1],
      ['slow', SECRET, 2],
    ] as const) {
      for (let i = 0; i < n; i++) await get(`${running.url}/v1/authz?policy=${policy}`, { 'x-api-key': key })
    }
    // A key that is too long or odd is still hashed, never echoed back in an error.
    await get(`${running.url}/v1/authz?policy=api`, { 'x-api-key': `${SECRET}${'x'.repeat(2000)}` })
  })

  afterAll(async () => {
    await running?.service.close()
    client?.disconnect()
    await redis?.stop()
  })

  const secrets = [SECRET, OTHER, 'SECRET']

  it('the keys count per API key (the hash is a stable name)', async () => {
    const denied = await get(`${running.url}/v1/authz?policy=api`, { 'x-api-key': SECRET })
    expect(denied.status).toBe(429)
    expect((await get(`${running.url}/v1/authz?policy=api`, { 'x-api-key': OTHER })).status).toBe(200)
  })

  it('no Redis key name (SCAN of the whole keyspace) holds the raw key', async () => {
    const names: string[] = []
    let cursor = '0'
    do {
      const [next, batch] = await client.scan(cursor, 'COUNT', 1000)
      cursor = next
      names.push(...batch)
    } while (cursor !== '0')
    expect(names.length).toBeGreaterThan(0)
    expect(names.some((name) => name.includes(hashedApiKey(SECRET)))).toBe(true)
    for (const secret of secrets) expect(names.filter((name) => name.includes(secret))).toEqual([])
  })

  it('snapshot.json and /metrics hold no raw key; top keys show a short fingerprint', async () => {
    const snapshotText = await (await fetch(`${running.url}/dashboard/snapshot.json`)).text()
    const metricsText = await (await fetch(`${running.url}/metrics`)).text()
    for (const secret of secrets) {
      expect(snapshotText).not.toContain(secret)
      expect(metricsText).not.toContain(secret)
    }
    const snapshot = JSON.parse(snapshotText) as {
      topDenied: { policy: string; keys: { key: string; fingerprint?: string }[] }[]
    }
    const api = snapshot.topDenied.find((t) => t.policy === 'api')!
    const top = api.keys[0]!
    expect(top.key).toBe(hashedApiKey(SECRET))
    // Short enough to read, from the hash (so the same key has the same fingerprint everywhere).
    expect(top.fingerprint).toBe(
      `apikey:${hashedApiKey(SECRET).slice('apikey:'.length, 'apikey:'.length + 8)}…`,
    )
    const page = await (await fetch(`${running.url}/dashboard`)).text()
    expect(page).toContain('fingerprint')
  })

  it('no log line holds the raw key', () => {
    expect(logs.length).toBeGreaterThan(5)
    for (const secret of secrets) expect(logs.filter((line) => line.includes(secret))).toEqual([])
  })
})
