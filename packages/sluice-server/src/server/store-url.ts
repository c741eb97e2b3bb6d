// Store URLs for the service: `memory`, `redis://host:port[/db]`, `rediss://...`,
// `redis+cluster://host1:port1,host2:port2`, `redis+sentinel://host1:26379,host2:26379/mastername`,
// `memcached://host:port`,
// `postgres://user:pass@host:port/db`. Parsed here, and opened (Redis with ioredis, memcached with
// memjs, PostgreSQL with pg) as the StoreHandle the service decides on. TLS settings (`?tls_ca=...`
// or the config's `store.tls`) are read and described in store-tls.ts.
import { InvalidConfigError, memoryStore, StoreError } from 'sluice'
import type { MemjsClientLike } from 'sluice/memcached'
import type { RegionHealth } from 'sluice/redis'
import { forwardStore, type Store } from 'sluice/store'
import type { EncryptingSslMode, StoreTlsSettings, TlsMaterial } from './store-tls.js'
import {
  connectFailure,
  errorText,
  loadTlsMaterial,
  mergeTlsSettings,
  TLS_PARAMETERS,
  takeTlsParameters,
  tlsCause,
  tlsSettingsProblem,
} from './store-tls.js'

export type { StoreTlsSettings } from './store-tls.js'

import { type SentinelClient, sentinelClient } from './store-sentinel.js'

/** The store the service decides on, with a way to ask whether it answers. */
export interface StoreHandle {
  readonly store: Store
  /** For logs and /readyz: `memory`, or the URL with any password hidden. */
  readonly description: string
  /** Resolves when the store answers, rejects when it does not. */
  ping(): Promise<void>
  /**
   * Read the store's TLS files (CA, client certificate and key) again: the connections made from
   * then on use them. Throws `InvalidConfigError` and keeps the previous ones when a file cannot be
   * read. Absent when the store has no TLS files.
   */
  rereadTlsFiles?(): void
  /** Multi-region stores only (`store.regions` in the config): every region's health, the local one first. */
  regions?(): readonly RegionHealth[]
  /** A multi-region store's share of each global policy's limit in this region (the share gauge). */
  shares?(): readonly { policy: string; shareOfLimit: number }[]
}

export interface HostPort {
  readonly host: string
  readonly port: number
}

export type StoreSpec = (
  | { readonly kind: 'memory'; readonly maxKeys?: number }
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
  | SentinelSpec
  | {
      readonly kind: 'memcached'
      readonly host: string
      readonly port: number
      /** SASL credentials, when the server wants them. */
      readonly username: string | undefined
      readonly password: string | undefined
    }
  | {
      readonly kind: 'postgres'
      /** The connection string for pg, every part percent-encoded (password included): never printed. */
      readonly connectionString: string
      /** The URL's `sslmode`, if any (left in the connection string unless TLS settings apply). */
      readonly sslmode: string | undefined
    }
) & {
  /** The URL with any password replaced by `***`: the only form logs, /readyz and errors print. */
  readonly redacted: string
  /** The URL's `tls_*` parameters (file paths and a server name), when it has any. */
  readonly tlsSettings?: StoreTlsSettings
}

/** A Redis master found through Sentinel: the sentinels to ask, the name they know it by. */
export interface SentinelSpec {
  readonly kind: 'sentinel'
  /** TLS to the sentinels and to the master (`rediss+sentinel://`). */
  readonly tls: boolean
  /** The sentinels to ask, in order (port 26379 when the URL gives none). */
  readonly sentinels: readonly HostPort[]
  /** The name the sentinels monitor the master by (the URL's path). */
  readonly masterName: string
  /** The database (`?db=`, default 0). */
  readonly db: number
  /** The master's user name (the URL's auth part). */
  readonly username: string | undefined
  /** The master's password (the URL's auth part). */
  readonly password: string | undefined
  /** The sentinels' own password (`?sentinel_password=`), when they require one. */
  readonly sentinelPassword: string | undefined
}

const USAGE =
  'use memory, redis://host:port[/db], rediss://host:port[/db], redis+cluster://host1:port1,host2:port2' +
  ', redis+sentinel://host1:26379,host2:26379/mastername[?db=N&sentinel_password=...]' +
  ', memcached://host:port or postgres://user:password@host:port/db'

/**
 * The one split of a store URL that parsing and redaction share: `scheme://[auth@]rest`, where the
 * auth part ends at the LAST `@` (a password may hold `@`, `/` and `:`; a host and a db never hold
 * `@`), so `redis://u:p@ss/w@host/0` is user `u`, password `p@ss/w`, host `host`, db 0.
 */
function splitStoreUrl(text: string): { scheme: string; auth: string | undefined; rest: string } | undefined {
  const scheme = /^([a-z+]+):\/\/(.*)$/s.exec(text)
  if (scheme === null) return undefined
  const rest = scheme[2]!
  const at = rest.lastIndexOf('@')
  return at === -1
    ? { scheme: scheme[1]!, auth: undefined, rest }
    : { scheme: scheme[1]!, auth: rest.slice(0, at), rest: rest.slice(at + 1) }
}

/**
 * The URL with any password replaced by `***`, for logs, /readyz and error messages. Works on any
 * text (a URL that does not parse is redacted all the same).
 * @example redactStoreUrl('redis://user:p@ss/w@host:6379') // 'redis://user:***@host:6379'
 */
export function redactStoreUrl(url: string): string {
  // A PostgreSQL connection string may also carry the password as a parameter (`?password=...`),
  // a Sentinel URL the sentinels' password (`?sentinel_password=...`).
  const text = url.trim().replace(/([?&](?:sentinel_)?password=)[^&]*/gi, '$1***')
  const parts = splitStoreUrl(text)
  if (parts === undefined) {
    // Not scheme://...: whatever precedes an `@` may be a password.
    const at = text.lastIndexOf('@')
    return at === -1 ? text : `***@${text.slice(at + 1)}`
  }
  if (parts.auth === undefined) return text
  // PostgreSQL reads `postgres://name@host` as a user name, as libpq does.
  if (POSTGRES_SCHEMES.has(parts.scheme) && !parts.auth.includes(':')) return text
  // `user:password`, `:password`, or the password alone (`redis://secret@host`).
  const colon = parts.auth.indexOf(':')
  const user = colon === -1 ? undefined : parts.auth.slice(0, colon)
  return `${parts.scheme}://${user === undefined ? '' : `${user}:`}***@${parts.rest}`
}

const POSTGRES_SCHEMES = new Set(['postgres', 'postgresql'])
const REDIS_SCHEMES = new Set(['redis', 'rediss', 'redis+cluster', 'rediss+cluster'])

/**
 * A Redis URL's parameters: the TLS ones only, and only on a TLS scheme (on `redis://` they would
 * be ignored silently, which a CA meant to be checked must not be).
 */
function redisTlsParameters(url: string, scheme: string, text: string): StoreTlsSettings | undefined {
  const query = new URLSearchParams(text)
  const settings = takeTlsParameters(query, (why) => bad(url, why))
  for (const name of query.keys())
    throw bad(
      url,
      `unknown parameter ${JSON.stringify(name)} (a Redis URL takes ${TLS_PARAMETERS.join(', ')})`,
    )
  if (settings === undefined) return undefined
  const problem = tlsSettingsProblem({ kind: 'redis', tls: scheme.startsWith('rediss') }, settings)
  if (problem !== undefined) throw bad(url, problem)
  return settings
}

function bad(url: string, why: string): InvalidConfigError {
  return new InvalidConfigError(`store ${JSON.stringify(redactStoreUrl(url))}: ${why}; ${USAGE}`)
}

/** Percent-decoding that keeps a `%` not followed by two hex digits as it is (`50%off`). */
function decodePart(text: string): string {
  return text.replace(/(?:%[0-9A-Fa-f]{2})+/g, (run) => {
    try {
      return decodeURIComponent(run)
    } catch {
      // Not UTF-8 (`%ff`): keep the bytes as written.
      return run
    }
  })
}

function hostPort(url: string, text: string, defaultPort = 6379): HostPort {
  const match = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(?::(\d{1,5}))?$/.exec(text)
  if (match === null) throw bad(url, `${JSON.stringify(text)} is not host:port`)
  const port = match[2] === undefined ? defaultPort : Number(match[2])
  if (port < 1 || port > 65535) throw bad(url, `port ${port} is out of range`)
  return { host: match[1]!.replace(/^\[|\]$/g, ''), port }
}

/**
 * Parse a store URL. Throws `InvalidConfigError` saying what to write instead (with the URL
 * redacted). User name and password may be percent-encoded.
 * @example parseStoreUrl('redis://127.0.0.1:6379/2') // { kind: 'redis', host: '127.0.0.1', port: 6379, db: 2, ... }
 */
export function parseStoreUrl(url: string): StoreSpec {
  const text = url.trim()
  if (text === 'memory' || text === 'memory://') return { kind: 'memory', redacted: 'memory' }
  if (text.startsWith('memory?') || text.startsWith('memory://?')) return parseMemoryUrl(url, text)
  const parts = splitStoreUrl(text)
  if (parts === undefined) throw bad(url, 'not a store URL')
  const { scheme: protocol, auth, rest: afterAuth } = parts
  const redacted = redactStoreUrl(text)
  let username: string | undefined
  let password: string | undefined
  if (auth !== undefined) {
    const colon = auth.indexOf(':')
    const user = decodePart(colon === -1 ? auth : auth.slice(0, colon))
    const pass = colon === -1 ? '' : decodePart(auth.slice(colon + 1))
    username = user === '' ? undefined : user
    password = pass === '' ? undefined : pass
    if (colon === -1) {
      // `redis://secret@host` is the common password-only form.
      password = username
      username = undefined
    }
  }
  const queryAt = afterAuth.indexOf('?')
  const location = queryAt === -1 ? afterAuth : afterAuth.slice(0, queryAt)
  const slash = location.indexOf('/')
  const hosts = slash === -1 ? location : location.slice(0, slash)
  const path = slash === -1 ? '' : location.slice(slash + 1)
  if (hosts === '') throw bad(url, 'no host')
  if (POSTGRES_SCHEMES.has(protocol)) return parsePostgresUrl(url, auth, afterAuth, redacted)
  if (protocol === 'redis+sentinel' || protocol === 'rediss+sentinel') {
    const tls = protocol === 'rediss+sentinel'
    return { ...parseSentinelUrl(url, tls, afterAuth), username, password, redacted }
  }
  const tlsSettings =
    queryAt === -1 || !REDIS_SCHEMES.has(protocol)
      ? undefined
      : redisTlsParameters(url, protocol, afterAuth.slice(queryAt + 1))
  const tlsPart = tlsSettings === undefined ? {} : { tlsSettings }
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
      redacted,
      ...tlsPart,
    }
  }
  if (protocol === 'redis+cluster' || protocol === 'rediss+cluster') {
    if (path !== '') throw bad(url, 'Redis Cluster has no databases; remove the /db')
    const nodes = hosts.split(',').map((h) => hostPort(url, h.trim()))
    return {
      kind: 'cluster',
      tls: protocol === 'rediss+cluster',
      nodes,
      username,
      password,
      redacted,
      ...tlsPart,
    }
  }
  if (protocol === 'memcached') {
    if (queryAt !== -1) throw bad(url, 'memcached:// takes no parameters')
    if (hosts.includes(',')) throw bad(url, 'one memcached server per store')
    if (path !== '') throw bad(url, 'memcached has no databases; remove the path')
    const { host, port } = hostPort(url, hosts, 11211)
    if (host.includes(':')) throw bad(url, 'memjs cannot reach an IPv6 address; use a host name')
    return { kind: 'memcached', host, port, username, password, redacted }
  }
  throw bad(url, `unknown scheme ${protocol}://`)
}

/**
 * The part of `redis+sentinel://[user:pass@]host1:26379,host2:26379/mastername[?db=N&sentinel_password=...]`
 * after the auth: the sentinels (port 26379 by default), the master's name and the parameters.
 */
function parseSentinelUrl(
  url: string,
  tls: boolean,
  afterAuth: string,
): Omit<SentinelSpec, 'username' | 'password'> {
  // The query first: it may hold a `/` (in the sentinel password), and the master name may be missing.
  const q = afterAuth.indexOf('?')
  const beforeQuery = q === -1 ? afterAuth : afterAuth.slice(0, q)
  const slash = beforeQuery.indexOf('/')
  const hosts = slash === -1 ? beforeQuery : beforeQuery.slice(0, slash)
  const path = slash === -1 ? '' : beforeQuery.slice(slash + 1)
  if (hosts === '') throw bad(url, 'no host')
  const sentinels = hosts.split(',').map((h) => hostPort(url, h.trim(), 26379))
  const masterName = decodePart(path)
  if (masterName === '') throw bad(url, 'name the master the sentinels monitor: /mastername')
  if (!/^[A-Za-z0-9._:-]{1,128}$/.test(masterName))
    throw bad(url, `${JSON.stringify(masterName)} is not a master name (letters, digits, '.', '_', ':', '-')`)
  // Values are percent-decoded like the auth part (a `+` stays a `+`: a password may hold one).
  const parameters = new Map<string, string>()
  for (const pair of q === -1 ? [] : afterAuth.slice(q + 1).split('&')) {
    if (pair === '') continue
    const eq = pair.indexOf('=')
    const name = eq === -1 ? pair : pair.slice(0, eq)
    if (!SENTINEL_PARAMETERS.includes(name))
      throw bad(url, `unknown Sentinel parameter ${JSON.stringify(name)} (${SENTINEL_PARAMETERS.join(', ')})`)
    if (parameters.has(name)) throw bad(url, `${name} is given twice`)
    parameters.set(name, eq === -1 ? '' : decodePart(pair.slice(eq + 1)))
  }
  const dbText = parameters.get('db')
  if (dbText !== undefined && !/^\d{1,2}$/.test(dbText))
    throw bad(url, `db ${JSON.stringify(dbText)} is not a number`)
  const sentinelPassword = parameters.get('sentinel_password')
  return {
    kind: 'sentinel',
    tls,
    sentinels,
    masterName,
    db: dbText === undefined ? 0 : Number(dbText),
    sentinelPassword: sentinelPassword === '' ? undefined : sentinelPassword,
  }
}

const SENTINEL_PARAMETERS = ['db', 'sentinel_password']

/** `memory?maxKeys=N`: the memory store's bound on keys held, all policies together. */
function parseMemoryUrl(url: string, text: string): StoreSpec {
  const query = new URLSearchParams(text.slice(text.indexOf('?') + 1))
  for (const name of query.keys())
    if (name !== 'maxKeys')
      throw bad(url, `unknown memory store option ${JSON.stringify(name)} (maxKeys is the one)`)
  const raw = query.get('maxKeys')
  if (raw === null) return { kind: 'memory', redacted: 'memory' }
  const maxKeys = /^\d{1,15}$/.test(raw) ? Number(raw) : Number.NaN
  if (!(maxKeys >= 2)) throw bad(url, `maxKeys must be a whole number >= 2, got ${JSON.stringify(raw)}`)
  return { kind: 'memory', maxKeys, redacted: `memory?maxKeys=${maxKeys}` }
}

/** A memory store with a trivial ping: what `npm start` runs on. */
export function memoryStoreHandle(maxKeys?: number): StoreHandle {
  const store = maxKeys === undefined ? memoryStore() : memoryStore({ maxKeys })
  const description = maxKeys === undefined ? 'memory' : `memory?maxKeys=${maxKeys}`
  return { store, description, ping: async () => {} }
}

/** Where a Redis connection's changes are logged: a pino logger fits. */
export interface ConnectionLogger {
  /** A connection that served is lost: once, with its cause. */
  warn(details: Record<string, unknown>, message: string): void
  /** The lost connection is back: once. */
  info(details: Record<string, unknown>, message: string): void
}

export interface OpenStoreOptions {
  /** Key prefix in Redis. */
  prefix: string
  /**
   * Told once when a Redis connection that served is lost (with its cause) and once when it is back,
   * never per reconnect attempt. Without one, nothing is logged.
   */
  logger?: ConnectionLogger
  /**
   * TLS settings from elsewhere than the URL (the config's `store.tls`), joined to the URL's own
   * `tls_*` parameters; a setting in both is refused.
   */
  tls?: StoreTlsSettings
  /**
   * The Redis store's `compactValues` (the config's `store.compactValues`); refused for other stores.
   * Left out: the store's default.
   */
  compactValues?: boolean
}

/** pg's own TLS file parameters, which would replace the options the service builds. */
const PG_FILE_PARAMETERS = /[?&](sslrootcert|sslcert|sslkey)=/

/**
 * Whether the store `spec` names takes `compactValues` (the config's `store.compactValues`): only a
 * Redis store does. Throws `InvalidConfigError` naming the URL redacted.
 */
export function storeCompactValues(spec: StoreSpec, compactValues: boolean | undefined): void {
  if (compactValues === undefined) return
  if (spec.kind === 'redis' || spec.kind === 'cluster' || spec.kind === 'sentinel') return
  throw new InvalidConfigError(
    `store ${JSON.stringify(spec.redacted)}: store.compactValues: only a Redis store has compactValues (redis://, rediss://, redis+cluster://, redis+sentinel://)`,
  )
}

/**
 * The TLS settings a store opens with: the URL's `tls_*` parameters and `fromConfig` (the config's
 * `store.tls`) together, checked against the store (a TLS scheme, an encrypting sslmode). Throws
 * `InvalidConfigError` naming the URL redacted.
 */
export function storeTlsSettings(
  spec: StoreSpec,
  fromConfig?: StoreTlsSettings,
): StoreTlsSettings | undefined {
  let settings: StoreTlsSettings | undefined
  try {
    settings = mergeTlsSettings('tlsSettings' in spec ? spec.tlsSettings : undefined, fromConfig)
  } catch (error) {
    throw bad(spec.redacted, (error as Error).message.replace(/^store: /, ''))
  }
  if (settings === undefined) return undefined
  const problem = tlsSettingsProblem(spec, settings)
  if (problem !== undefined) throw bad(spec.redacted, problem)
  if (spec.kind === 'postgres') {
    const own = PG_FILE_PARAMETERS.exec(spec.connectionString)
    if (own !== null)
      throw bad(
        spec.redacted,
        `${own[1]} is pg's own; with TLS settings use tls_ca, tls_cert and tls_key instead`,
      )
  }
  return settings
}

const CONNECT_TIMEOUT_MS = 5000
const COMMAND_TIMEOUT_MS = 1000
/** The most a reconnect attempt waits after the previous one failed. */
const RECONNECT_MAX_DELAY_MS = 500

/**
 * `postgres://[user[:password]@]host[:port][/database][?params]`, read the way the Redis URLs are
 * (the auth part ends at the last `@`, parts percent-decoded), then written out again with every
 * part percent-encoded, so pg connects to the very host this parse found (a `/` or `@` in a
 * password would otherwise move pg's idea of the host).
 */
function parsePostgresUrl(
  url: string,
  auth: string | undefined,
  afterAuth: string,
  redacted: string,
): StoreSpec {
  const q = afterAuth.indexOf('?')
  const { query, sslmode, tlsSettings } = postgresParameters(url, q === -1 ? '' : afterAuth.slice(q + 1))
  const beforeQuery = q === -1 ? afterAuth : afterAuth.slice(0, q)
  const slash = beforeQuery.indexOf('/')
  const hostText = slash === -1 ? beforeQuery : beforeQuery.slice(0, slash)
  const database = slash === -1 ? '' : decodePart(beforeQuery.slice(slash + 1))
  if (hostText.includes(',')) throw bad(url, 'one PostgreSQL host per URL')
  const match = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(?::(\d{1,5}))?$/.exec(hostText)
  if (match === null) throw bad(url, `${JSON.stringify(hostText)} is not host:port`)
  const port = match[2] === undefined ? 5432 : Number(match[2])
  if (port < 1 || port > 65535) throw bad(url, `port ${port} is out of range`)
  let user = ''
  let password = ''
  if (auth !== undefined) {
    const colon = auth.indexOf(':')
    user = decodePart(colon === -1 ? auth : auth.slice(0, colon))
    password = colon === -1 ? '' : decodePart(auth.slice(colon + 1))
  }
  const credentials =
    user === '' && password === ''
      ? ''
      : `${encodeURIComponent(user)}${password === '' ? '' : `:${encodeURIComponent(password)}`}@`
  const path = database === '' ? '' : `/${encodeURIComponent(database)}`
  return {
    kind: 'postgres',
    connectionString: `postgres://${credentials}${match[1]}:${port}${path}${query}`,
    sslmode,
    redacted,
    ...(tlsSettings === undefined ? {} : { tlsSettings }),
  }
}

/**
 * A PostgreSQL URL's parameters: the `tls_*` ones taken out (pg would not know them), `sslmode`
 * read; the rest kept, as written, for pg.
 */
function postgresParameters(
  url: string,
  text: string,
): { query: string; sslmode: string | undefined; tlsSettings: StoreTlsSettings | undefined } {
  if (!/(?:^|&)(?:tls_|sslmode=)/.test(text))
    return { query: text === '' ? '' : `?${text}`, sslmode: undefined, tlsSettings: undefined }
  const params = new URLSearchParams(text)
  const tlsSettings = takeTlsParameters(params, (why) => bad(url, why))
  const sslmode = params.get('sslmode') ?? undefined
  if (tlsSettings !== undefined) {
    const problem = tlsSettingsProblem({ kind: 'postgres', sslmode }, tlsSettings)
    if (problem !== undefined) throw bad(url, problem)
  }
  // Written back only without TLS parameters: the rest of the query is pg's to read as written.
  const kept = tlsSettings === undefined ? text : params.toString()
  return { query: kept === '' ? '' : `?${kept}`, sslmode, tlsSettings }
}

/** The ioredis module (an optional peer, loaded only when a Redis store is opened). */
export type IoredisModule = Pick<typeof import('ioredis'), 'Redis' | 'Cluster'>

/** Load ioredis, or fail with a `StoreError` saying what to install (the CLI prints this one line). */
export function loadIoredis(): Promise<IoredisModule> {
  return import('ioredis').catch((error: unknown) => {
    const code = (error as { code?: unknown }).code
    if (
      (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') &&
      String(error).includes("'ioredis'")
    )
      throw new StoreError('the redis store needs ioredis: npm install ioredis', { cause: error })
    throw error
  })
}

// A decision must not wait on a dead Redis (docs/reliability.md): while disconnected a command
// fails at once, so the breaker opens on the first failures instead of after each one waited the
// store timeout in the offline queue; a command cut off by a lost connection is not sent again
// (its decision was already made by the fallback); reconnect attempts stay close together.
// A Cluster's node connections keep their own queue: they connect on their first command, which
// would otherwise be refused; the Cluster's queue is the one turned off.
const FAIL_FAST = {
  lazyConnect: true,
  connectTimeout: CONNECT_TIMEOUT_MS,
  commandTimeout: COMMAND_TIMEOUT_MS,
  autoResendUnfulfilledCommands: false,
  maxRetriesPerRequest: 0,
  retryStrategy: (attempts: number) => Math.min(attempts * 50, RECONNECT_MAX_DELAY_MS),
}

/**
 * A Redis URL's user, password and TLS as ioredis options. `tlsOptions`: the one options object
 * ioredis keeps and reads at each connection (the TLS files' material, which a reload fills again);
 * a `rediss` URL without files gets the system's CAs.
 */
function redisAuth(
  spec: Extract<StoreSpec, { kind: 'redis' | 'cluster' | 'sentinel' }>,
  tlsOptions?: object,
): { username?: string; password?: string; tls?: object } {
  return {
    ...(spec.username === undefined ? {} : { username: spec.username }),
    ...(spec.password === undefined ? {} : { password: spec.password }),
    ...(spec.tls ? { tls: tlsOptions ?? {} } : {}),
  }
}

/** A Redis spec's client (not yet connected: `lazyConnect`), with the service's fail-fast options. */
export function redisClient(
  spec: Extract<StoreSpec, { kind: 'redis' | 'cluster' }>,
  { Redis, Cluster }: IoredisModule,
  tlsOptions?: object,
): InstanceType<IoredisModule['Redis']> | InstanceType<IoredisModule['Cluster']> {
  return spec.kind === 'redis'
    ? new Redis({
        ...FAIL_FAST,
        ...redisAuth(spec, tlsOptions),
        enableOfflineQueue: false,
        host: spec.host,
        port: spec.port,
        db: spec.db,
      })
    : new Cluster(
        spec.nodes.map((n) => ({ host: n.host, port: n.port })),
        {
          lazyConnect: true,
          enableOfflineQueue: false,
          redisOptions: { ...FAIL_FAST, ...redisAuth(spec, tlsOptions) },
        },
      )
}

/**
 * Open the store a URL names. Redis stores connect (ioredis, loaded only then) and load their
 * scripts before this resolves, or it rejects with a `StoreError`. Closing the handle's store also
 * closes the client.
 */
export async function openStore(url: string, options: OpenStoreOptions): Promise<StoreHandle> {
  const spec = parseStoreUrl(url)
  const tlsSettings = storeTlsSettings(spec, options.tls)
  storeCompactValues(spec, options.compactValues)
  if (spec.kind === 'memory') return memoryStoreHandle(spec.maxKeys)
  if (spec.kind === 'memcached') return openMemcached(spec, options)
  // Read before any client exists: a file that cannot be read stops the start with its path.
  const material =
    tlsSettings === undefined
      ? undefined
      : loadTlsMaterial(
          tlsSettings,
          spec.kind === 'postgres' ? (spec.sslmode as EncryptingSslMode) : undefined,
        )
  const rereadPart = material === undefined ? {} : { rereadTlsFiles: () => material.reread() }
  if (spec.kind === 'postgres')
    return { ...(await openPostgres(spec.connectionString, spec.redacted, material)), ...rereadPart }
  const ioredis = await loadIoredis()
  const { redisStore } = await import('sluice/redis')
  let client: InstanceType<IoredisModule['Redis']> | InstanceType<IoredisModule['Cluster']>
  let sentinel: SentinelClient | undefined
  if (spec.kind === 'sentinel') {
    const timing = {
      sentinelCommandTimeoutMs: COMMAND_TIMEOUT_MS,
      reconnectMaxDelayMs: RECONNECT_MAX_DELAY_MS,
    }
    sentinel = sentinelClient(spec, { ...FAIL_FAST, ...redisAuth(spec) }, timing, (error) =>
      options.logger?.warn(
        { store: spec.redacted, error: error.message },
        `store ${spec.redacted}: the master answered READONLY (demoted to a replica); asking the sentinels for the master`,
      ),
    )
    const sentinelRedis = new ioredis.Redis(sentinel.options)
    sentinel.watch(sentinelRedis)
    client = sentinelRedis
  } else client = redisClient(spec, ioredis, material?.options)
  const connection = watchConnection(client, spec.redacted, options.logger)
  // Under TLS 1.3 a server that wants a client certificate checks it after the handshake, and the
  // client often sees only the reset, not the server's alert: say what it most likely means.
  const withoutClientCertificate = (cause: string): string =>
    spec.tls && material?.options.cert === undefined && /ECONNRESET|EPIPE|socket hang up/.test(cause)
      ? `${cause} (the server closed the TLS connection: if it requires a client certificate, set tls_cert and tls_key)`
      : cause
  const store = redisStore(client, {
    prefix: options.prefix,
    ...(options.compactValues === undefined ? {} : { compactValues: options.compactValues }),
  })
  try {
    await client.connect()
    // The scripts loaded (and a Cluster's slot secret read) before the service can answer /readyz:
    // the first decision is then one round trip, well within the store timeout.
    await store.ready()
  } catch (error) {
    client.disconnect()
    let cause =
      (await sentinel?.cause(error)) ??
      withoutClientCertificate(connectionCause(error, connection.lastError()))
    if (spec.kind === 'cluster' && spec.tls && tlsCause(connection.lastError()) === undefined) {
      // The Cluster hides a refused handshake behind "Failed to refresh slots cache.": shake hands
      // with the first node the same way to find it.
      const first = spec.nodes[0]!
      const failure = await connectFailure(
        first.host,
        first.port,
        material?.options ?? {},
        CONNECT_TIMEOUT_MS,
      )
      if (failure !== undefined) cause = `${describeError(failure)} (at ${first.host}:${first.port})`
    }
    throw new StoreError(`cannot connect to ${spec.redacted}: ${cause}`, { cause: error })
  }
  connection.serving()
  sentinel?.serving()
  // The service's handle owns the client: closing the store also closes it.
  const owned = forwardStore(store, {
    async close() {
      await store.close()
      await client.quit().catch(() => client.disconnect())
    },
  })
  return {
    store: owned,
    description: spec.redacted,
    // Also loads a script Redis lost and writes back a lost slot secret, so a probe repairs both.
    // While disconnected it fails with the connection's own cause (a certificate), not ioredis's.
    async ping() {
      try {
        await store.ready()
      } catch (error) {
        throw new StoreError(withoutClientCertificate(connectionCause(error, connection.lastError())), {
          cause: error,
        })
      }
    },
    ...rereadPart,
  }
}

/** What `watchConnection` needs of an ioredis Redis or Cluster. */
interface ConnectionEvents {
  on(event: 'error' | 'node error' | 'ready', listener: (error?: Error) => void): unknown
}

/**
 * Follow a client's connection: keep its last error (ioredis reports a refused connection or a
 * certificate it rejects only as an 'error' event, and its `connect()` then rejects with
 * "Connection is closed."), and once it has served, log a lost connection once with its cause and
 * its return once, however many reconnect attempts fail in between.
 */
export function watchConnection(
  client: ConnectionEvents,
  redacted: string,
  logger: ConnectionLogger | undefined,
): { lastError(): Error | undefined; serving(): void } {
  let last: Error | undefined
  let state: 'connecting' | 'up' | 'down' = 'connecting'
  // TLS failures already logged while down: a server back with a certificate the client refuses
  // (rotated, expired) is said once, not hidden behind the refused connections that came first.
  const toldWhileDown = new Set<string>()
  const failed = (error?: Error) => {
    if (error === undefined) return
    last = error
    const tls = tlsCause(error)
    if (state === 'down' && tls !== undefined && !toldWhileDown.has(tls)) {
      toldWhileDown.add(tls)
      logger?.warn(
        { store: redacted, error: describeError(error) },
        `store ${redacted}: reconnect refused (${describeError(error)})`,
      )
    }
    if (state !== 'up') return
    state = 'down'
    toldWhileDown.clear()
    if (tls !== undefined) toldWhileDown.add(tls)
    logger?.warn(
      { store: redacted, error: describeError(error) },
      `store ${redacted}: connection lost (${describeError(error)}); reconnecting, decisions follow each policy's onStoreError`,
    )
  }
  // Without an 'error' listener ioredis prints `Unhandled error event` on every attempt.
  client.on('error', failed)
  // A Cluster reports a node's connection trouble as 'node error'.
  client.on('node error', failed)
  client.on('ready', () => {
    if (state !== 'down') return
    state = 'up'
    logger?.info({ store: redacted }, `store ${redacted}: connection back`)
  })
  return {
    lastError: () => last,
    serving() {
      state = 'up'
    },
  }
}

/** An error as the logs and start failures say it: its TLS cause first when it has one, then its text. */
function describeError(error: Error): string {
  const tls = tlsCause(error)
  return tls === undefined ? errorText(error) : `${tls}: ${errorText(error)}`
}

/**
 * Why a connection failed, in words a user can act on: the connection's own error (a refused port,
 * a certificate) rather than ioredis's "Connection is closed." that follows it.
 */
export function connectionCause(error: unknown, connectionError: Error | undefined): string {
  const thrown = error instanceof StoreError && error.cause !== undefined ? error.cause : error
  const message = thrown instanceof Error ? describeError(thrown) : String(thrown)
  if (connectionError === undefined) return message
  return /connection is closed|none of startup nodes|stream isn't writeable|failed to refresh slots cache/i.test(
    message,
  )
    ? describeError(connectionError)
    : message
}

/** What the service needs of the memjs module. */
interface MemjsModule {
  Client: {
    create(servers: string, options: Record<string, unknown>): MemjsClientLike & { close(): void }
  }
}

/** A memcached store over memjs (loaded only here), checked with a `version` before it serves. */
async function openMemcached(
  spec: Extract<StoreSpec, { kind: 'memcached' }>,
  options: OpenStoreOptions,
): Promise<StoreHandle> {
  // memjs is an optional peer: without it, say what to install (the CLI prints this one line).
  const loaded = (await import('memjs').catch((error: unknown) => {
    const code = (error as { code?: unknown }).code
    if ((code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') && String(error).includes("'memjs'"))
      throw new StoreError('the memcached store needs memjs: npm install memjs', { cause: error })
    throw error
  })) as MemjsModule & { default?: MemjsModule }
  const memjs = loaded.default ?? loaded
  const [{ memcachedStore }, { pingMemcached }] = await Promise.all([
    import('sluice/memcached'),
    import('sluice/internal'),
  ])
  // Credentials go in the options, never in the server string (a password may hold `@` or `:`).
  const client = memjs.Client.create(`${spec.host}:${spec.port}`, {
    ...(spec.username === undefined ? {} : { username: spec.username }),
    ...(spec.password === undefined ? {} : { password: spec.password }),
    // A decision must not wait on a dead memcached: one try, a short timeout (seconds).
    retries: 1,
    timeout: COMMAND_TIMEOUT_MS / 1000,
    conntimeout: CONNECT_TIMEOUT_MS / 1000,
    // memjs logs failures to the console; the store and /readyz report them instead.
    logger: { log: () => {} },
  })
  try {
    await pingMemcached(client)
  } catch (error) {
    client.close()
    throw new StoreError(`cannot connect to ${spec.redacted}: ${(error as Error).message}`, { cause: error })
  }
  const store = memcachedStore(client, { prefix: options.prefix })
  const owned = forwardStore(store, {
    async close() {
      await store.close()
      client.close()
    },
  })
  return {
    store: owned,
    description: spec.redacted,
    ping: () => pingMemcached(client),
  }
}

/**
 * A PostgreSQL store on a pg Pool of its own (pg, loaded only then), the table `sluice_limits`
 * created if missing. Resolves once the database answered, or rejects with a `StoreError`.
 */
async function openPostgres(
  connectionString: string,
  redacted: string,
  material: TlsMaterial | undefined,
): Promise<StoreHandle> {
  // pg is an optional peer: without it, say what to install (the CLI prints this one line).
  const pg = await import('pg').catch((error: unknown) => {
    const code = (error as { code?: unknown }).code
    if ((code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') && String(error).includes("'pg'"))
      throw new StoreError('the postgres store needs pg: npm install pg', { cause: error })
    throw error
  })
  const { postgresStore } = await import('sluice/postgres')
  const Pool = (pg.default ?? pg).Pool
  // A decision must not wait on a dead database: connecting and each query fail fast instead.
  const pool = new Pool({
    // With TLS settings the service builds pg's `ssl` from sslmode itself: pg would replace it with
    // its own reading of sslmode.
    connectionString:
      material === undefined
        ? connectionString
        : connectionString.replace(/([?&])sslmode=[^&]*&?/, '$1').replace(/[?&]$/, ''),
    ...(material === undefined ? {} : { ssl: material.options }),
    max: 16,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    query_timeout: COMMAND_TIMEOUT_MS,
  })
  // Idle clients that lose their connection emit 'error' on the pool; the store reports failures instead.
  pool.on('error', () => {})
  const store = postgresStore(pool, {})
  try {
    // The first call creates the table and functions if missing (and clears rows that ended).
    await store.cleanup()
  } catch (error) {
    await store.close()
    await pool.end().catch(() => {})
    // pg's messages never hold the password; the URL is printed redacted.
    throw new StoreError(`cannot connect to ${redacted}: ${describeError(error as Error)}`, { cause: error })
  }
  const owned = forwardStore(store, {
    async close() {
      await store.close()
      await pool.end().catch(() => {})
    },
  })
  return {
    store: owned,
    description: redacted,
    async ping() {
      await pool.query('SELECT 1')
    },
  }
}
