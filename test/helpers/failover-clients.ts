// ioredis clients configured the way docs/reliability.md recommends for a rate limiter: no offline
// queue (a command sent while disconnected fails at once instead of waiting), no resend of commands
// that were in flight when the connection dropped (their decisions were already made by the
// fallback), and quick reconnects.
import { Cluster, Redis, type RedisOptions } from 'ioredis'

export const limiterRedisOptions = {
  enableOfflineQueue: false,
  autoResendUnfulfilledCommands: false,
  maxRetriesPerRequest: 0,
  retryStrategy: (times: number) => Math.min(times * 50, 500),
} satisfies RedisOptions

/** A standalone client with the recommended options, connected (ready) before it is returned. */
export async function limiterClient(port: number, extra: RedisOptions = {}): Promise<Redis> {
  const client = new Redis({ host: '127.0.0.1', port, ...limiterRedisOptions, ...extra })
  // Errors are reported through the limiter's failover layer; an 'error' listener keeps ioredis quiet.
  client.on('error', () => {})
  if (client.status !== 'ready') await new Promise((resolve) => client.once('ready', resolve))
  return client
}

export async function limiterCluster(nodes: { host: string; port: number }[]): Promise<Cluster> {
  const cluster = new Cluster(nodes, {
    enableOfflineQueue: false,
    retryDelayOnFailover: 50,
    retryDelayOnClusterDown: 50,
    retryDelayOnTryAgain: 50,
    slotsRefreshTimeout: 500,
    slotsRefreshInterval: 1000,
    redisOptions: { autoResendUnfulfilledCommands: false, maxRetriesPerRequest: 0, connectTimeout: 500 },
  })
  cluster.on('error', () => {})
  if (cluster.status !== 'ready') await new Promise((resolve) => cluster.once('ready', resolve))
  return cluster
}

/** Commands ioredis holds while disconnected (a private field: read for the test only). */
export function offlineQueueLength(client: Redis | Cluster): number {
  return (client as unknown as { offlineQueue: { length: number } }).offlineQueue.length
}

/**
 * Every distinct command ioredis holds for a standalone client: queued while offline, sent and
 * unanswered, and kept to be resent after a reconnect (one command can sit in two of these at
 * once). Private fields: read for the test only.
 */
export function heldCommands(client: Redis): number {
  type Queue = { toArray(): { command?: unknown }[] } | null | undefined
  const c = client as unknown as { offlineQueue: Queue; commandQueue: Queue; prevCommandQueue?: Queue }
  const held = new Set<unknown>()
  for (const queue of [c.offlineQueue, c.commandQueue, c.prevCommandQueue])
    for (const item of queue?.toArray() ?? []) held.add(item.command ?? item)
  return held.size
}
