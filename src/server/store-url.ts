// Store URLs for the service: `memory`, `redis://host:port[/db]`, `rediss://...`,
// `redis+cluster://host1:port1,host2:port2`. Parsed here, opened with ioredis.
import { InvalidConfigError } from '../errors.js'
import type { StoreHandle } from './service.js'
import { memoryStoreHandle } from './service.js'

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

export interface OpenStoreOptions {
  /** Key prefix in Redis. */
  prefix: string
}

/** Open the store a URL names. Redis stores connect before this resolves (or it rejects). */
export async function openStore(url: string, options: OpenStoreOptions): Promise<StoreHandle> {
  const spec = parseStoreUrl(url)
  if (spec.kind === 'memory') return memoryStoreHandle()
  void options
  throw new InvalidConfigError(`store ${redactStoreUrl(url)}: Redis stores are not available in this build`)
}
