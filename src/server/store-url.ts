// Store URLs for the service: `memory`, `redis://host:port[/db]`, `rediss://...`,
// `redis+cluster://host1:port1,host2:port2`. Parsed here, and opened (Redis with ioredis) as the
// StoreHandle the service decides on.
import { InvalidConfigError, StoreError } from '../errors.js'
import type { Store } from '../store.js'
import { memoryStore } from '../stores/memory.js'
import type { StoreHandle } from './types.js'

export interface HostPort {
  readonly host: string
  readonly port: number
}

export type StoreSpec =
  | { readonly kind: 'memory' }
  | {
      readonly kind: 'redis'
      readonly tls: boolean
      readonly host: string
      readonly port: number
      readonly db: number
      readonly username: string | undefined
      readonly password: string | undefined
    }
  | {
      readonly kind: 'cluster'
      readonly tls: boolean
      readonly nodes: readonly HostPort[]
      readonly username: string | undefined
      readonly password: string | undefined
    }

const USAGE =
  'use memory, redis://host:port[/db], rediss://host:port[/db] or redis+cluster://host1:port1,host2:port2'

function bad(url: string, why: string): InvalidConfigError {
  return new InvalidConfigError(`store ${JSON.stringify(redactStoreUrl(url))}: ${why}; ${USAGE}`)
}

function hostPort(url: string, text: string): HostPort {
  const match = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(?::(\d{1,5}))?$/.exec(text)
  if (match === null) throw bad(url, `${JSON.stringify(text)} is not host:port`)
  const port = match[2] === undefined ? 6379 : Number(match[2])
  if (port < 1 || port > 65535) throw bad(url, `port ${port} is out of range`)
  return { host: match[1]!.replace(/^\[|\]$/g, ''), port }
}

/**
 * Parse a store URL. Throws `InvalidConfigError` saying what to write instead.
 * @example parseStoreUrl('redis://127.0.0.1:6379/2') // { kind: 'redis', host: '127.0.0.1', port: 6379, db: 2, ... }
 */
export function parseStoreUrl(url: string): StoreSpec {
  const text = url.trim()
  if (text === 'memory' || text === 'memory://') return { kind: 'memory' }
  const scheme = /^([a-z+]+):\/\/(.*)$/.exec(text)
  if (scheme === null) throw bad(url, 'not a store URL')
  const [, protocol, rest] = scheme as unknown as [string, string, string]
  // user:password@ (either may be empty), percent-encoded.
  const at = rest.lastIndexOf('@')
  const auth = at === -1 ? undefined : rest.slice(0, at)
  const afterAuth = at === -1 ? rest : rest.slice(at + 1)
  let username: string | undefined
  let password: string | undefined
  if (auth !== undefined) {
    const colon = auth.indexOf(':')
    const user = decodeURIComponent(colon === -1 ? auth : auth.slice(0, colon))
    const pass = colon === -1 ? '' : decodeURIComponent(auth.slice(colon + 1))
    username = user === '' ? undefined : user
    password = pass === '' ? undefined : pass
    if (colon === -1) {
      // `redis://secret@host` is the common password-only form.
      password = username
      username = undefined
    }
  }
  const slash = afterAuth.indexOf('/')
  const hosts = slash === -1 ? afterAuth : afterAuth.slice(0, slash)
  const path = slash === -1 ? '' : afterAuth.slice(slash + 1)
  if (hosts === '') throw bad(url, 'no host')
  if (protocol === 'redis' || protocol === 'rediss') {
    if (hosts.includes(',')) throw bad(url, 'several hosts need redis+cluster://')
    const { host, port } = hostPort(url, hosts)
    if (path !== '' && !/^\d{1,2}$/.test(path))
      throw bad(url, `database ${JSON.stringify(path)} is not a number`)
    return {
      kind: 'redis',
      tls: protocol === 'rediss',
      host,
      port,
      db: path === '' ? 0 : Number(path),
      username,
      password,
    }
  }
  if (protocol === 'redis+cluster' || protocol === 'rediss+cluster') {
    if (path !== '') throw bad(url, 'Redis Cluster has no databases; remove the /db')
    const nodes = hosts.split(',').map((h) => hostPort(url, h.trim()))
    return { kind: 'cluster', tls: protocol === 'rediss+cluster', nodes, username, password }
  }
  throw bad(url, `unknown scheme ${protocol}://`)
}

/** The URL with any password replaced by `***`, for logs and /readyz. */
export function redactStoreUrl(url: string): string {
  return url.replace(/^([a-z+]+:\/\/)([^@/]*)@/, (_, scheme: string, auth: string) => {
    const colon = auth.indexOf(':')
    return colon === -1 ? `${scheme}***@` : `${scheme}${auth.slice(0, colon)}:***@`
  })
}

/** A memory store with a trivial ping: what `npm start` runs on. */
export function memoryStoreHandle(): StoreHandle {
  return { store: memoryStore(), description: 'memory', ping: async () => {} }
}

export interface OpenStoreOptions {
  /** Key prefix in Redis. */
  prefix: string
}

const CONNECT_TIMEOUT_MS = 5000
const COMMAND_TIMEOUT_MS = 1000

/**
 * Open the store a URL names. Redis stores connect (ioredis, loaded only then) before this resolves,
 * or it rejects with a `StoreError`. Closing the handle's store also closes the client.
 */
export async function openStore(url: string, options: OpenStoreOptions): Promise<StoreHandle> {
  const spec = parseStoreUrl(url)
  if (spec.kind === 'memory') return memoryStoreHandle()
  // ioredis is an optional peer: without it, say what to install (the CLI prints this one line).
  const { Redis, Cluster } = await import('ioredis').catch((error: unknown) => {
    const code = (error as { code?: unknown }).code
    if (
      (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') &&
      String(error).includes("'ioredis'")
    )
      throw new StoreError('the redis store needs ioredis: npm install ioredis', { cause: error })
    throw error
  })
  const { redisStore } = await import('../stores/redis/index.js')
  const auth = {
    ...(spec.username === undefined ? {} : { username: spec.username }),
    ...(spec.password === undefined ? {} : { password: spec.password }),
    ...(spec.tls ? { tls: {} } : {}),
  }
  // A decision must not wait on a dead Redis: fail fast (the caller answers 503) instead of queueing.
  const common = {
    lazyConnect: true,
    connectTimeout: CONNECT_TIMEOUT_MS,
    commandTimeout: COMMAND_TIMEOUT_MS,
    maxRetriesPerRequest: 1,
  }
  const client =
    spec.kind === 'redis'
      ? new Redis({ ...common, ...auth, host: spec.host, port: spec.port, db: spec.db })
      : new Cluster(
          spec.nodes.map((n) => ({ host: n.host, port: n.port })),
          { lazyConnect: true, redisOptions: { ...common, ...auth } },
        )
  // ioredis reports connection trouble as 'error' events; the store and /readyz report it instead.
  client.on('error', () => {})
  try {
    await client.connect()
    await client.ping()
  } catch (error) {
    client.disconnect()
    throw new StoreError(`cannot connect to ${redactStoreUrl(url)}: ${(error as Error).message}`, {
      cause: error,
    })
  }
  const store = redisStore(client, { prefix: options.prefix })
  const owned: Store = {
    name: store.name,
    apply: (steps, mode) => store.apply(steps, mode),
    refund: (steps) => store.refund(steps),
    block: (steps, durationMs) => store.block(steps, durationMs),
    reset: (steps) => store.reset(steps),
    async close() {
      await store.close()
      await client.quit().catch(() => client.disconnect())
    },
  }
  return {
    store: owned,
    description: redactStoreUrl(url),
    async ping() {
      await client.ping()
    },
  }
}
