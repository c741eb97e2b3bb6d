// TLS on the service's own listeners, with real clients holding certificates made by openssl:
// HTTPS for the JSON API (http.tls), TLS and mTLS for Envoy's gRPC listener (grpc.tls), subjects in
// grpc.trustedPeers, and certificates swapped on reload while open connections keep theirs.

import { spawnSync } from 'node:child_process'
import { X509Certificate } from 'node:crypto'
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs'
import type { IncomingMessage } from 'node:http'
import type { ClientHttp2Session } from 'node:http2'
import { connect } from 'node:http2'
import { Agent, request } from 'node:https'
import { join } from 'node:path'
import type { TLSSocket } from 'node:tls'
import { connect as tlsConnect } from 'node:tls'
import { credentials, status } from '@grpc/grpc-js'
import type { Logger } from 'pino'
import { pino } from 'pino'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { forwardStore } from '../../packages/sluice/src/store.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { parseEnvoyConfig } from '../../packages/sluice-server/src/envoy/config.js'
import { describeConfig, parseConfig } from '../../packages/sluice-server/src/server/config.js'
import type { Service } from '../../packages/sluice-server/src/server/service.js'
import { createService } from '../../packages/sluice-server/src/server/service.js'
import { CLI, servingUrl, startCli } from '../helpers/cli-process.js'
import type { RlsClient } from '../helpers/envoy.js'
import { d, rlsClient } from '../helpers/envoy.js'
import { rawCall } from '../helpers/raw-grpc.js'
import { freePort, quietLogger } from '../helpers/service.js'
import type { Issued, TestPki } from '../helpers/tls-certs.js'
import { makeTestPki } from '../helpers/tls-certs.js'

let pki: TestPki
let first: Issued
let second: Issued
let envoyClient: Issued
let otherClient: Issued
let foreignClient: Issued
beforeAll(() => {
  pki = makeTestPki()
  first = pki.server('server-1')
  second = pki.server('server-2')
  envoyClient = pki.client('envoy')
  otherClient = pki.client('other')
  foreignClient = pki.client('envoy', { foreign: true })
})
afterAll(() => pki.remove())

const services: Service[] = []
const closers: (() => void)[] = []
afterEach(async () => {
  for (const close of closers.splice(0)) close()
  for (const service of services.splice(0)) await service.close(500)
})

const rules = parseEnvoyConfig([
  {
    file: 'rules.yaml',
    text: 'domain: d\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 100 }\n',
  },
])
const POLICIES = 'policies:\n  api: { algorithm: fixed-window, limit: 10, window: 1m }\n'

/** Where the config lives: its tls paths are relative to this folder. */
const configFile = () => join(pki.dir, 'sluice.yaml')

/** The server certificate files the config names, copied from `issued` (a swap overwrites them). */
function installServerCert(issued: Issued): void {
  copyFileSync(issued.cert, join(pki.dir, 'live.pem'))
  copyFileSync(issued.key, join(pki.dir, 'live.key'))
}

const fingerprint = (issued: Issued) => new X509Certificate(pki.read(issued.cert)).fingerprint256

/** The service of `yaml` listening on 127.0.0.1; `port` is its HTTP listener's. */
async function start(
  yaml: string,
  grpc = false,
  logger: Logger = quietLogger,
): Promise<{ service: Service; port: number; url: string }> {
  const service = createService({
    config: parseConfig(`${POLICIES}${yaml}`, configFile()),
    logger,
    ...(grpc ? { envoy: rules } : {}),
  })
  services.push(service)
  const { port, url } = await service.listen(0)
  return { service, port, url }
}

interface HttpsAnswer {
  status: number
  /** The fingerprint of the certificate the server showed on this connection. */
  served: string
  /** True when the request went over a connection the agent had kept open. */
  reused: boolean
}

/** What the client trusts and shows; with `agent`, the agent's own `ca` and kept-alive connection. */
interface ClientTls {
  ca?: Buffer
  cert?: Buffer
  key?: Buffer
  agent?: Agent
}

/** GET `path` over HTTPS with the given trust and client certificate. */
function httpsGet(port: number, path: string, tls: ClientTls): Promise<HttpsAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path, method: 'GET', agent: false, ...tls },
      (res: IncomingMessage) => {
        // Read now: a kept-alive socket leaves the response once its body has ended.
        const served = (res.socket as TLSSocket).getPeerCertificate().fingerprint256
        res.resume()
        res.once('end', () => resolve({ status: res.statusCode ?? 0, served, reused: req.reusedSocket }))
      },
    )
    req.once('error', reject)
    req.end()
  })
}

const HTTPS = 'http:\n  tls: { cert: live.pem, key: live.key }\n'
const HTTPS_MTLS = 'http:\n  tls: { cert: live.pem, key: live.key, ca: ca.pem, requireClientCert: true }\n'

describe('HTTPS for the JSON API (http.tls)', () => {
  it('answers a client that trusts the CA, and a client that does not cannot connect', async () => {
    installServerCert(first)
    const { port, url } = await start(HTTPS)
    expect(url).toBe(`https://127.0.0.1:${port}`)
    const answer = await httpsGet(port, '/healthz', { ca: pki.read(pki.ca) })
    expect(answer).toMatchObject({ status: 200, served: fingerprint(first) })
    await expect(httpsGet(port, '/healthz', {})).rejects.toMatchObject({
      code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
    })
  })

  it('with requireClientCert refuses a client without a certificate and answers one with', async () => {
    installServerCert(first)
    const { port } = await start(HTTPS_MTLS)
    const ca = pki.read(pki.ca)
    await expect(httpsGet(port, '/healthz', { ca })).rejects.toThrow()
    await expect(
      httpsGet(port, '/healthz', {
        ca,
        cert: pki.read(foreignClient.cert),
        key: pki.read(foreignClient.key),
      }),
    ).rejects.toThrow()
    const answer = await httpsGet(port, '/healthz', {
      ca,
      cert: pki.read(otherClient.cert),
      key: pki.read(otherClient.key),
    })
    expect(answer.status).toBe(200)
  })

  it('serves a new certificate to new connections after a reload; an open connection keeps its own', async () => {
    installServerCert(first)
    const { service, port } = await start(HTTPS)
    const ca = pki.read(pki.ca)
    const agent = new Agent({ keepAlive: true, maxSockets: 1, ca })
    closers.push(() => agent.destroy())
    const before = await httpsGet(port, '/healthz', { agent })
    expect(before).toMatchObject({ status: 200, served: fingerprint(first), reused: false })

    installServerCert(second)
    service.reload(parseConfig(`${POLICIES}${HTTPS}`, configFile()))

    const open = await httpsGet(port, '/healthz', { agent })
    expect(open).toMatchObject({ status: 200, served: fingerprint(first), reused: true })
    const fresh = await httpsGet(port, '/healthz', { ca })
    expect(fresh).toMatchObject({ status: 200, served: fingerprint(second), reused: false })
  })

  it('keeps TLS off or on, and the client certificate rule, until a restart; a reload says so', async () => {
    installServerCert(first)
    const lines: { msg: string; settings?: string[] }[] = []
    const logger = pino({ level: 'warn' }, { write: (line: string) => lines.push(JSON.parse(line)) })
    const { service, url } = await start(`${GRPC_TLS}`, true, logger)
    service.reload(parseConfig(`${POLICIES}${HTTPS}${grpcMtls('[loopback]')}`, configFile()), rules)
    expect(lines.find((line) => line.msg.includes('take effect on restart'))?.settings).toEqual([
      'http.tls',
      'grpc.tls',
    ])
    expect((await fetch(`${url}/healthz`)).status).toBe(200)
    expect((await client(service).shouldRateLimit(request1)).overall_code).toBe('OK')
  })

  it('refuses a reload whose certificate files are unreadable or not a key pair, keeping the one in force', async () => {
    installServerCert(first)
    const { service, port } = await start(HTTPS)
    const key = pki.read(join(pki.dir, 'live.key')).toString()
    copyFileSync(second.cert, join(pki.dir, 'live.pem')) // a certificate without its key
    expect(() => service.reload(parseConfig(`${POLICIES}${HTTPS}`, configFile()))).toThrow(
      expect.objectContaining({
        code: 'SLUICE_INVALID_CONFIG',
        message: expect.stringContaining('live.pem'),
      }),
    )
    const missing = 'http:\n  tls: { cert: nowhere.pem, key: live.key }\n'
    expect(() => service.reload(parseConfig(`${POLICIES}${missing}`, configFile()))).toThrow(
      /http\.tls\.cert: cannot read .*nowhere\.pem \(ENOENT\)/,
    )
    let message = ''
    try {
      service.reload(parseConfig(`${POLICIES}${HTTPS}`, configFile()))
    } catch (error) {
      message = (error as Error).message
    }
    expect(message).not.toContain(key.split('\n')[1])
    const answer = await httpsGet(port, '/healthz', { ca: pki.read(pki.ca) })
    expect(answer).toMatchObject({ status: 200, served: fingerprint(first) })
  })
})

const GRPC_TLS = `grpc:\n  port: 0\n  tls: { cert: live.pem, key: live.key }\n`
const grpcMtls = (peers: string) =>
  `grpc:\n  port: 0\n  trustedPeers: ${peers}\n  tls: { cert: live.pem, key: live.key, ca: ca.pem, requireClientCert: true }\n`

const request1 = { domain: 'd', descriptors: [d(['user', 'u1'])] }

function client(service: Service, issued?: Issued): RlsClient {
  const ca = pki.read(pki.ca)
  const channel =
    issued === undefined
      ? credentials.createSsl(ca)
      : credentials.createSsl(ca, pki.read(issued.key), pki.read(issued.cert))
  const rls = rlsClient(service.grpcAddress!.url, channel)
  closers.push(() => rls.close())
  return rls
}

/** A raw HTTP/2 session over TLS to the gRPC listener, resolved once connected. */
async function session(service: Service, issued?: Issued): Promise<ClientHttp2Session> {
  const h2 = connect(`https://127.0.0.1:${service.grpcAddress!.port}`, {
    servername: 'localhost',
    ca: pki.read(pki.ca),
    ...(issued === undefined ? {} : { cert: pki.read(issued.cert), key: pki.read(issued.key) }),
  })
  h2.on('error', () => {})
  closers.push(() => h2.destroy())
  await new Promise<void>((resolve, reject) => {
    h2.once('connect', () => resolve())
    h2.once('error', reject)
  })
  return h2
}

const servedOn = (h2: ClientHttp2Session) => (h2.socket as TLSSocket).getPeerCertificate().fingerprint256

describe("TLS and mTLS on Envoy's gRPC listener (grpc.tls)", () => {
  it('answers ShouldRateLimit over TLS to a client trusting the CA; a plaintext client gets nothing', async () => {
    installServerCert(first)
    const { service } = await start(GRPC_TLS, true)
    const answer = await client(service).shouldRateLimit(request1)
    expect(answer.overall_code).toBe('OK')
    const plain = rlsClient(service.grpcAddress!.url)
    closers.push(() => plain.close())
    expect((await plain.refused(request1)).code).toBe(status.UNAVAILABLE)
  })

  it('with mTLS answers a client with a certificate of the CA, and refuses one without or from another CA', async () => {
    installServerCert(first)
    const { service } = await start(grpcMtls('[loopback]'), true)
    expect((await client(service, envoyClient).shouldRateLimit(request1)).overall_code).toBe('OK')
    expect((await client(service).refused(request1)).code).toBe(status.UNAVAILABLE)
    expect((await client(service, foreignClient).refused(request1)).code).toBe(status.UNAVAILABLE)
  })

  it('trusts peers by certificate subject: subject:CN=envoy is answered from any address, CN=other is not', async () => {
    installServerCert(first)
    const { service } = await start(grpcMtls('["subject:CN=envoy,O=mesh"]'), true)
    expect((await client(service, envoyClient).shouldRateLimit(request1)).overall_code).toBe('OK')
    const refused = await client(service, otherClient).refused(request1)
    expect(refused.code).toBe(status.PERMISSION_DENIED)
    expect(refused.details).toContain('grpc.trustedPeers')
  })

  it('lets a call in flight over TLS finish on close(), then takes no new connection', async () => {
    installServerCert(first)
    // A real memory store answering 40 ms late, so the call is still in flight when close() starts;
    // `reached` settles once a call's decision has begun (a fixed sleep misses it on a busy machine).
    const inner = memoryStore()
    let decisions = 0
    let reachedSecond: () => void = () => {}
    const reached = new Promise<void>((resolve) => {
      reachedSecond = resolve
    })
    const store = forwardStore(inner, {
      name: 'slow-memory',
      inProcess: false,
      apply: async (steps, mode) => {
        if (++decisions === 2) reachedSecond()
        await new Promise((resolve) => setTimeout(resolve, 40))
        return inner.apply(steps, mode)
      },
    })
    const service = createService({
      config: parseConfig(`${POLICIES}${GRPC_TLS}`, configFile()),
      logger: quietLogger,
      envoy: rules,
      store: { store, description: 'slow memory', ping: async () => {} },
    })
    services.push(service)
    await service.listen(0)
    const rls = client(service)
    await rls.shouldRateLimit(request1)
    const inFlight = rls.shouldRateLimit({ domain: 'd', descriptors: [d(['user', 'u2'])] })
    await reached
    const closed = service.close(2000)
    expect((await inFlight).overall_code).toBe('OK')
    await closed
    expect((await rls.refused(request1)).code).toBe(status.UNAVAILABLE)
  })

  it('takes only clients that offer HTTP/2 by ALPN, as gRPC over TLS requires', async () => {
    installServerCert(first)
    const { service } = await start(GRPC_TLS, true)
    const port = service.grpcAddress!.port
    const offered = (protocols: string[] | undefined) =>
      new Promise<string | false | null>((resolve, reject) => {
        const socket = tlsConnect({
          host: '127.0.0.1',
          port,
          servername: 'localhost',
          ca: pki.read(pki.ca),
          ...(protocols === undefined ? {} : { ALPNProtocols: protocols }),
        })
        socket.once('secureConnect', () => {
          resolve(socket.alpnProtocol)
          socket.destroy()
        })
        socket.once('error', reject)
      })
    expect(await offered(['h2'])).toBe('h2')
    await expect(offered(['http/1.1'])).rejects.toThrow(/no application protocol/i)
  })

  it('serves a new certificate to new connections after a reload; an open connection keeps answering', async () => {
    installServerCert(first)
    const { service } = await start(grpcMtls('[loopback]'), true)
    const open = await session(service, envoyClient)
    expect(servedOn(open)).toBe(fingerprint(first))
    expect((await rawCall(open).ended).grpcStatus).toBe(0)

    installServerCert(second)
    service.reload(parseConfig(`${POLICIES}${grpcMtls('[loopback]')}`, configFile()), rules)

    expect((await rawCall(open).ended).grpcStatus).toBe(0)
    expect(servedOn(open)).toBe(fingerprint(first))
    const fresh = await session(service, envoyClient)
    expect(servedOn(fresh)).toBe(fingerprint(second))
    expect((await rawCall(fresh).ended).grpcStatus).toBe(0)
  })
})

describe('the tls settings in sluice.yaml', () => {
  // A config's place, never read: tls paths resolve against its folder.
  const folder = join(import.meta.dirname, 'conf')
  const parse = (yaml: string) => () => parseConfig(`${POLICIES}${yaml}`, join(folder, 'sluice.yaml'))

  it('refuses an unknown key under http.tls and grpc.tls with file:line', () => {
    expect(parse('http:\n  tls: { cert: a.pem, key: a.key, requireClientCerts: true }\n')).toThrow(
      /sluice\.yaml:4: http\.tls\.requireClientCerts: unknown key; did you mean 'requireClientCert'\?/,
    )
    expect(parse('grpc:\n  port: 8081\n  tls:\n    cert: a.pem\n    key: a.key\n    cas: ca.pem\n')).toThrow(
      /sluice\.yaml:8: grpc\.tls\.cas: unknown key; did you mean 'ca'\?/,
    )
  })

  it('needs cert and key, a CA with requireClientCert, requireClientCert with a CA', () => {
    expect(parse('http:\n  tls: { cert: a.pem }\n')).toThrow(/http\.tls\.key: is required/)
    expect(parse('http:\n  tls: { cert: a.pem, key: a.key, requireClientCert: true }\n')).toThrow(
      /sluice\.yaml:4: http\.tls\.requireClientCert: set http\.tls\.ca too/,
    )
    expect(parse('grpc:\n  port: 1\n  tls: { cert: a.pem, key: a.key, ca: ca.pem }\n')).toThrow(
      /grpc\.tls\.ca: client certificates are checked only with grpc\.tls\.requireClientCert: true/,
    )
  })

  it('takes subject: entries in grpc.trustedPeers only with client certificates required', () => {
    expect(parse('grpc:\n  port: 1\n  trustedPeers: ["subject:CN=envoy"]\n')).toThrow(
      /sluice\.yaml:5: grpc\.trustedPeers: a subject: entry needs client certificates/,
    )
    expect(
      parse(
        'grpc:\n  port: 1\n  trustedPeers: ["subject:envoy"]\n  tls: { cert: a.pem, key: a.key, ca: ca.pem, requireClientCert: true }\n',
      ),
    ).toThrow(/grpc\.trustedPeers: "subject:envoy" is not a subject; write subject:CN=envoy/)
  })

  it("loads docs/service.md's TLS example", () => {
    const doc = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'service.md'), 'utf8')
    const block = /```yaml\n(# sluice\.yaml: HTTPS for the JSON API[\s\S]*?)```/.exec(doc)?.[1]
    const config = parseConfig(block!, join(folder, 'sluice.yaml'))
    expect(config.http.tls?.requireClientCert).toBe(false)
    expect(config.grpc.tls).toMatchObject({ ca: expect.stringMatching(/ca\.crt$/), requireClientCert: true })
    expect(config.grpc.trustedPeers).toEqual(['subject:CN=envoy'])
  })

  it('resolves the paths against the config folder; sluice check prints paths, never contents', () => {
    const config = parse(
      `http:\n  tls: { cert: certs/a.pem, key: ${join(folder, 'keys', 'a.key')} }\ngrpc:\n  port: 1\n  tls: { cert: g.pem, key: g.key, ca: ca.pem, requireClientCert: true }\n`,
    )()
    expect(config.http.tls).toEqual({
      cert: join(folder, 'certs', 'a.pem'),
      key: join(folder, 'keys', 'a.key'),
      ca: undefined,
      requireClientCert: false,
    })
    const text = describeConfig(config)
    expect(text).toContain(
      `listeners: HTTP TLS (cert ${join(folder, 'certs', 'a.pem')}, key ${join(folder, 'keys', 'a.key')}; no client certificates); gRPC TLS (cert ${join(folder, 'g.pem')}, key ${join(folder, 'g.key')}; client certificates required (CA ${join(folder, 'ca.pem')}))`,
    )
  })
})

describe('sluice check and sluice serve with TLS listeners (a real process)', () => {
  it('sluice check reads the certificate files and prints their paths, never their contents', () => {
    installServerCert(first)
    writeFileSync(configFile(), `${POLICIES}${HTTPS_MTLS}`)
    const ok = spawnSync(process.execPath, [CLI, 'check', '--config', configFile()], { encoding: 'utf8' })
    expect(ok.status).toBe(0)
    expect(ok.stdout).toContain(
      `listeners: HTTP TLS (cert ${join(pki.dir, 'live.pem')}, key ${join(pki.dir, 'live.key')}; client certificates required (CA ${pki.ca}))`,
    )
    expect(ok.stdout + ok.stderr).not.toContain('PRIVATE KEY')

    writeFileSync(configFile(), `${POLICIES}http:\n  tls: { cert: live.pem, key: gone.key }\n`)
    const bad = spawnSync(process.execPath, [CLI, 'check', '--config', configFile()], { encoding: 'utf8' })
    expect(bad.status).not.toBe(0)
    expect(bad.stderr).toContain(`http.tls.key: cannot read ${join(pki.dir, 'gone.key')} (ENOENT)`)
  })

  it('sluice serve answers over HTTPS and gives new connections a renewed certificate once its files change', async () => {
    installServerCert(first)
    writeFileSync(configFile(), `${POLICIES}${HTTPS}`)
    const port = await freePort()
    const cli = startCli(['serve', '--config', configFile(), '--port', String(port)])
    closers.push(() => cli.child.kill('SIGKILL'))
    expect(await servingUrl(cli)).toBe(`https://127.0.0.1:${port}`)
    const ca = pki.read(pki.ca)
    expect(await httpsGet(port, '/healthz', { ca })).toMatchObject({
      status: 200,
      served: fingerprint(first),
    })

    installServerCert(second)
    // Bounded by the file watch's debounce and a loaded machine; each try is a new connection.
    const deadline = Date.now() + 20_000
    let served = ''
    while (served !== fingerprint(second) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100))
      served = (await httpsGet(port, '/healthz', { ca })).served
    }
    expect(served).toBe(fingerprint(second))
    expect(cli.output()).toContain('"trigger":"certificate change"')
  })
})
