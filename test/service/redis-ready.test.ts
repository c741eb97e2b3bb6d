// Cold start on Redis: `sluice serve` (the built CLI) on a fresh redis-server answers /readyz only
// once its scripts are loaded, so its very first decision is one EVALSHA that comes from Redis, not a
// degraded admit after a script load and a connect that missed the store timeout. On Redis Cluster,
// the slot secret is in Redis before the service is ready, and /readyz writes it back when lost.
import { createHash } from 'node:crypto'
import { Cluster, Redis } from 'ioredis'
import { afterAll, describe, expect, inject, it } from 'vitest'
import { slotSecretKey } from '../../packages/sluice/src/stores/redis/keys.js'
import { luaSources } from '../../packages/sluice/src/stores/redis/lua.generated.js'
import { openStore } from '../../packages/sluice-server/src/server/store-url.js'
import { servingUrl, startCli } from '../helpers/cli-process.js'
import { startRedis } from '../helpers/redis-harness.js'
import { get, post, type Running, startService } from '../helpers/service.js'

const storeShas = Object.entries(luaSources)
  .filter(([name]) => !name.startsWith('hybrid/'))
  .map(([, source]) => createHash('sha1').update(source).digest('hex'))

/** Calls and errors Redis counted (INFO commandstats and errorstats). */
async function counted(client: Redis, line: string, field: string): Promise<number> {
  const text = `${await client.info('commandstats')}\n${await client.info('errorstats')}`
  const found = text.split('\n').find((l) => l.startsWith(line))
  return found === undefined ? 0 : Number(new RegExp(`${field}=(\\d+)`).exec(found)![1])
}

describe('sluice serve on a fresh Redis', () => {
  it('is ready only with its scripts loaded; the first decision is one EVALSHA, not degraded', async () => {
    const server = await startRedis()
    const admin = new Redis(server.port, '127.0.0.1')
    const cli = startCli(['serve', '--store', server.url, '--port', '0'], { SLUICE_LOG_LEVEL: 'warn' })
    try {
      const url = await servingUrl(cli)
      const deadline = Date.now() + 15_000
      let ready = await get(`${url}/readyz`)
      while (ready.status !== 200 && Date.now() < deadline) ready = await get(`${url}/readyz`)
      expect(ready).toMatchObject({ status: 200, body: { ready: true, reachable: true } })
      expect(await admin.script('EXISTS', ...storeShas)).toEqual(storeShas.map(() => 1))
      expect(await counted(admin, 'cmdstat_evalsha:', 'calls')).toBe(0)

      const first = await post(`${url}/v1/check`, { policy: 'api', key: 'first-caller' })
      expect(first).toMatchObject({ status: 200, body: { allowed: true } })
      expect(first.body.degraded).toBeUndefined()
      expect(await counted(admin, 'cmdstat_evalsha:', 'calls')).toBe(1)
      expect(await counted(admin, 'errorstat_NOSCRIPT:', 'count')).toBe(0)
    } finally {
      cli.child.kill('SIGTERM')
      await cli.exited
      admin.disconnect()
      await server.stop()
    }
  })
})

describe('the service on Redis Cluster', () => {
  const running: Running[] = []
  afterAll(async () => {
    for (const r of running) await r.service.close()
  })

  it('opening the store reads the slot secret; /readyz writes it back when it is lost', async () => {
    const { nodes } = inject('redisCluster')
    const url = `redis+cluster://${nodes.map((n) => `${n.host}:${n.port}`).join(',')}`
    const prefix = `svc-slots-${process.pid}-${Date.now()}`
    const store = await openStore(url, { prefix })
    const admin = new Cluster(nodes)
    try {
      const secret = await admin.get(slotSecretKey(prefix))
      expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/)
      const r = await startService('policies:\n  api: { algorithm: gcra, limit: 5, window: 1m }\n', { store })
      running.push(r)
      expect((await post(`${r.url}/v1/check`, { policy: 'api', key: 'u' })).body).toMatchObject({
        allowed: true,
      })

      await admin.del(slotSecretKey(prefix))
      expect(await get(`${r.url}/readyz`)).toMatchObject({
        status: 200,
        body: { ready: true, reachable: true },
      })
      expect(await admin.get(slotSecretKey(prefix))).toBe(secret)
    } finally {
      admin.disconnect()
    }
  })
})
