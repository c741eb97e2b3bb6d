// The config's `store.compactValues`: the redisStore option of the same name for the store the
// service opens (false: the value layouts a release before the compact ones reads, for a rolling
// deploy). Checked with the store URL, passed to the real Redis store, refused on other stores.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { pino } from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parseConfig } from '../../packages/sluice-server/src/server/config.js'
import { openStore } from '../../packages/sluice-server/src/server/store-url.js'
import { servingUrl, startCli } from '../helpers/cli-process.js'
import { type RedisServer, startRedis } from '../helpers/redis-harness.js'
import { post, servicesClosedAfterEach } from '../helpers/service.js'

const POLICIES = 'policies:\n  api: { algorithm: token-bucket, limit: 5, window: 1m }\n'

function configError(text: string): string {
  try {
    parseConfig(text, 'sluice.yaml')
  } catch (error) {
    return (error as Error).message
  }
  throw new Error('the config was accepted')
}

describe('store.compactValues in the config', () => {
  it('is read beside the URL and TLS settings, true or false', () => {
    const off = parseConfig(
      `store: { url: "redis://127.0.0.1:6379", compactValues: false }\n${POLICIES}`,
      'f',
    )
    expect(off.storeCompactValues).toBe(false)
    const on = parseConfig(`store: { url: "redis://127.0.0.1:6379", compactValues: true }\n${POLICIES}`, 'f')
    expect(on.storeCompactValues).toBe(true)
    expect(
      parseConfig(`store: "redis://127.0.0.1:6379"\n${POLICIES}`, 'f').storeCompactValues,
    ).toBeUndefined()
    // Without a URL it applies to the one from REDIS_URL or --store, as store.tls does.
    expect(parseConfig(`store: { compactValues: false }\n${POLICIES}`, 'f').storeCompactValues).toBe(false)
  })

  it('refuses anything but true or false, with the line', () => {
    const message = configError(`store: { url: "redis://127.0.0.1:6379", compactValues: "no" }\n${POLICIES}`)
    expect(message).toContain('sluice.yaml:1')
    expect(message).toContain('store.compactValues: must be true or false')
  })

  it('refuses it with a store that is not Redis', () => {
    for (const url of ['memory', 'memcached://127.0.0.1:11211', 'postgres://u@127.0.0.1:5432/db']) {
      const message = configError(`store: { url: "${url}", compactValues: false }\n${POLICIES}`)
      expect(message, url).toContain('store.compactValues: only a Redis store has compactValues')
    }
  })
})

describe('store.compactValues on a real Redis', () => {
  let redis: RedisServer
  let client: Redis
  const startService = servicesClosedAfterEach()
  beforeAll(async () => {
    redis = await startRedis()
    client = new Redis(redis.port, '127.0.0.1')
  })
  afterAll(async () => {
    client.disconnect()
    await redis.stop()
  })

  /** The stored value of the one token-bucket key under `prefix` after one decision. */
  async function valueAfterOneDecision(
    url: string,
    prefix: string,
    compactValues?: boolean,
  ): Promise<string> {
    const store = await openStore(url, { prefix, ...(compactValues === undefined ? {} : { compactValues }) })
    const running = await startService(`prefix: ${prefix}\n${POLICIES}`, { store })
    expect((await post(`${running.url}/v1/check`, { policy: 'api', key: 'k' })).body).toMatchObject({
      allowed: true,
      remaining: 4,
    })
    const keys = (await client.keys(`${prefix}:*`)).filter((k) => !k.endsWith(':b'))
    expect(keys).toHaveLength(1)
    return (await client.get(keys[0]!))!
  }

  it('openStore writes compact values by default and the value layout with compactValues: false', async () => {
    expect(await valueAfterOneDecision(redis.url, 'cv-default')).toMatch(/^-?\d+$/)
    expect(await valueAfterOneDecision(redis.url, 'cv-off', false)).toContain(':')
  })

  it('a reload that changes it says it takes effect on restart, and the store keeps its layout', async () => {
    const lines: { msg: string }[] = []
    const logger = pino({ level: 'warn' }, { write: (line: string) => lines.push(JSON.parse(line)) })
    const yaml = (compact: boolean) =>
      `prefix: cv-reload\nstore: { url: "${redis.url}", compactValues: ${compact} }\n${POLICIES}`
    const first = parseConfig(yaml(false), 'sluice.yaml')
    const store = await openStore(redis.url, { prefix: 'cv-reload', compactValues: false })
    const running = await startService(yaml(false), { store, logger })
    running.service.reload(parseConfig(yaml(false), 'sluice.yaml'))
    expect(lines.some((line) => line.msg.includes('take effect on restart'))).toBe(false)
    running.service.reload(parseConfig(yaml(true), 'sluice.yaml'))
    expect(lines.some((line) => line.msg.includes('take effect on restart'))).toBe(true)
    expect(first.storeCompactValues).toBe(false)
    await post(`${running.url}/v1/check`, { policy: 'api', key: 'k' })
    const keys = (await client.keys('cv-reload:*')).filter((k) => !k.endsWith(':b'))
    expect(await client.get(keys[0]!)).toContain(':')
  })

  it('refuses compactValues for a store that is not Redis when the URL comes from elsewhere', async () => {
    await expect(openStore('memory', { prefix: 'p', compactValues: false })).rejects.toMatchObject({
      code: 'SLUICE_INVALID_CONFIG',
      message: expect.stringContaining('only a Redis store has compactValues'),
    })
  })

  it('sluice serve passes the config key to the store; sluice check prints it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-compact-values-'))
    const file = join(dir, 'sluice.yaml')
    writeFileSync(file, `prefix: cv-cli\nstore: { url: "${redis.url}", compactValues: false }\n${POLICIES}`)
    const check = startCli(['check', '--config', file])
    expect(await check.exited, check.output()).toBe(0)
    expect(check.output()).toContain('store compactValues: false')
    const serve = startCli(['serve', '--config', file, '--port', '0'], { SLUICE_LOG_LEVEL: 'warn' })
    try {
      const url = await servingUrl(serve)
      expect((await post(`${url}/v1/check`, { policy: 'api', key: 'k' })).body).toMatchObject({
        allowed: true,
      })
      const keys = (await client.keys('cv-cli:*')).filter((k) => !k.endsWith(':b'))
      expect(keys).toHaveLength(1)
      expect(await client.get(keys[0]!)).toContain(':')
    } finally {
      serve.child.kill('SIGTERM')
      await serve.exited
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
