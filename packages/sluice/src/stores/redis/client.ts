// A thin adapter over the two Redis clients Sluice accepts: ioredis (Redis, Cluster) and node-redis v5
// (client, cluster). The user brings the client; the types here are structural, so the declarations
// compile in a project that has neither library installed (test/consumer/packed.test.ts).

/** The subset of an ioredis `Redis` or `Cluster` that Sluice uses. */
export interface IORedisClientLike {
  evalsha(sha1: string, numkeys: number, ...args: string[]): Promise<unknown>
  script(subcommand: 'LOAD', script: string): Promise<unknown>
  script(subcommand: 'EXISTS', ...sha1s: string[]): Promise<unknown>
  del(...keys: string[]): Promise<unknown>
  get(key: string): Promise<unknown>
  setnx(key: string, value: string): Promise<unknown>
}

/** The subset of a node-redis v5 client (`createClient()`) that Sluice uses. */
export interface NodeRedisClientLike {
  /** False before `connect()` and after `close()`: such a client cannot serve a store. */
  readonly isOpen: boolean
  evalSha(sha1: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>
  scriptLoad(script: string): Promise<unknown>
  scriptExists(sha1s: string[]): Promise<unknown>
  del(keys: string[]): Promise<unknown>
  get(key: string): Promise<unknown>
  setNX(key: string, value: string): Promise<unknown>
}

/** The subset of a node-redis v5 cluster (`createCluster()`) that Sluice uses. */
export interface NodeRedisClusterLike extends NodeRedisClientLike {
  readonly masters: readonly unknown[]
  nodeClient(node: never): Promise<unknown> | unknown
}

/** Any client `redisStore` accepts. */
export type RedisClient = IORedisClientLike | NodeRedisClientLike | NodeRedisClusterLike

/** What the store needs from a client, whichever library it comes from. */
export interface ClientAdapter {
  readonly library: 'ioredis' | 'node-redis'
  readonly cluster: boolean
  /**
   * EVALSHA. With `shareWrite`, the call may wait for the end of the tick to leave in one socket
   * write with the other calls of the tick (see writeCoalescer).
   */
  evalsha(sha: string, keys: string[], args: string[], shareWrite?: boolean): Promise<unknown>
  /** SCRIPT LOAD on every master (one node when standalone). */
  loadScript(source: string): Promise<void>
  /** On every master, SCRIPT LOAD of those of `scripts` that SCRIPT EXISTS says it lacks. */
  loadMissing(scripts: readonly ScriptSource[]): Promise<void>
  del(keys: string[]): Promise<void>
  /** GET: the value, or undefined when the key does not exist. */
  get(key: string): Promise<string | undefined>
  /** SETNX: write `value` unless the key exists. */
  setIfAbsent(key: string, value: string): Promise<void>
}

/** A script as the adapter loads it. */
export interface ScriptSource {
  readonly sha: string
  readonly source: string
}

/** Those of `scripts` whose entry in a SCRIPT EXISTS reply is not 1: the ones to load. */
function missing(scripts: readonly ScriptSource[], exists: unknown): ScriptSource[] {
  const flags = Array.isArray(exists) ? exists : []
  return scripts.filter((_, i) => Number(flags[i]) !== 1)
}

const text = (value: unknown): string | undefined =>
  value === null || value === undefined ? undefined : String(value)

/** What the adapter reads of an ioredis client at run time, beyond the public subset. */
interface IORedisLike extends IORedisClientLike {
  isCluster?: boolean
  nodes?: (role: 'master' | 'all') => IORedisLike[]
  status?: string
  stream?: Corkable
}

/** A socket as far as write coalescing needs it. */
interface Corkable {
  cork(): void
  uncork(): void
}

/** Most EVALSHA calls one coalesced socket write carries. */
const WRITE_CHUNK = 16

/**
 * Socket write coalescing for ioredis, which writes every command with its own system call. The
 * first call of a tick corks the connections; they are uncorked after WRITE_CHUNK calls or when the
 * tick ends, whichever comes first, so a tick's calls leave in a few writes (node-redis does this
 * itself). The chunk keeps several writes in flight at 64 in flight and more, so Redis works on one
 * while this process builds the next, rather than the two taking turns over one big write.
 * Order is kept: a corked socket sends its buffered writes in order.
 */
function writeCoalescer(streams: () => Corkable[]): { before(): void; after(): void } {
  let corked: Corkable[] | undefined
  let count = 0
  const release = (): void => {
    const uncorking = corked
    corked = undefined
    count = 0
    if (uncorking !== undefined) for (const s of uncorking) s.uncork()
  }
  return {
    before() {
      if (corked !== undefined) return
      corked = streams()
      for (const s of corked) s.cork()
      // Each cork schedules a release; one that finds nothing corked does nothing.
      process.nextTick(release)
    },
    after() {
      if (++count >= WRITE_CHUNK) release()
    },
  }
}

/** The sockets of an ioredis client that are ready to write (every node's of a Cluster). */
function readyStreams(client: IORedisLike, cluster: boolean): Corkable[] {
  const nodes = cluster && client.nodes !== undefined ? client.nodes('all') : [client]
  const out: Corkable[] = []
  for (const node of nodes) {
    if (node.status === 'ready' && node.stream !== undefined) out.push(node.stream)
  }
  return out
}

// A client is recognised by its commands and by the connection state it reports (ioredis `status`,
// node-redis `isOpen`), which also tells whether it can work: a pipeline, a MULTI or a callback-era
// client has the command names but not the state.
function isIORedis(client: unknown): client is IORedisLike {
  const c = client as Partial<IORedisLike> | null
  return typeof c?.evalsha === 'function' && typeof c.status === 'string'
}

function isNodeRedis(client: unknown): client is NodeRedisClientLike {
  const c = client as Partial<NodeRedisClientLike> | null
  return typeof c?.evalSha === 'function' && typeof c.isOpen === 'boolean'
}

export const NOT_A_CLIENT =
  'pass an ioredis Redis or Cluster, or a node-redis v5 client or cluster (createClient/createCluster)'

/**
 * Why `client` cannot serve a store, or undefined when it can: not a client of either library, a
 * node-redis client never connected or closed, an ioredis client closed or closing (quit and
 * disconnect set `manuallyClosing` at once; `status` becomes `end` only when the socket has closed).
 * A client still connecting is fine: its commands wait for the connection.
 */
export function clientProblem(client: unknown): string | undefined {
  if (isIORedis(client)) {
    const closing = (client as { manuallyClosing?: unknown }).manuallyClosing === true
    return client.status === 'end' || closing
      ? `the ioredis client is closed (quit() or disconnect() was called; status ${client.status}); pass a client that is connected or connecting`
      : undefined
  }
  if (isNodeRedis(client)) {
    return client.isOpen
      ? undefined
      : 'the node-redis client is not open; call `await client.connect()` before passing it (a client after close(), quit() or destroy() cannot be used)'
  }
  return NOT_A_CLIENT
}

/** Detect the client's library and wrap it; `undefined` when it is neither. */
export function adaptClient(client: unknown): ClientAdapter | undefined {
  if (isIORedis(client)) {
    const cluster = client.isCluster === true
    const writes = writeCoalescer(() => readyStreams(client, cluster))
    const masters = (): IORedisLike[] =>
      cluster && client.nodes !== undefined ? client.nodes('master') : [client]
    return {
      library: 'ioredis',
      cluster,
      evalsha(sha, keys, args, shareWrite) {
        if (!shareWrite) return client.evalsha(sha, keys.length, ...keys, ...args)
        writes.before()
        try {
          return client.evalsha(sha, keys.length, ...keys, ...args)
        } finally {
          writes.after()
        }
      },
      async loadScript(source) {
        await Promise.all(masters().map((node) => node.script('LOAD', source)))
      },
      async loadMissing(scripts) {
        const shas = scripts.map((s) => s.sha)
        // A Cluster knows its masters once connected: a command through it connects it first (or
        // fails the way its options say a command fails while it cannot connect).
        if (cluster && client.status !== 'ready') await client.script('EXISTS', ...shas)
        await Promise.all(
          masters().map(async (node) => {
            const lacking = missing(scripts, await node.script('EXISTS', ...shas))
            await Promise.all(lacking.map((s) => node.script('LOAD', s.source)))
          }),
        )
      },
      async del(keys) {
        await client.del(...keys)
      },
      get: async (key) => text(await client.get(key)),
      async setIfAbsent(key, value) {
        await client.setnx(key, value)
      },
    }
  }
  if (isNodeRedis(client)) {
    const cluster = Array.isArray((client as Partial<NodeRedisClusterLike>).masters)
    /** The client of every master (the client itself when standalone). */
    const masters = async (): Promise<NodeRedisClientLike[]> => {
      if (!cluster) return [client]
      const c = client as NodeRedisClusterLike
      return Promise.all(
        c.masters.map(async (master) => (await c.nodeClient(master as never)) as NodeRedisClientLike),
      )
    }
    return {
      library: 'node-redis',
      cluster,
      evalsha: (sha, keys, args) => client.evalSha(sha, { keys, arguments: args }),
      async loadScript(source) {
        await Promise.all((await masters()).map((node) => node.scriptLoad(source)))
      },
      async loadMissing(scripts) {
        const shas = scripts.map((s) => s.sha)
        await Promise.all(
          (await masters()).map(async (node) => {
            const lacking = missing(scripts, await node.scriptExists(shas))
            await Promise.all(lacking.map((s) => node.scriptLoad(s.source)))
          }),
        )
      },
      async del(keys) {
        await client.del(keys)
      },
      get: async (key) => text(await client.get(key)),
      async setIfAbsent(key, value) {
        await client.setNX(key, value)
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
