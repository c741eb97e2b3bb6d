// Descriptor entries that carry secrets (API keys sent by Envoy's request_headers action) on the
// Envoy path, against the real service, its gRPC listener and a real redis-server of its own: the raw
// value appears in no Redis key (SCAN of the whole keyspace), no dashboard snapshot, no /metrics
// line and no log line; counting per secret still works. docs/envoy.md's own example is the setup.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { Redis } from 'ioredis'
import { pino } from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { hashedApiKey } from '../../packages/sluice/src/http/keys.js'
import { parseEnvoyConfig } from '../../packages/sluice-server/src/envoy/config.js'
import { parseConfig } from '../../packages/sluice-server/src/server/config.js'
import type { Service } from '../../packages/sluice-server/src/server/service.js'
import { createService } from '../../packages/sluice-server/src/server/service.js'
import { openStore } from '../../packages/sluice-server/src/server/store-url.js'
import type { RlsClient } from '../helpers/envoy.js'
import { d, rlsClient } from '../helpers/envoy.js'
import type { RedisServer } from '../helpers/redis-harness.js'
import { startRedis } from '../helpers/redis-harness.js'

const SECRET = 'sk_live_9Fq2SECRETxYz0123456789'
const OTHER = 'sk_live_other-SECRET-42'
const TOKEN = 'tok_PRIVATE-987'

/** docs/envoy.md: the descriptor key Envoy fills from x-api-key, and the rules file shown for it. */
function docsExample(): { descriptorKey: string; rules: string } {
  const doc = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'envoy.md'), 'utf8')
  const action = /request_headers: \{ header_name: x-api-key, descriptor_key: ([\w-]+) \}/.exec(doc)
  const rules = /\(`ratelimit\/edge\.yaml`\):\n\n```yaml\n([\s\S]*?)```/.exec(doc)
  if (action === null || rules === null)
    throw new Error('docs/envoy.md: the x-api-key example is not where expected')
  return { descriptorKey: action[1]!, rules: rules[1]! }
}

async function scanAll(redis: Redis): Promise<string[]> {
  const names: string[] = []
  let cursor = '0'
  do {
    const [next, batch] = await redis.scan(cursor, 'COUNT', 1000)
    cursor = next
    names.push(...batch)
  } while (cursor !== '0')
  return names
}

describe('secrets in descriptor entries are hashed on the Envoy path (real Redis)', () => {
  const example = docsExample()
  let redisServer: RedisServer
  let redis: Redis
  let service: Service
  let client: RlsClient
  let url: string
  const logs: string[] = []
  const answers: { code: string; remaining: number }[] = []

  beforeAll(async () => {
    redisServer = await startRedis()
    redis = new Redis(redisServer.port, '127.0.0.1')
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        logs.push(chunk.toString())
        done()
      },
    })
    // The docs' rules, plus a `user` descriptor the config marks as secret (added to the default
    // list), and the docs' descriptor key again below a tier.
    const rules = `${example.rules}  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 100 }\n  - key: plan\n    value: pro\n    descriptors:\n      - key: ${example.descriptorKey}\n        rate_limit: { unit: hour, requests_per_unit: 1000 }\n`
    service = createService({
      config: parseConfig(
        'policies:\n  api: { algorithm: fixed-window, limit: 10, window: 1m }\n' +
          'envoy: { config: edge.yaml, secretKeys: [user] }\n',
        'sluice.yaml',
      ),
      logger: pino({ level: 'debug' }, sink),
      store: await openStore(redisServer.url, { prefix: 'sluice' }),
      envoy: parseEnvoyConfig([{ file: 'edge.yaml', text: rules }]),
      grpc: { port: 0 },
    })
    ;({ url } = await service.listen(0))
    client = rlsClient(service.grpcAddress!.url)
    const send = async (descriptors: ReturnType<typeof d>[], limit?: boolean) => {
      const r = await client.shouldRateLimit({
        domain: 'edge',
        descriptors: limit
          ? descriptors.map((x) => ({ ...x, limit: { requests_per_unit: 50, unit: 'MINUTE' } }))
          : descriptors,
      })
      answers.push({ code: r.overall_code, remaining: r.statuses[0]!.limit_remaining })
    }
    for (let i = 0; i < 3; i++) await send([d([example.descriptorKey, SECRET])])
    await send([d([example.descriptorKey, OTHER])])
    await send([d(['user', TOKEN])])
    await send([d(['plan', 'pro'], [example.descriptorKey, SECRET])])
    await send([d([example.descriptorKey, SECRET])], true)
    // A refused request names no value either.
    await client.refused({ domain: 'edge', descriptors: [d([example.descriptorKey, `${SECRET}\u0000`])] })
    service.observability!.flush()
  })

  afterAll(async () => {
    client?.close()
    await service?.close(500)
    redis?.disconnect()
    await redisServer?.stop()
  })

  const secrets = [SECRET, OTHER, TOKEN, 'SECRET', 'PRIVATE']

  it('the docs example keys its API-key descriptor on a name hashed by default', () => {
    const config = parseConfig(
      'policies:\n  api: { algorithm: fixed-window, limit: 1, window: 1m }\n',
      't.yaml',
    )
    expect(config.envoy.secretKeys).toContain(example.descriptorKey)
  })

  it('counts per secret (the hash is a stable name)', () => {
    // The docs example allows 100 per minute: 99, 98, 97 for one key, 99 for the other.
    expect(answers.slice(0, 4).map((a) => a.remaining)).toEqual([99, 98, 97, 99])
  })

  it('no Redis key name (SCAN of the whole keyspace) holds a raw secret', async () => {
    const names = await scanAll(redis)
    expect(names.length).toBeGreaterThanOrEqual(5)
    expect(names.some((name) => name.includes(hashedApiKey(SECRET)))).toBe(true)
    expect(names.some((name) => name.includes(hashedApiKey(TOKEN)))).toBe(true)
    for (const secret of secrets) expect(names.filter((name) => name.includes(secret))).toEqual([])
  })

  it('neither the dashboard snapshot nor /metrics holds a raw secret', async () => {
    const snapshot = await (await fetch(`${url}/dashboard/snapshot.json`)).text()
    expect(snapshot).toContain(hashedApiKey(SECRET))
    const metrics = await (await fetch(`${url}/metrics`)).text()
    for (const secret of secrets) {
      expect(snapshot).not.toContain(secret)
      expect(metrics).not.toContain(secret)
    }
  })

  it('no log line (debug level) holds a raw secret', () => {
    expect(logs.length).toBeGreaterThan(0)
    for (const secret of secrets) expect(logs.filter((line) => line.includes(secret))).toEqual([])
  })
})
