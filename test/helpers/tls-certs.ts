// Test certificates made with openssl in a temporary folder: a private CA and a server certificate
// for 127.0.0.1 and localhost, the same server key under an expired certificate and under another
// CA, and a client certificate. Nothing is committed; `remove()` deletes the folder.
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'

const run = promisify(execFile)

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

async function openssl(dir: string, ...args: string[]): Promise<void> {
  await run('openssl', args, { cwd: dir })
}

/** Make a CA (self-signed) as `name`.pem / `name`.key. */
async function makeCa(dir: string, name: string): Promise<void> {
  await openssl(
    dir,
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
  )
}

/** Sign `csr` with the CA `ca` as `out`, valid for `days` (-1: ended a day before it began). */
async function sign(
  dir: string,
  csr: string,
  ca: string,
  out: string,
  days: number,
  ext: string,
): Promise<void> {
  await openssl(
    dir,
    'x509',
    '-req',
    '-in',
    csr,
    '-CA',
    `${ca}.pem`,
    '-CAkey',
    `${ca}.key`,
    '-CAcreateserial',
    '-extfile',
    ext,
    '-days',
    String(days),
    '-out',
    out,
  )
}

export async function makeTestCertificates(): Promise<TestCertificates> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-tls-'))
  const p = (name: string) => join(dir, name)
  try {
    await Promise.all([makeCa(dir, 'ca'), makeCa(dir, 'other-ca')])
    writeFileSync(p('server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n')
    writeFileSync(p('client.ext'), 'extendedKeyUsage=clientAuth\n')
    const newKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
    await Promise.all([
      openssl(dir, 'req', ...newKey, '-subj', '/CN=localhost', '-keyout', 'server.key', '-out', 'server.csr'),
      openssl(
        dir,
        'req',
        ...newKey,
        '-subj',
        '/CN=sluice-client',
        '-keyout',
        'client.key',
        '-out',
        'client.csr',
      ),
    ])
    // One after another: -CAcreateserial writes the CA's serial file.
    await sign(dir, 'server.csr', 'ca', 'server.pem', 2, 'server.ext')
    await sign(dir, 'server.csr', 'ca', 'expired.pem', -1, 'server.ext')
    await sign(dir, 'client.csr', 'ca', 'client.pem', 2, 'client.ext')
    await sign(dir, 'server.csr', 'other-ca', 'other-server.pem', 2, 'server.ext')
  } catch (error) {
    rmSync(dir, { recursive: true, force: true })
    throw error
  }
  return {
    dir,
    ca: p('ca.pem'),
    otherCa: p('other-ca.pem'),
    otherServerCert: p('other-server.pem'),
    serverCert: p('server.pem'),
    serverKey: p('server.key'),
    expiredCert: p('expired.pem'),
    clientCert: p('client.pem'),
    clientKey: p('client.key'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  }
}
