// Clients for integration tests, connected to the servers the global setup started.
import { Cluster, Redis } from 'ioredis'
import { createClient, createCluster } from 'redis'
import { inject } from 'vitest'

export function ioredis(): Redis {
  return new Redis(inject('redis').port, '127.0.0.1', { lazyConnect: false, maxRetriesPerRequest: 2 })
}

export function ioredisCluster(): Cluster {
  return new Cluster(inject('redisCluster').nodes, { redisOptions: { maxRetriesPerRequest: 2 } })
}

export async function nodeRedis() {
  const client = createClient({ url: inject('redis').url })
  await client.connect()
  return client
}

export async function nodeRedisCluster() {
  const cluster = createCluster({
    rootNodes: inject('redisCluster').nodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })),
  })
  await cluster.connect()
  return cluster
}

let unique = 0
/** A key prefix no other test uses, so tests need no FLUSHALL. */
export function freshPrefix(label: string): string {
  unique++
  return `t-${label}-${process.pid}-${unique}`
}

/**
 * The state and block keys of policy `p` on subject `k` under `prefix`: each key's type, raw bytes
 * (hex; a list's elements joined) and absolute expiry (PEXPIRETIME). Compares what two paths stored.
 */
export async function storedKeys(client: Redis, prefix: string): Promise<[string, string, number][]> {
  const out: [string, string, number][] = []
  for (const key of [`${prefix}:{k}:p`, `${prefix}:{k}:p:block`]) {
    const type = await client.type(key)
    const raw =
      type === 'list'
        ? (await client.lrange(key, 0, -1)).join(',')
        : type === 'string'
          ? ((await client.getBuffer(key))?.toString('hex') ?? '')
          : ''
    out.push([type, raw, Number(await client.call('PEXPIRETIME', key))])
  }
  return out
}
