// TLS to the service's stores: the CA, client certificate and key, and server name that a store URL
// (`tls_ca`, `tls_cert`, `tls_key`, `tls_servername`) or the config's `store.tls` names; the files
// read when the store opens and again on a reload; a failed handshake said in the operator's words.
import { readFileSync } from 'node:fs'
import { createConnection } from 'node:net'
import { type ConnectionOptions, checkServerIdentity, connect, type PeerCertificate } from 'node:tls'
import { InvalidConfigError } from 'sluice'

/** TLS settings of a store: file paths (read by the service) and the name the server's certificate must hold. */
export interface StoreTlsSettings {
  /** PEM file of the CA(s) the server's certificate must chain to (instead of the system's). */
  readonly ca?: string
  /** PEM file of the client certificate, for a server that asks for one (with `key`). */
  readonly cert?: string
  /** PEM file of the client certificate's private key. */
  readonly key?: string
  /** The name the server's certificate must hold (and the SNI sent), when it is not the URL's host. */
  readonly servername?: string
}

/** URL parameter -> setting. */
const PARAMETERS = {
  tls_ca: 'ca',
  tls_cert: 'cert',
  tls_key: 'key',
  tls_servername: 'servername',
} as const satisfies Record<string, keyof StoreTlsSettings>

type Parameter = keyof typeof PARAMETERS

/** The URL parameters, in the order messages list them. */
export const TLS_PARAMETERS = Object.keys(PARAMETERS) as Parameter[]

const PARAMETER_OF: Record<keyof StoreTlsSettings, Parameter> = {
  ca: 'tls_ca',
  cert: 'tls_cert',
  key: 'tls_key',
  servername: 'tls_servername',
}

/** The PostgreSQL `sslmode`s that encrypt, and so can take TLS settings. */
const ENCRYPTING_SSLMODES = ['require', 'verify-ca', 'verify-full'] as const
export type EncryptingSslMode = (typeof ENCRYPTING_SSLMODES)[number]

/**
 * Take the `tls_*` parameters out of `query` (they are Sluice's, not the client's); undefined when
 * there is none. An empty value is a mistake, not an unset setting.
 */
export function takeTlsParameters(
  query: URLSearchParams,
  problem: (why: string) => Error,
): StoreTlsSettings | undefined {
  const settings: Record<string, string> = {}
  for (const name of TLS_PARAMETERS) {
    const values = query.getAll(name)
    if (values.length === 0) continue
    if (values.length > 1) throw problem(`${name} is given ${values.length} times`)
    if (values[0]!.trim() === '') throw problem(`${name} is empty`)
    settings[PARAMETERS[name]] = values[0]!
    query.delete(name)
  }
  return Object.keys(settings).length === 0 ? undefined : settings
}

/**
 * One set of settings from the URL's parameters and the config's `store.tls`; a setting given in
 * both is refused (which one was meant cannot be known).
 */
export function mergeTlsSettings(
  fromUrl: StoreTlsSettings | undefined,
  fromConfig: StoreTlsSettings | undefined,
): StoreTlsSettings | undefined {
  if (fromConfig === undefined) return fromUrl
  if (fromUrl === undefined) return fromConfig
  for (const name of Object.keys(fromConfig) as (keyof StoreTlsSettings)[])
    if (fromUrl[name] !== undefined)
      throw new InvalidConfigError(
        `store: ${PARAMETER_OF[name]} in the URL and store.tls.${name} both set the ${name}; keep one`,
      )
  return { ...fromUrl, ...fromConfig }
}

/** Where TLS settings are going: the store's kind, whether its scheme encrypts, PostgreSQL's sslmode. */
export interface TlsTarget {
  readonly kind: string
  readonly tls?: boolean
  readonly sslmode?: string | undefined
}

/** What is wrong with giving `settings` to this store, or undefined when they fit. */
export function tlsSettingsProblem(target: TlsTarget, settings: StoreTlsSettings): string | undefined {
  if ((settings.cert === undefined) !== (settings.key === undefined))
    return 'a client certificate needs both tls_cert and tls_key (store.tls: cert and key)'
  if (target.kind === 'redis' || target.kind === 'cluster') {
    if (target.tls !== true)
      return 'TLS settings need a TLS URL: rediss:// or rediss+cluster://, not redis://'
    return undefined
  }
  if (target.kind === 'postgres') {
    if (!ENCRYPTING_SSLMODES.includes(target.sslmode as EncryptingSslMode))
      return `TLS settings need sslmode=verify-full (or verify-ca, require) in the URL, got ${
        target.sslmode === undefined ? 'no sslmode' : `sslmode=${target.sslmode}`
      }`
    return undefined
  }
  return `the ${target.kind} store has no TLS settings; they apply to rediss://, rediss+cluster:// and postgres://...?sslmode=verify-full`
}

/** One line for `sluice check` and logs: paths and the name, never a file's contents. */
export function describeTlsSettings(settings: StoreTlsSettings): string {
  const parts: string[] = []
  parts.push(`ca ${settings.ca ?? '(system CAs)'}`)
  if (settings.cert !== undefined) parts.push(`client cert ${settings.cert}`, `key ${settings.key}`)
  if (settings.servername !== undefined) parts.push(`servername ${settings.servername}`)
  return parts.join(', ')
}

/** TLS options handed to a client once, whose files a reload reads again in place. */
export interface TlsMaterial {
  /**
   * The options object the client keeps. ioredis and pg read it at every new connection, so
   * reading the files again into this same object reaches the next reconnect.
   */
  readonly options: ConnectionOptions
  /** Read the files again; throws `InvalidConfigError` (and keeps the previous contents) when one cannot be read. */
  reread(): void
}

function readPem(name: keyof StoreTlsSettings, path: string): Buffer {
  try {
    return readFileSync(path)
  } catch (error) {
    throw new InvalidConfigError(
      `store TLS: cannot read ${PARAMETER_OF[name]} ${path} (${(error as Error).message})`,
      { cause: error },
    )
  }
}

/**
 * Read the files `settings` names into TLS options for a client. With `verify` (PostgreSQL's
 * sslmode), `require` and `verify-ca` check the chain only, as libpq does; `require` without a CA
 * checks nothing. The server name replaces the URL's host in the identity check.
 */
export function loadTlsMaterial(settings: StoreTlsSettings, sslmode?: EncryptingSslMode): TlsMaterial {
  const options: ConnectionOptions = {}
  const read = () => {
    // All files first: one that cannot be read leaves the options as they were.
    const ca = settings.ca === undefined ? undefined : readPem('ca', settings.ca)
    const cert = settings.cert === undefined ? undefined : readPem('cert', settings.cert)
    const key = settings.key === undefined ? undefined : readPem('key', settings.key)
    if (ca !== undefined) options.ca = ca
    if (cert !== undefined) options.cert = cert
    if (key !== undefined) options.key = key
  }
  read()
  const { servername } = settings
  if (servername !== undefined) {
    options.servername = servername
    // pg sets `servername` to the host itself for a host name; the identity check stays on ours.
    options.checkServerIdentity = (_host: string, cert: PeerCertificate) =>
      checkServerIdentity(servername, cert)
  }
  if (sslmode === 'verify-ca' || (sslmode === 'require' && settings.ca !== undefined))
    options.checkServerIdentity = () => undefined
  else if (sslmode === 'require') options.rejectUnauthorized = false
  return { options, reread: read }
}

/** A TLS failure's cause in the operator's words, by Node's error code. */
const TLS_CAUSES: Record<string, string> = {
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'the server certificate is signed by an unknown CA (set tls_ca)',
  UNABLE_TO_GET_ISSUER_CERT: 'the server certificate is signed by an unknown CA (set tls_ca)',
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: 'the server certificate is signed by an unknown CA (set tls_ca)',
  SELF_SIGNED_CERT_IN_CHAIN: 'the server certificate chains to a self-signed CA not in tls_ca',
  DEPTH_ZERO_SELF_SIGNED_CERT: 'the server certificate is self-signed and not in tls_ca',
  ERR_TLS_CERT_ALTNAME_INVALID:
    'the server certificate does not name this host (name mismatch; tls_servername sets the name to expect)',
  CERT_HAS_EXPIRED: 'the server certificate has expired',
  CERT_NOT_YET_VALID: 'the server certificate is not valid yet',
  ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED:
    'the server requires a client certificate (set tls_cert and tls_key)',
  ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE: 'the server refused the client certificate',
  ERR_SSL_TLSV1_ALERT_UNKNOWN_CA: 'the server does not trust the client certificate (unknown CA)',
  ERR_SSL_WRONG_VERSION_NUMBER: 'the server does not speak TLS on this port',
}

/**
 * `TLS: <cause>` for an error Node's TLS layer raised, also when a store wrapped it (its `cause`),
 * or undefined for any other error.
 */
export function tlsCause(error: unknown): string | undefined {
  for (let current = error, depth = 0; current instanceof Error && depth < 4; depth++) {
    const code = (current as { code?: unknown }).code
    const cause = typeof code === 'string' ? TLS_CAUSES[code] : undefined
    if (cause !== undefined) return `TLS: ${cause}`
    current = current.cause
  }
  return undefined
}

/**
 * Why a connection to `host:port` fails, over TLS with `tls` or plain TCP without: the error
 * (`connect ECONNREFUSED ...`, a certificate refused), one saying no answer came within `timeoutMs`,
 * or undefined when it connects. For clients that drop the connection's own error: ioredis's
 * Cluster reports only "Failed to refresh slots cache.", its Sentinel mode "Connection is closed.".
 */
export function connectFailure(
  host: string,
  port: number,
  tls: ConnectionOptions | undefined,
  timeoutMs: number,
): Promise<Error | undefined> {
  return new Promise((resolve) => {
    const socket = tls === undefined ? createConnection({ host, port }) : connect({ ...tls, host, port })
    const done = (error: Error | undefined) => {
      clearTimeout(timer)
      socket.destroy()
      resolve(error)
    }
    const timer = setTimeout(
      () => done(new Error(`no answer from ${host}:${port} within ${timeoutMs} ms`)),
      timeoutMs,
    )
    socket.once(tls === undefined ? 'connect' : 'secureConnect', () => done(undefined))
    socket.once('error', (error) => done(error))
  })
}

/** An error's message with its code when the message does not already hold it (`ECONNREFUSED`). */
export function errorText(error: Error): string {
  const code = (error as { code?: unknown }).code
  return typeof code === 'string' && !error.message.includes(code)
    ? `${error.message} (${code})`
    : error.message
}
