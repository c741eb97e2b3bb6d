// Certificates for the tests of the service's TLS listeners, made by openssl in a temporary folder:
// a private CA, server certificates for 127.0.0.1/localhost, and client certificates by subject.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export interface Issued {
  /** Path of the certificate (PEM). */
  cert: string
  /** Path of its private key (PEM). */
  key: string
}

export interface TestPki {
  /** The temporary folder holding every file. */
  dir: string
  /** Path of the CA certificate (PEM). */
  ca: string
  /** A server certificate for IP 127.0.0.1 and DNS localhost, signed by the CA. */
  server(name: string): Issued
  /** A client certificate with subject CN=`cn`, signed by the CA (or by a CA of its own: `foreign`). */
  client(cn: string, options?: { foreign?: boolean }): Issued
  /** The file's contents. */
  read(path: string): Buffer
  /** Remove the folder. */
  remove(): void
}

const openssl = (dir: string, args: string[]) =>
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore', timeout: 20_000 })

/** A CA named `name` (name.key, name.pem) in `dir`. */
function makeCa(dir: string, name: string): void {
  openssl(dir, [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-days',
    '2',
    '-subj',
    `/CN=${name}`,
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.pem`,
  ])
}

/** A key and a certificate named `name`, subject `subject`, signed by the CA `ca`, with `ext`. */
function issue(dir: string, ca: string, name: string, subject: string, ext: string): Issued {
  openssl(dir, [
    'req',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-subj',
    subject,
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.csr`,
  ])
  writeFileSync(join(dir, `${name}.ext`), ext)
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    `${ca}.pem`,
    '-CAkey',
    `${ca}.key`,
    '-CAcreateserial',
    '-days',
    '2',
    '-extfile',
    `${name}.ext`,
    '-out',
    `${name}.pem`,
  ])
  return { cert: join(dir, `${name}.pem`), key: join(dir, `${name}.key`) }
}

/** A private CA in a new folder under the OS's temporary folder; `remove()` it afterwards. */
export function makeTestPki(): TestPki {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-listener-tls-'))
  makeCa(dir, 'ca')
  let foreignMade = false
  return {
    dir,
    ca: join(dir, 'ca.pem'),
    server: (name) =>
      issue(
        dir,
        'ca',
        name,
        '/CN=localhost',
        'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n',
      ),
    client(cn, { foreign = false } = {}) {
      if (foreign && !foreignMade) {
        makeCa(dir, 'foreign-ca')
        foreignMade = true
      }
      return issue(
        dir,
        foreign ? 'foreign-ca' : 'ca',
        `client-${cn}${foreign ? '-foreign' : ''}`,
        `/O=mesh/CN=${cn}`,
        'extendedKeyUsage=clientAuth\n',
      )
    },
    read: (path) => readFileSync(path),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  }
}
