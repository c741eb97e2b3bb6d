// TLS to the store against real redis-servers that speak only TLS, with a private CA made by openssl
// in the test: the right CA connects; an unknown CA, a wrong server name, an expired certificate and
// a missing client certificate are refused with that cause (password redacted); a client certificate
// the server requires is sent; a reload reads the files again, so a rotated CA reaches the reconnect.
import { copyFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { pino } from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parseConfig } from '../../packages/sluice-server/src/server/config.js'
import { openStore, type StoreHandle } from '../../packages/sluice-server/src/server/store-url.js'
import { servingUrl, startCli } from '../helpers/cli-process.js'
import { type PostgresServer, startPostgres } from '../helpers/postgres-harness.js'
import { type RedisClusterServers, startCluster } from '../helpers/redis-harness.js'
import { type RedisProcess, startRedisProcess } from '../helpers/redis-process.js'
import { get, post, servicesClosedAfterEach } from '../helpers/service.js'
import { makeTestCertificates, type TestCertificates } from '../helpers/tls-certs.js'

const startService = servicesClosedAfterEach()
const POLICIES = 'policies:\n  api: { algorithm: token-bucket, limit: 5, window: 1m }\n'

let certs: TestCertificates
const servers: RedisProcess[] = []
beforeAll(async () => {
  certs = await makeTestCertificates()
})
afterAll(async () => {
  for (const server of servers) await server.stop()
  certs?.remove()
})

async function tlsRedis(
  files: Partial<{ cert: string; authClients: 'yes' | 'no' }> = {},
): Promise<RedisProcess> {
  const server = await startRedisProcess({
    tls: {
      cert: files.cert ?? certs.serverCert,
      key: certs.serverKey,
      ca: certs.ca,
      authClients: files.authClients ?? 'no',
    },
  })
  servers.push(server)
  return server
}

/** The error `openStore` rejects with (it must reject). */
async function refusal(url: string, tls?: Parameters<typeof openStore>[1]['tls']): Promise<Error> {
  const opened = openStore(url, { prefix: 'tls-test', ...(tls === undefined ? {} : { tls }) })
  const outcome = await opened.then(
    async (handle) => {
      await handle.store.close()
      return undefined
    },
    (error: unknown) => error as Error,
  )
  if (outcome === undefined) throw new Error(`${url} connected; a refusal was expected`)
  return outcome
}

let keys = 0
async function decides(handle: StoreHandle): Promise<void> {
  const { url } = await startService(POLICIES, { store: handle })
  const answer = await post(`${url}/v1/check`, { policy: 'api', key: `k${++keys}` })
  expect(answer.body).toMatchObject({ allowed: true, remaining: 4 })
  expect(answer.body.degraded).toBeUndefined()
}

describe('rediss:// to a server with a private CA', () => {
  let server: RedisProcess
  let expired: RedisProcess
  beforeAll(async () => {
    ;[server, expired] = await Promise.all([tlsRedis(), tlsRedis({ cert: certs.expiredCert })])
  })

  it('connects with the CA in tls_ca and decides', async () => {
    const handle = await openStore(`rediss://127.0.0.1:${server.port}?tls_ca=${certs.ca}`, {
      prefix: 'tls-a',
    })
    await decides(handle)
  })

  it('connects with the CA from the config block store.tls', async () => {
    const config = parseConfig(
      `store:\n  url: rediss://127.0.0.1:${server.port}\n  tls:\n    ca: ${certs.ca}\n    servername: localhost\n${POLICIES}`,
      'tls.yaml',
    )
    expect(config.storeTls).toEqual({ ca: certs.ca, servername: 'localhost' })
    const handle = await openStore(config.store, { prefix: 'tls-b', tls: config.storeTls! })
    await decides(handle)
  })

  it('refuses a server whose CA is not given, and says the CA is unknown (password redacted)', async () => {
    const withoutCa = await refusal(`rediss://:hunter2-secret@127.0.0.1:${server.port}`)
    expect(withoutCa.message).toContain(`cannot connect to rediss://:***@127.0.0.1:${server.port}`)
    expect(withoutCa.message).toMatch(
      /TLS: the server certificate (is signed by an unknown CA|chains to a self-signed CA)/,
    )
    expect(withoutCa.message).not.toContain('hunter2')

    const otherCa = await refusal(`rediss://127.0.0.1:${server.port}?tls_ca=${certs.otherCa}`)
    expect(otherCa.message).toMatch(
      /TLS: the server certificate (is signed by an unknown CA|chains to a self-signed CA)/,
    )
  })

  it('refuses a certificate that does not hold tls_servername: a name mismatch', async () => {
    const error = await refusal(
      `rediss://127.0.0.1:${server.port}?tls_ca=${certs.ca}&tls_servername=cache.example.org`,
    )
    expect(error.message).toContain('TLS: the server certificate does not name this host (name mismatch')
    expect(error.message).toContain('cache.example.org')
  })

  it('refuses an expired certificate and says it expired', async () => {
    const error = await refusal(`rediss://127.0.0.1:${expired.port}?tls_ca=${certs.ca}`)
    expect(error.message).toContain('TLS: the server certificate has expired')
    expect(error.message).toContain('CERT_HAS_EXPIRED')
  })

  it('refuses a TLS file that cannot be read, naming its path', async () => {
    const missing = join(certs.dir, 'no-such-ca.pem')
    const error = await refusal(`rediss://127.0.0.1:${server.port}?tls_ca=${missing}`)
    expect(error).toMatchObject({ code: 'SLUICE_INVALID_CONFIG' })
    expect(error.message).toContain(`cannot read tls_ca ${missing}`)
  })
})

describe('a server that requires client certificates (--tls-auth-clients yes)', () => {
  let server: RedisProcess
  beforeAll(async () => {
    server = await tlsRedis({ authClients: 'yes' })
  })

  it('connects with tls_cert and tls_key', async () => {
    const handle = await openStore(
      `rediss://127.0.0.1:${server.port}?tls_ca=${certs.ca}&tls_cert=${certs.clientCert}&tls_key=${certs.clientKey}`,
      { prefix: 'tls-c' },
    )
    await decides(handle)
  })

  it('without a client certificate is refused, and says one is required', async () => {
    const error = await refusal(`rediss://127.0.0.1:${server.port}?tls_ca=${certs.ca}`)
    // The server's alert, or (when the reset arrives first) the reset with what it likely means.
    expect(error.message).toMatch(
      /TLS: the server requires a client certificate \(set tls_cert and tls_key\)|ECONNRESET.*if it requires a client certificate, set tls_cert and tls_key/,
    )
  })
})

describe('a reload reads the TLS files again', () => {
  it('a rotated server certificate is refused with its cause in the log and /readyz until the new CA is read', async () => {
    const caFile = join(certs.dir, 'rotating-ca.pem')
    copyFileSync(certs.ca, caFile)
    const certFile = join(certs.dir, 'rotating-server.pem')
    copyFileSync(certs.serverCert, certFile)
    const server = await tlsRedis({ cert: certFile })
    const yaml = `store:\n  url: rediss://:pw-not-shown@127.0.0.1:${server.port}\n  tls: { ca: ${caFile} }\n${POLICIES}`
    const config = parseConfig(yaml, 'rotate.yaml')
    const lines: { msg: string; error?: string }[] = []
    const logger = pino(
      { level: 'info' },
      { write: (line: string) => void lines.push(JSON.parse(line) as { msg: string }) },
    )
    const handle = await openStore(config.store, { prefix: 'tls-r', tls: config.storeTls!, logger })
    const { service, url } = await startService(yaml, { store: handle, logger })
    expect((await get(`${url}/readyz`)).body).toMatchObject({ reachable: true })

    // The server comes back with a certificate from another CA (the operator rotates both ends).
    copyFileSync(certs.otherServerCert, certFile)
    await server.restart()
    const refused = await eventually(async () => {
      const ready = await get(`${url}/readyz`)
      return ready.body.reachable === false && /TLS:/.test(String(ready.body.message)) ? ready : undefined
    })
    expect(String(refused.body.message)).toMatch(
      /TLS: the server certificate (is signed by an unknown CA|chains to a self-signed CA)/,
    )
    expect(JSON.stringify(refused.body)).not.toContain('pw-not-shown')
    // Said once, whether the first failure after the restart is the refused certificate
    // ("connection lost") or a refused connection came first ("reconnect refused").
    const told = lines.filter((line) => /TLS: the server certificate/.test(line.msg))
    expect(told).toHaveLength(1)
    expect(told[0]!.msg).toContain('rediss://:***@127.0.0.1')
    expect(JSON.stringify(lines)).not.toContain('pw-not-shown')

    // The new CA is written to the same path; the same config reloaded reads it.
    copyFileSync(certs.otherCa, caFile)
    service.reload(parseConfig(yaml, 'rotate.yaml'))
    expect(lines.some((line) => line.msg.startsWith('store TLS files read again'))).toBe(true)
    await eventually(async () => ((await get(`${url}/readyz`)).body.reachable === true ? true : undefined))
    expect((await post(`${url}/v1/check`, { policy: 'api', key: 'after' })).body).toMatchObject({
      allowed: true,
    })
    expect((await post(`${url}/v1/check`, { policy: 'api', key: 'after' })).body.degraded).toBeUndefined()
  })

  it('a file that cannot be read on reload keeps the previous ones, and says so', async () => {
    const caFile = join(certs.dir, 'vanishing-ca.pem')
    copyFileSync(certs.ca, caFile)
    const server = await tlsRedis()
    const yaml = `store:\n  url: rediss://127.0.0.1:${server.port}\n  tls: { ca: ${caFile} }\n${POLICIES}`
    const config = parseConfig(yaml, 'vanish.yaml')
    const lines: { msg: string }[] = []
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) })
    const handle = await openStore(config.store, { prefix: 'tls-v', tls: config.storeTls! })
    const { service, url } = await startService(yaml, { store: handle, logger })
    rmSync(caFile)
    service.reload(config)
    const told = lines.find((line) => line.msg.startsWith('store TLS files not read again'))
    expect(told?.msg).toContain(`cannot read tls_ca ${caFile}`)
    expect((await post(`${url}/v1/check`, { policy: 'api', key: 'k' })).body).toMatchObject({ allowed: true })
  })
})

describe('sluice serve and sluice check (the built CLI) with store.tls', () => {
  let server: RedisProcess
  beforeAll(async () => {
    server = await tlsRedis({ authClients: 'yes' })
  })

  function configFile(name: string, tls: string): string {
    const file = join(certs.dir, name)
    writeFileSync(
      file,
      `store:\n  url: rediss://:cli-SECRET@127.0.0.1:${server.port}\n  tls: ${tls}\n${POLICIES}`,
    )
    return file
  }

  it('serves with the CA, client certificate and key of store.tls; check prints their paths', async () => {
    const file = configFile(
      'cli-ok.yaml',
      `{ ca: ${certs.ca}, cert: ${certs.clientCert}, key: ${certs.clientKey}, servername: localhost }`,
    )
    const check = startCli(['check', '--config', file])
    expect(await check.exited, check.output()).toBe(0)
    expect(check.output()).toContain(
      `  store tls: ca ${certs.ca}, client cert ${certs.clientCert}, key ${certs.clientKey}, servername localhost`,
    )
    expect(check.output()).not.toContain('SECRET')
    expect(check.output()).not.toContain('BEGIN')

    const serve = startCli(['serve', '--config', file, '--port', '0'], { SLUICE_LOG_LEVEL: 'warn' })
    try {
      const url = await servingUrl(serve)
      expect((await get(`${url}/readyz`)).body).toMatchObject({ ready: true, reachable: true })
      expect((await post(`${url}/v1/check`, { policy: 'api', key: 'cli' })).body).toMatchObject({
        allowed: true,
      })
    } finally {
      serve.child.kill('SIGTERM')
      await serve.exited
    }
  })

  it('stops the start with the certificate problem, the password redacted', async () => {
    const file = configFile(
      'cli-wrong-ca.yaml',
      `{ ca: ${certs.otherCa}, cert: ${certs.clientCert}, key: ${certs.clientKey} }`,
    )
    const serve = startCli(['serve', '--config', file, '--port', '0'])
    expect(await serve.exited).toBe(1)
    expect(serve.output()).toContain(`sluice: cannot connect to rediss://:***@127.0.0.1:${server.port}`)
    expect(serve.output()).toMatch(
      /TLS: the server certificate (is signed by an unknown CA|chains to a self-signed CA)/,
    )
    expect(serve.output()).not.toContain('SECRET')
  })
})

describe('rediss+cluster:// to a Redis Cluster that speaks only TLS (--tls-cluster yes)', () => {
  let cluster: RedisClusterServers
  let nodes: string
  beforeAll(async () => {
    cluster = await startCluster({ tls: { cert: certs.serverCert, key: certs.serverKey, ca: certs.ca } })
    nodes = cluster.ports
      .slice(0, 2)
      .map((port) => `127.0.0.1:${port}`)
      .join(',')
  })
  afterAll(async () => {
    await cluster?.stop()
  })

  it('connects with tls_ca, to the nodes it discovers too, and decides', async () => {
    const handle = await openStore(`rediss+cluster://${nodes}?tls_ca=${certs.ca}`, { prefix: 'tls-cluster' })
    const { url } = await startService(POLICIES, { store: handle })
    // Keys on many slots, so not only the nodes the URL names are asked.
    for (let i = 0; i < 12; i++) {
      const answer = await post(`${url}/v1/check`, { policy: 'api', key: `spread-${i}` })
      expect(answer.body).toMatchObject({ allowed: true, remaining: 4 })
      expect(answer.body.degraded).toBeUndefined()
    }
  })

  it('refuses an unknown CA with its cause', async () => {
    const error = await refusal(`rediss+cluster://:cluster-SECRET@${nodes}?tls_ca=${certs.otherCa}`)
    expect(error.message).toContain('cannot connect to rediss+cluster://:***@127.0.0.1:')
    expect(error.message).toMatch(
      /TLS: the server certificate (is signed by an unknown CA|chains to a self-signed CA)/,
    )
    expect(error.message).not.toContain('SECRET')
  })
})

describe('postgres://...?sslmode=verify-full with tls_ca (ssl=on)', () => {
  let server: PostgresServer
  let base: string
  beforeAll(async () => {
    server = await startPostgres({ ssl: { cert: certs.serverCert, key: certs.serverKey } })
    base = `postgres://sluice:pg-secret@127.0.0.1:${server.port}/postgres?sslmode=verify-full`
  })
  afterAll(async () => {
    await server?.stop()
  })

  it('connects with the CA in tls_ca and decides', async () => {
    await decides(await openStore(`${base}&tls_ca=${certs.ca}`, { prefix: 'unused' }))
  })

  it('connects with the CA from store.tls', async () => {
    await decides(await openStore(base, { prefix: 'unused', tls: { ca: certs.ca, servername: 'localhost' } }))
  })

  it('refuses an unknown CA and a wrong server name, with their causes (password redacted)', async () => {
    const unknown = await refusal(`${base}&tls_ca=${certs.otherCa}`)
    expect(unknown.message).toContain(`cannot connect to postgres://sluice:***@127.0.0.1:${server.port}`)
    expect(unknown.message).toMatch(
      /TLS: the server certificate (is signed by an unknown CA|chains to a self-signed CA)/,
    )
    expect(unknown.message).not.toContain('pg-secret')

    const mismatch = await refusal(`${base}&tls_ca=${certs.ca}&tls_servername=db.example.org`)
    expect(mismatch.message).toContain('TLS: the server certificate does not name this host (name mismatch')
  })
})

/** Poll `probe` (every 100 ms, up to 15 s) until it returns a value. */
async function eventually<T>(probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + 15_000
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error('condition not met within 15 s')
    await new Promise((r) => setTimeout(r, 100))
  }
}
