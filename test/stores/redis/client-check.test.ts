// A Redis client that cannot work (never connected, closed, not a client at all) is a configuration
// error thrown by redisStore() (or at the latest by the first decision), never a silent fail-open
// admit. Real clients against the real Redis of the global setup.
import { Cluster, Redis } from 'ioredis'
import { createClient, createCluster } from 'redis'
import { afterAll, describe, expect, inject, it } from 'vitest'
import { SluiceError } from '../../../packages/sluice/src/errors.js'
import { createLimiter } from '../../../packages/sluice/src/limiter.js'
import { hybridRedis } from '../../../packages/sluice/src/stores/redis/hybrid.js'
import { type RedisClient, redisStore } from '../../../packages/sluice/src/stores/redis/index.js'
import { freshPrefix, ioredis, nodeRedis } from '../../helpers/redis-clients.js'

const policies = { api: { algorithm: 'gcra', limit: 5, window: '1m' } } as const
const url = () => inject('redis').url
const port = () => inject('redis').port

const opened: { close(): unknown }[] = []
afterAll(async () => {
  for (const c of opened) await Promise.resolve(c.close()).catch(() => {})
})

/**
 * What a limiter over `client` does: the error redisStore() or the first decision throws, or the
 * decision it made. Every decision here would be a degraded admit on a client that cannot work.
 */
async function firstOutcome(client: unknown): Promise<{ error: unknown } | { decision: unknown }> {
  let limiter: ReturnType<typeof createLimiter<typeof policies>>
  try {
    limiter = createLimiter({
      store: redisStore(client as RedisClient, { prefix: freshPrefix('cc') }),
      policies,
      logger: { warn: () => {} },
    })
  } catch (error) {
    return { error }
  }
  try {
    return { decision: await limiter.consume('api', 'k') }
  } catch (error) {
    return { error }
  } finally {
    await limiter.close()
  }
}

async function expectConfigurationError(client: unknown, mentions: RegExp) {
  const outcome = await firstOutcome(client)
  expect(outcome, 'a client that cannot work must not decide').not.toHaveProperty('decision')
  const error = (outcome as { error: unknown }).error
  expect(error).toBeInstanceOf(SluiceError)
  expect((error as SluiceError).code).toBe('SLUICE_INVALID_OPTIONS')
  expect((error as Error).message).toMatch(mentions)
}

describe('a client that cannot work is a configuration error, not a degraded admit', () => {
  it('a node-redis client that was never connected', async () => {
    const client = createClient({ url: url() })
    await expectConfigurationError(client, /connect\(\)/)
  })

  it('a node-redis client after close() and after destroy()', async () => {
    const closed = createClient({ url: url() })
    await closed.connect()
    await closed.close()
    await expectConfigurationError(closed, /node-redis client is not open/)
    const destroyed = createClient({ url: url() })
    await destroyed.connect()
    destroyed.destroy()
    await expectConfigurationError(destroyed, /node-redis client is not open/)
  })

  it('a node-redis cluster that was never connected', async () => {
    const cluster = createCluster({
      rootNodes: inject('redisCluster').nodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })),
    })
    await expectConfigurationError(cluster, /connect\(\)/)
  })

  it('an ioredis client after quit(), at once and once it has ended; after disconnect()', async () => {
    const quitting = new Redis(port(), '127.0.0.1')
    await quitting.ping()
    await quitting.quit()
    // quit() resolves before the client reports `end`: still refused.
    await expectConfigurationError(quitting, /ioredis client is closed/)
    await new Promise((resolve) => quitting.once('end', resolve))
    expect(quitting.status).toBe('end')
    await expectConfigurationError(quitting, /ioredis client is closed/)
    const disconnected = new Redis(port(), '127.0.0.1')
    await disconnected.ping()
    disconnected.disconnect()
    await expectConfigurationError(disconnected, /ioredis client is closed/)
  })

  it('an ioredis Cluster after quit()', async () => {
    const cluster = new Cluster(inject('redisCluster').nodes)
    await cluster.ping()
    await cluster.quit()
    await expectConfigurationError(cluster, /ioredis client is closed/)
  })

  it('things that are not a client: a plain object, a URL, a pipeline, a node-redis multi', async () => {
    const live = ioredis()
    opened.push({ close: () => live.quit() })
    const node = await nodeRedis()
    opened.push({ close: () => node.close() })
    const notClients: unknown[] = [
      {},
      { get() {}, set() {} },
      url(),
      null,
      live.pipeline(),
      node.multi(),
      // A callback-era client shape: evalsha that does not return a promise.
      { evalsha: () => true, script: () => true, del: () => true },
    ]
    for (const thing of notClients)
      await expectConfigurationError(thing, /pass an ioredis .* or a node-redis/)
  })

  it('hybridRedis refuses the same clients', async () => {
    const client = createClient({ url: url() })
    expect(() => hybridRedis(client)).toThrow(expect.objectContaining({ code: 'SLUICE_INVALID_OPTIONS' }))
    expect(() => hybridRedis({} as RedisClient)).toThrow(
      expect.objectContaining({ code: 'SLUICE_INVALID_OPTIONS' }),
    )
  })
})

describe('clients that can work are accepted', () => {
  it('a node-redis client still connecting, and an ioredis client with lazyConnect', async () => {
    const connecting = createClient({ url: url() })
    const connected = connecting.connect()
    opened.push({ close: () => connecting.close() })
    const first = await firstOutcome(connecting)
    await connected
    expect(first).toMatchObject({ decision: { allowed: true } })
    expect((first as { decision: { degraded?: boolean } }).decision.degraded).toBeUndefined()

    const lazy = new Redis(port(), '127.0.0.1', { lazyConnect: true })
    opened.push({ close: () => lazy.quit() })
    expect(lazy.status).toBe('wait')
    const outcome = await firstOutcome(lazy)
    expect(outcome).toMatchObject({ decision: { allowed: true } })
    expect((outcome as { decision: { degraded?: boolean } }).decision.degraded).toBeUndefined()
  })

  it('names a misspelled store option and the one meant', async () => {
    const client = ioredis()
    opened.push({ close: () => client.quit() })
    expect(() => redisStore(client, { prefx: 'a' } as never)).toThrow(
      expect.objectContaining({
        code: 'SLUICE_INVALID_OPTIONS',
        message: "redisStore: unknown option 'prefx'; did you mean 'prefix'?",
      }),
    )
    expect(() => hybridRedis(client, { prefx: 'a' } as never)).toThrow(
      expect.objectContaining({ message: "hybridRedis: unknown option 'prefx'; did you mean 'prefix'?" }),
    )
  })
})
