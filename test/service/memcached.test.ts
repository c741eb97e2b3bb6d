// The service on real memcached: store URLs opened with memjs, counters shared by two instances,
// readiness when memcached goes away, `sluice serve --store memcached://` and YAML `store:`, and
// credentials redacted everywhere they could be printed.
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, inject, it } from 'vitest'
import { openStore, parseStoreUrl } from '../../packages/sluice-server/src/server/store-url.js'
import { servingUrl, startCli } from '../helpers/cli-process.js'
import { startMemcached } from '../helpers/memcached-harness.js'
import { dumpKeys } from '../helpers/memcached-text-protocol.js'
import type { Running } from '../helpers/service.js'
import { get, post, startService } from '../helpers/service.js'

const CONFIG = 'prefix: svc-test\npolicies:\n  api: { algorithm: sliding-window-log, limit: 3, window: 1m }\n'

describe('store URLs for memcached', () => {
  it('memcached://host:port, default port 11211, credentials redacted', () => {
    expect(parseStoreUrl('memcached://127.0.0.1:11311')).toMatchObject({
      kind: 'memcached',
      host: '127.0.0.1',
      port: 11311,
      redacted: 'memcached://127.0.0.1:11311',
    })
    expect(parseStoreUrl('memcached://cache.internal')).toMatchObject({ port: 11211 })
    expect(parseStoreUrl('memcached://app:s3cr%40t@cache:11211')).toMatchObject({
      username: 'app',
      password: 's3cr@t',
      redacted: 'memcached://app:***@cache:11211',
    })
  })

  it.each([
    ['memcached://a:1,b:2', 'one memcached server'],
    ['memcached://host:11211/0', 'no databases'],
    ['memcached://[::1]:11211', 'IPv6'],
    ['memcached://', 'no host'],
  ])('refuses %s with InvalidConfigError', (url, why) => {
    expect(() => parseStoreUrl(url)).toThrow(expect.objectContaining({ code: 'SLUICE_INVALID_CONFIG' }))
    expect(() => parseStoreUrl(url)).toThrow(new RegExp(why))
  })
})

describe('the service on memcached', () => {
  const running: Running[] = []
  afterAll(async () => {
    for (const r of running) await r.service.close()
  })

  it('memcached://: two instances share counters; items carry the prefix and an expiry', async () => {
    const { port } = inject('memcached')
    const prefix = `svc-${process.pid}-${Date.now()}`
    for (let i = 0; i < 2; i++) {
      const store = await openStore(`memcached://127.0.0.1:${port}`, { prefix })
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
    const layered = await post(`${a.url}/v1/check`, {
      checks: [
        { policy: 'api', key: `${key}-other` },
        { policy: 'api', key },
      ],
    })
    expect(layered.body).toMatchObject({ allowed: false, deniedBy: 'api' })
    expect(await get(`${a.url}/readyz`)).toMatchObject({
      status: 200,
      body: { ready: true, reachable: true, store: `memcached://127.0.0.1:${port}` },
    })
    const items = await dumpKeys(port, prefix)
    expect(items.some((i) => i.key.includes(key) && i.key.includes('api._.'))).toBe(true)
    for (const i of items) expect(i.exp, i.key).toBeGreaterThan(0)
  })

  it('when memcached goes away: open admits degraded and stays ready; closed denies and /readyz is 503', async () => {
    const server = await startMemcached()
    const url = `memcached://${server.address}`
    const open = await startService(CONFIG, { store: await openStore(url, { prefix: 'gone' }) })
    running.push(open)
    const closedConfig = CONFIG.replace('window: 1m }', 'window: 1m, onStoreError: closed }')
    const closed = await startService(closedConfig, { store: await openStore(url, { prefix: 'gone2' }) })
    running.push(closed)
    for (const r of [open, closed])
      expect((await post(`${r.url}/v1/check`, { policy: 'api', key: 'k' })).body).toMatchObject({
        allowed: true,
      })
    await server.stop()
    const admitted = await post(`${open.url}/v1/check`, { policy: 'api', key: 'k' })
    expect(admitted).toMatchObject({ status: 200, body: { allowed: true, degraded: true } })
    expect(await get(`${open.url}/readyz`)).toMatchObject({
      status: 200,
      body: { ready: true, reachable: false },
    })
    const denied = await post(`${closed.url}/v1/check`, { policy: 'api', key: 'k' })
    expect(denied).toMatchObject({ status: 200, body: { allowed: false, reason: 'store_unavailable' } })
    expect(await get(`${closed.url}/readyz`)).toMatchObject({
      status: 503,
      body: { ready: false, reachable: false },
    })
  })

  it('refuses to start on a memcached that does not answer', async () => {
    const server = await startMemcached()
    await server.stop()
    await expect(openStore(`memcached://${server.address}`, { prefix: 'x' })).rejects.toMatchObject({
      code: 'SLUICE_STORE_ERROR',
    })
  })
})

describe('sluice serve on memcached (the built CLI)', () => {
  it('--store memcached://host:port decides on memcached', async () => {
    const { address } = inject('memcached')
    const cli = startCli(['serve', '--store', `memcached://${address}`, '--port', '0'], {
      SLUICE_LOG_LEVEL: 'warn',
    })
    try {
      const url = await servingUrl(cli)
      expect(cli.output()).toContain(`(store: memcached://${address}`)
      const key = `cli-${process.pid}-${Date.now()}`
      const res = await post(`${url}/v1/check`, { policy: 'api', key })
      expect(res).toMatchObject({ status: 200, body: { allowed: true } })
    } finally {
      cli.child.kill('SIGTERM')
      await cli.exited
    }
  })

  it('YAML store: memcached://user:password@... serves, and the password is printed nowhere', async () => {
    // memcached here runs without SASL; memjs only sends credentials when the server asks for them.
    const { address } = inject('memcached')
    const dir = mkdtempSync(join(tmpdir(), 'sluice-mc-yaml-'))
    const file = join(dir, 'sluice.yaml')
    writeFileSync(file, `store: memcached://app:hunter2-secret@${address}\n${CONFIG}`)
    const cli = startCli(['serve', '--config', file, '--port', '0'], { SLUICE_LOG_LEVEL: 'info' })
    try {
      const url = await servingUrl(cli)
      const ready = await get(`${url}/readyz`)
      expect(ready).toMatchObject({ status: 200, body: { store: `memcached://app:***@${address}` } })
      expect((await post(`${url}/v1/check`, { policy: 'api', key: 'y' })).body).toMatchObject({
        allowed: true,
      })
      expect(JSON.stringify(ready.body)).not.toContain('hunter2')
      expect(cli.output()).not.toContain('hunter2')
    } finally {
      cli.child.kill('SIGTERM')
      await cli.exited
    }
  })
})
