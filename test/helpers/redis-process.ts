// One redis-server child process the fault tests can kill, pause, resume and restart on the same
// port. Every process started here is killed when the test process exits, whatever happens.
// With `tls`, the port speaks only TLS (the plaintext port is off).
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { connect as tlsConnect } from 'node:tls'
import { freePort } from './redis-harness.js'

const live = new Set<ChildProcess>()
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL')
})

export interface RedisProcess {
  readonly port: number
  readonly pid: number
  /** Send a signal (SIGKILL, SIGSTOP, SIGCONT) to the server. */
  signal(signal: NodeJS.Signals): void
  /** Start a fresh server on the same port (after a kill), and wait until it answers. */
  restart(): Promise<void>
  /** Kill it for good and remove its folder. */
  stop(): Promise<void>
}

/** Resolves when something accepts connections on the port and answers PING (or asks for a password). */
export async function waitForPing(port: number, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = new Socket()
      const done = (v: boolean) => {
        socket.destroy()
        resolve(v)
      }
      socket.setTimeout(200, () => done(false))
      socket.once('error', () => done(false))
      socket.connect(port, '127.0.0.1', () => socket.write('PING\r\n'))
      // A server with a password answers PING with NOAUTH: up all the same.
      socket.once('data', (data) => done(/^(\+PONG|-NOAUTH)/.test(data.toString())))
    })
    if (ok) return
    await new Promise((r) => setTimeout(r, 20))
  }
  throw new Error(`redis on port ${port} did not answer PING within ${timeoutMs} ms`)
}

/** A TLS port's server files (read again by every start, so a test may replace them between restarts). */
export interface RedisTlsFiles {
  readonly cert: string
  readonly key: string
  /** The CA client certificates must chain to. */
  readonly ca: string
  /** `yes`: a client certificate is required; `no` (default): none is asked for. */
  readonly authClients?: 'yes' | 'no' | 'optional'
}

/** `waitForPing` over TLS, trusting any certificate and showing the server's own as the client's. */
async function waitForTlsPing(port: number, files: RedisTlsFiles, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = tlsConnect({
        port,
        host: '127.0.0.1',
        rejectUnauthorized: false,
        cert: readFileSync(files.cert),
        key: readFileSync(files.key),
      })
      const done = (v: boolean) => {
        socket.destroy()
        resolve(v)
      }
      socket.setTimeout(500, () => done(false))
      socket.once('error', () => done(false))
      socket.once('secureConnect', () => socket.write('PING\r\n'))
      socket.once('data', (data) => done(data.toString().startsWith('+PONG')))
    })
    if (ok) return
    await new Promise((r) => setTimeout(r, 20))
  }
  throw new Error(`redis on TLS port ${port} did not answer PING within ${timeoutMs} ms`)
}

/** Start one; `extra` are more redis-server arguments (`['--requirepass', 'secret']`). */
export async function startRedisProcess(
  options: { tls?: RedisTlsFiles; extra?: readonly string[] } = {},
): Promise<RedisProcess> {
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'sluice-fault-'))
  let child: ChildProcess
  const { tls } = options
  const ports =
    tls === undefined
      ? ['--port', String(port)]
      : [
          '--port',
          '0',
          '--tls-port',
          String(port),
          '--tls-cert-file',
          tls.cert,
          '--tls-key-file',
          tls.key,
          '--tls-ca-cert-file',
          tls.ca,
          '--tls-auth-clients',
          tls.authClients ?? 'no',
        ]

  async function launch(): Promise<void> {
    child = spawn(
      'redis-server',
      [
        ...ports,
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        dir,
        ...(options.extra ?? []),
      ],
      { stdio: 'ignore' },
    )
    live.add(child)
    const current = child
    current.once('exit', () => live.delete(current))
    await (tls === undefined ? waitForPing(port) : waitForTlsPing(port, tls))
  }

  async function killed(c: ChildProcess): Promise<void> {
    if (c.exitCode !== null || c.signalCode !== null) return
    await new Promise<void>((resolve) => {
      c.once('exit', () => resolve())
      c.kill('SIGKILL')
    })
  }

  await launch()
  return {
    port,
    get pid() {
      return child.pid ?? -1
    },
    signal(signal) {
      child.kill(signal)
    },
    async restart() {
      await killed(child)
      await launch()
    },
    async stop() {
      await killed(child)
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
