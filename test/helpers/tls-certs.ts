// Test certificates made with openssl in a temporary folder (nothing is committed; each set's
// `remove()` deletes its folder): the primitives (a CA, a key and a certificate it signs), the set
// the store TLS tests use, and a private PKI that issues server and client certificates on demand
// for the listener TLS tests.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const openssl = (dir: string, args: string[]) =>
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore', timeout: 20_000 })

const NEW_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']

/**
 * The extension a server certificate for this machine carries; no key usage, so the harness may
 * also show it as a client certificate to a Redis that requires one.
 */
export const SERVER_EXT = 'subjectAltName=IP:127.0.0.1,DNS:localhost\n'
/** The extension a client certificate carries. */
export const CLIENT_EXT = 'extendedKeyUsage=clientAuth\n'

/** A key and a certificate (paths, PEM). */
export interface Issued {
  cert: string
  key: string
}

/** A self-signed CA certificate with subject CN=`name`, as `name`.pem and `name`.key in `dir`. */
export function makeCa(dir: string, name: string): Issued {
  openssl(dir, [
    'req',
    '-x509',
    ...NEW_KEY,
    '-days',
    '2',
    '-subj',
    `/CN=${name}`,
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.pem`,
  ])
  return { cert: join(dir, `${name}.pem`), key: join(dir, `${name}.key`) }
}

/** A new key and its signing request, as `name`.key and `name`.csr in `dir`. */
function request(dir: string, name: string, subject: string): void {
  openssl(dir, ['req', ...NEW_KEY, '-subj', subject, '-keyout', `${name}.key`, '-out', `${name}.csr`])
}

/**
 * Sign the request `name`.csr with the CA `ca` as `out`.pem, valid for `days` (-1: it ended a day
 * before it began). One after another within a folder: -CAcreateserial writes the CA's serial file.
 */
function sign(dir: string, name: string, ca: string, out: string, days: number, ext: string): string {
  writeFileSync(join(dir, `${out}.ext`), ext)
  openssl(dir, [
    'x509',
    ...['-req', '-in', `${name}.csr`, '-CA', `${ca}.pem`, '-CAkey', `${ca}.key`, '-CAcreateserial'],
    ...['-days', String(days), '-extfile', `${out}.ext`, '-out', `${out}.pem`],
  ])
  return join(dir, `${out}.pem`)
}

/** A key and a certificate named `name`, subject `subject`, signed by the CA `ca` with `ext`. */
export function issue(dir: string, ca: string, name: string, subject: string, ext: string): Issued {
  request(dir, name, subject)
  return { cert: sign(dir, name, ca, name, 2, ext), key: join(dir, `${name}.key`) }
}

export interface TestCertificates {
  readonly dir: string
  /** The CA that signed `serverCert`, `expiredCert` and `clientCert`. */
  readonly ca: string
  /** Another CA, and a certificate it signed for the same names and key. */
  readonly otherCa: string
  readonly otherServerCert: string
  readonly serverCert: string
  readonly serverKey: string
  /** Signed by `ca` for the same names and key, valid until a day before it was made. */
  readonly expiredCert: string
  readonly clientCert: string
  readonly clientKey: string
  remove(): void
}

/**
 * A private CA and a server certificate for 127.0.0.1 and localhost, the same server key under an
 * expired certificate and under another CA, and a client certificate.
 */
export async function makeTestCertificates(): Promise<TestCertificates> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-tls-'))
  const remove = () => rmSync(dir, { recursive: true, force: true })
  try {
    const ca = makeCa(dir, 'ca').cert
    const otherCa = makeCa(dir, 'other-ca').cert
    const server = issue(dir, 'ca', 'server', '/CN=localhost', SERVER_EXT)
    const client = issue(dir, 'ca', 'client', '/CN=sluice-client', CLIENT_EXT)
    return {
      dir,
      ca,
      otherCa,
      otherServerCert: sign(dir, 'server', 'other-ca', 'other-server', 2, SERVER_EXT),
      serverCert: server.cert,
      serverKey: server.key,
      expiredCert: sign(dir, 'server', 'ca', 'expired', -1, SERVER_EXT),
      clientCert: client.cert,
      clientKey: client.key,
      remove,
    }
  } catch (error) {
    remove()
    throw error
  }
}

export interface TestPki {
  /** The temporary folder holding every file. */
  dir: string
  /** Path of the CA certificate (PEM). */
  ca: string
  /** A server certificate for IP 127.0.0.1 and DNS localhost, signed by the CA. */
  server(name: string): Issued
  /** A client certificate with subject O=mesh, CN=`cn`, signed by the CA (or by a CA of its own: `foreign`). */
  client(cn: string, options?: { foreign?: boolean }): Issued
  /** The file's contents. */
  read(path: string): Buffer
  /** Remove the folder. */
  remove(): void
}

/** A private CA in a new folder under the OS's temporary folder; `remove()` it afterwards. */
export function makeTestPki(): TestPki {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-listener-tls-'))
  const ca = makeCa(dir, 'ca').cert
  let foreignMade = false
  return {
    dir,
    ca,
    server: (name) => issue(dir, 'ca', name, '/CN=localhost', SERVER_EXT),
    client(cn, { foreign = false } = {}) {
      if (foreign && !foreignMade) {
        makeCa(dir, 'foreign-ca')
        foreignMade = true
      }
      const name = `client-${cn}${foreign ? '-foreign' : ''}`
      return issue(dir, foreign ? 'foreign-ca' : 'ca', name, `/O=mesh/CN=${cn}`, CLIENT_EXT)
    },
    read: (path) => readFileSync(path),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  }
}
