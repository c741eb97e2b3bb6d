// TLS on the service's own listeners: the `tls:` block shared by `http:` and `grpc:` (certificate,
// key, an optional CA for client certificates), and the secure context made from its files. The
// files are read at start and on every reload; their contents are never logged or printed.
import { readFileSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import type { SecureContextOptions } from 'node:tls'
import { createSecureContext } from 'node:tls'
import { InvalidConfigError } from 'sluice'
import { z } from 'zod'
import type { Locator } from './config-errors.js'

const PATH = 'must be the path of a PEM file'

/** `http.tls` and `grpc.tls`: `{ cert, key, ca?, requireClientCert? }`. */
export const listenerTlsSchema = z
  .strictObject({
    cert: z.string({ error: PATH }).min(1, { error: PATH }),
    key: z.string({ error: PATH }).min(1, { error: PATH }),
    ca: z.string({ error: PATH }).min(1, { error: PATH }).optional(),
    requireClientCert: z.boolean({ error: 'must be true or false' }).optional(),
  })
  .optional()

/** A listener's TLS settings, with the paths resolved against the config file's folder. */
export interface ListenerTls {
  /** The certificate chain (PEM) the listener presents. */
  readonly cert: string
  /** The certificate's private key (PEM). */
  readonly key: string
  /** CA certificates (PEM) that client certificates are verified against (with requireClientCert). */
  readonly ca: string | undefined
  /** Refuse a connection whose client has no certificate signed by `ca`. Default false. */
  readonly requireClientCert: boolean
}

/** `<section>.tls` with its paths resolved; a client certificate check without a CA is refused. */
export function resolveListenerTls(
  loc: Locator,
  section: 'http' | 'grpc',
  input: z.infer<typeof listenerTlsSchema>,
): ListenerTls | undefined {
  if (input === undefined) return undefined
  const requireClientCert = input.requireClientCert ?? false
  if (requireClientCert && input.ca === undefined)
    throw loc.error(
      [section, 'tls', 'requireClientCert'],
      `${section}.tls.requireClientCert: set ${section}.tls.ca too (the CA that signs the clients' certificates)`,
    )
  // A CA that nothing is checked against would read as protection that is not there.
  if (!requireClientCert && input.ca !== undefined)
    throw loc.error(
      [section, 'tls', 'ca'],
      `${section}.tls.ca: client certificates are checked only with ${section}.tls.requireClientCert: true; set it or remove ca`,
    )
  const folder = dirname(loc.file)
  return {
    cert: resolve(folder, input.cert),
    key: resolve(folder, input.key),
    ca: input.ca === undefined ? undefined : resolve(folder, input.ca),
    requireClientCert,
  }
}

function readPem(where: string, path: string): Buffer {
  try {
    return readFileSync(path)
  } catch (error) {
    throw new InvalidConfigError(
      `${where}: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? 'error'})`,
      { cause: error },
    )
  }
}

/**
 * Read the files of `tls` and check that they make a secure context (PEM, key matching the
 * certificate). `where` names the section in errors (`http.tls`); messages name paths, never contents.
 */
export function loadListenerTls(tls: ListenerTls, where: string): SecureContextOptions {
  const options: SecureContextOptions = {
    cert: readPem(`${where}.cert`, tls.cert),
    key: readPem(`${where}.key`, tls.key),
    ...(tls.ca === undefined ? {} : { ca: readPem(`${where}.ca`, tls.ca) }),
  }
  try {
    createSecureContext(options)
  } catch (error) {
    // OpenSSL's reason (`key values mismatch`, `no start line`) says which check failed, not the data.
    const reason = (error as Error).message.replace(/^error:[0-9A-F]+:/, '')
    throw new InvalidConfigError(
      `${where}: ${tls.cert} and ${tls.key} do not make a TLS certificate and key (${reason})`,
      { cause: error },
    )
  }
  return options
}

/** One line for `sluice check`: paths and the client certificate rule, never file contents. */
export function describeListenerTls(tls: ListenerTls | undefined): string {
  if (tls === undefined) return 'plaintext'
  const clients = tls.requireClientCert
    ? `client certificates required (CA ${tls.ca})`
    : 'no client certificates'
  return `TLS (cert ${tls.cert}, key ${tls.key}; ${clients})`
}

/** The listeners' TLS settings, as the service config holds them. */
interface ListenersTls {
  readonly http: { readonly tls: ListenerTls | undefined }
  readonly grpc: { readonly tls: ListenerTls | undefined }
}

/** Read both listeners' files as `sluice serve` does, for `sluice check`. Throws InvalidConfigError. */
export function checkListenerTls(config: ListenersTls): void {
  if (config.http.tls !== undefined) loadListenerTls(config.http.tls, 'http.tls')
  if (config.grpc.tls !== undefined) loadListenerTls(config.grpc.tls, 'grpc.tls')
}

/** Every certificate, key and CA file the listeners read: a change to one reloads the config. */
export function listenerTlsFiles(config: ListenersTls): string[] {
  const files: string[] = []
  for (const tls of [config.http.tls, config.grpc.tls])
    if (tls !== undefined) files.push(tls.cert, tls.key, ...(tls.ca === undefined ? [] : [tls.ca]))
  return [...new Set(files)]
}
