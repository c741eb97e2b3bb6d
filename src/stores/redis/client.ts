// A thin adapter over the two Redis clients Sluice accepts: ioredis (Redis, Cluster) and node-redis v5
// (client, cluster). Only types are imported; the user brings the client.
import type { Redis as IORedis, Cluster as IORedisCluster } from 'ioredis'

/** The subset of a node-redis v5 client (`createClient()`) that Sluice uses. */
export interface NodeRedisClientLike {
  evalSha(sha1: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>
  scriptLoad(script: string): Promise<unknown>
  del(keys: string[]): Promise<unknown>
}

/** The subset of a node-redis v5 cluster (`createCluster()`) that Sluice uses. */
export interface NodeRedisClusterLike extends NodeRedisClientLike {
  readonly masters: readonly unknown[]
  nodeClient(node: never): Promise<unknown> | unknown
}

/** Any client `redisStore` accepts. */
export type RedisClient = IORedis | IORedisCluster | NodeRedisClientLike | NodeRedisClusterLike

/** What the store needs from a client, whichever library it comes from. */
export interface ClientAdapter {
  readonly library: 'ioredis' | 'node-redis'
  readonly cluster: boolean
  evalsha(sha: string, keys: string[], args: string[]): Promise<unknown>
  /** SCRIPT LOAD on every master (one node when standalone). */
  loadScript(source: string): Promise<void>
  del(keys: string[]): Promise<void>
}

interface IORedisLike {
  evalsha(sha: string, numKeys: number, ...args: string[]): Promise<unknown>
  script(subcommand: 'LOAD', source: string): Promise<unknown>
  del(...keys: string[]): Promise<unknown>
  isCluster?: boolean
  nodes?: (role: 'master') => IORedisLike[]
}

function isIORedis(client: unknown): client is IORedisLike {
  return typeof (client as Partial<IORedisLike>).evalsha === 'function'
}

function isNodeRedis(client: unknown): client is NodeRedisClientLike {
  return typeof (client as Partial<NodeRedisClientLike>).evalSha === 'function'
}

/** Detect the client's library and wrap it; `undefined` when it is neither. */
export function adaptClient(client: unknown): ClientAdapter | undefined {
  if (isIORedis(client)) {
    const cluster = client.isCluster === true
    return {
      library: 'ioredis',
      cluster,
      evalsha: (sha, keys, args) => client.evalsha(sha, keys.length, ...keys, ...args),
      async loadScript(source) {
        const nodes = cluster && client.nodes !== undefined ? client.nodes('master') : [client]
        await Promise.all(nodes.map((node) => node.script('LOAD', source)))
      },
      async del(keys) {
        await client.del(...keys)
      },
    }
  }
  if (isNodeRedis(client)) {
    const cluster = Array.isArray((client as Partial<NodeRedisClusterLike>).masters)
    return {
      library: 'node-redis',
      cluster,
      evalsha: (sha, keys, args) => client.evalSha(sha, { keys, arguments: args }),
      async loadScript(source) {
        if (!cluster) {
          await client.scriptLoad(source)
          return
        }
        const c = client as NodeRedisClusterLike
        await Promise.all(
          c.masters.map(async (master) => {
            const node = (await c.nodeClient(master as never)) as NodeRedisClientLike
            await node.scriptLoad(source)
          }),
        )
      },
      async del(keys) {
        await client.del(keys)
      },
    }
  }
  return undefined
}

const REPLY_ERRORS = new Set(['ReplyError', 'ErrorReply', 'SimpleError', 'BlobError'])

/**
 * The error code of a Redis error reply: its first word (`NOSCRIPT`, `ERR`, `MOVED`, ...), the code
 * the protocol defines. Neither client sets a `code` property on replies, so it is read from there.
 */
export function replyErrorCode(error: unknown): string | undefined {
  if (!(error instanceof Error)) return undefined
  // ioredis: ReplyError (name set); node-redis v5: SimpleError/BlobError extends ErrorReply (name not set).
  if (!REPLY_ERRORS.has(error.name) && !REPLY_ERRORS.has(error.constructor.name)) return undefined
  const space = error.message.indexOf(' ')
  return space === -1 ? error.message : error.message.slice(0, space)
}
