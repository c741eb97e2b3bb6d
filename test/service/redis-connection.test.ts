// The Redis connection of the real `sluice serve` process: a start that cannot connect names the
// connection's own error (a refused port, a certificate the client rejects), and a Redis lost while
// serving fails decisions at once (no command waits out the store timeout in a queue), is logged once
// when lost and once when back, whatever the number of reconnect attempts in between.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer as createNetServer, type Server, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createServer as createTlsServer } from 'node:tls'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { type CliProcess, servingUrl, startCli } from '../helpers/cli-process.js'
import { startRedisProcess } from '../helpers/redis-process.js'
import { post } from '../helpers/service.js'
import { makeCa } from '../helpers/tls-certs.js'

/** Poll until `test` holds; the bound only stops a test that would never pass. */
async function until(
  what: string,
  test: () => boolean | Promise<boolean>,
  timeoutMs = 20_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await test())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 30))
  }
}

function listening(server: Server, port = 0): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, '127.0.0.1', () => {
      const address = server.address()
      resolve(typeof address === 'object' && address !== null ? address.port : port)
    })
  })
}

function closed(server: Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()))
}

/** The pino lines a process printed, parsed. */
function logLines(cli: CliProcess): { level: number; msg: string; [field: string]: unknown }[] {
  return cli
    .output()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { level: number; msg: string })
}

describe('sluice serve cannot connect: the cause is shown', () => {
  let dir: string
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'sluice-connect-'))
  })
  afterEach(() => rmSync(dir, { recursive: true, force: true }))

  it('a closed port: ECONNREFUSED, not "Connection is closed."', async () => {
    const probe = createNetServer()
    const port = await listening(probe)
    await closed(probe)
    const cli = startCli(['serve', '--port', '0', '--store', `redis://127.0.0.1:${port}`])
    expect(await cli.exited).toBe(1)
    expect(cli.output()).toBe(
      `sluice: cannot connect to redis://127.0.0.1:${port}: connect ECONNREFUSED 127.0.0.1:${port}\n`,
    )
  })

  it('rediss:// to a server with a self-signed certificate: the certificate error and its code', async () => {
    // Self-signed: a CA certificate for localhost that nothing trusts.
    const { key, cert } = makeCa(dir, 'localhost')
    const peer = createTlsServer({ key: readFileSync(key), cert: readFileSync(cert) }, (socket) =>
      socket.destroy(),
    )
    peer.on('tlsClientError', () => {})
    const port = await listening(peer)
    try {
      const cli = startCli(['serve', '--port', '0', '--store', `rediss://user:secret@127.0.0.1:${port}`])
      expect(await cli.exited).toBe(1)
      expect(cli.output()).toBe(
        `sluice: cannot connect to rediss://user:***@127.0.0.1:${port}: TLS: the server certificate is self-signed and not in tls_ca: self-signed certificate (DEPTH_ZERO_SELF_SIGNED_CERT)\n`,
      )
    } finally {
      await closed(peer)
    }
  })
})

describe('sluice serve when Redis goes away and comes back', () => {
  it('decisions fail at once (no store timeouts), the loss and the return are logged once each', async () => {
    const redis = await startRedisProcess()
    const dir = mkdtempSync(join(tmpdir(), 'sluice-gone-'))
    const config = join(dir, 'sluice.yaml')
    writeFileSync(
      config,
      'policies:\n  api: { algorithm: fixed-window, limit: 1000, window: 1m }\n' +
        '  login: { algorithm: fixed-window, limit: 1000, window: 1m, onStoreError: closed }\n',
    )
    const store = `redis://127.0.0.1:${redis.port}`
    const cli = startCli(['serve', '--port', '0', '--config', config, '--store', store])
    // While Redis is down, its port resets every connection: each reconnect attempt is an `error`.
    const attempts: Socket[] = []
    const resetting = createNetServer((socket) => {
      attempts.push(socket)
      socket.resetAndDestroy()
    })
    try {
      const url = await servingUrl(cli)
      const check = async (policy: string) => post(`${url}/v1/check`, { policy, key: 'k' })
      expect((await check('login')).body).toMatchObject({ allowed: true })

      redis.signal('SIGKILL')
      await until('the port to be free', async () =>
        listening(resetting, redis.port).then(
          () => true,
          () => false,
        ),
      )
      await until('5 reconnect attempts', () => attempts.length >= 5)
      for (let i = 0; i < 10; i++) {
        expect((await check('login')).body).toMatchObject({ allowed: false, reason: 'store_unavailable' })
        expect((await check('api')).body).toMatchObject({ allowed: true, degraded: true })
      }
      await until('10 reconnect attempts', () => attempts.length >= 10)
      // What the failover layer said while Redis was down (after the restart a slow script load on a
      // loaded machine may time out, which is not what this test is about).
      const failing = logLines(cli).filter((line) => line.msg.startsWith('store redis is failing'))
      await closed(resetting)
      await redis.restart()
      await until('decisions from Redis again', async () => {
        const answer = (await check('login')).body as { allowed: boolean; degraded?: boolean }
        return answer.allowed && answer.degraded === undefined
      })

      const lines = logLines(cli)
      // Every failure reported while Redis was down is the client refusing at once, none a timeout.
      expect(failing.length).toBeGreaterThan(0)
      for (const line of failing) {
        expect(line).toMatchObject({ timeouts: 0 })
        expect(line.error).not.toMatch(/storeTimeout/)
      }
      const lost = lines.filter((line) => line.msg.includes('connection lost'))
      const back = lines.filter((line) => line.msg.includes('connection back'))
      expect(lost, cli.output()).toHaveLength(1)
      expect(lost[0]).toMatchObject({ level: 40, store })
      expect(lost[0]!.error).toMatch(/ECONNREFUSED|ECONNRESET/)
      expect(back, cli.output()).toHaveLength(1)
      expect(back[0]).toMatchObject({ level: 30, store })
      expect(cli.output()).not.toContain('Unhandled error event')
    } finally {
      resetting.close()
      cli.child.kill('SIGTERM')
      await cli.exited
      await redis.stop()
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
