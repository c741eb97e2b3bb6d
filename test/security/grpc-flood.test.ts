// The gRPC listener Envoy calls, under the HTTP listener's rules: a connection cap, handshake and
// idle timeouts, a stream bound and a memory bound per connection, calls that do not finish reset,
// and the HTTP listener answering while the gRPC one is flooded. Raw HTTP/2 (node:http2) and raw
// sockets (node:net) against the real service on 127.0.0.1, every bound made small through
// `grpc:` so each case ends in a few seconds; the flood runs against `sluice serve` (dist/cli.js)
// with a small file limit.
import type { ChildProcess } from 'node:child_process'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import type { ClientHttp2Session } from 'node:http2'
import { constants } from 'node:http2'
import type { Socket } from 'node:net'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pino } from 'pino'
import { afterEach, describe, expect, it } from 'vitest'
import { parseEnvoyConfig } from '../../packages/sluice-server/src/envoy/config.js'
import { describeConfig, parseConfig } from '../../packages/sluice-server/src/server/config.js'
import { CLI } from '../helpers/cli-process.js'
import type { RlsClient } from '../helpers/envoy.js'
import { d, rlsClient } from '../helpers/envoy.js'
import type { CallEnd } from '../helpers/raw-grpc.js'
import { frame, handshaken, rawCall, h2 as rawSession } from '../helpers/raw-grpc.js'
import { freePort, servicesClosedAfterEach } from '../helpers/service.js'

const startService = servicesClosedAfterEach()
const RULES =
  'domain: d\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 1000000 }\n'
const POLICIES = 'policies:\n  api: { algorithm: fixed-window, limit: 1000000, window: 1m }\n'
const PREFACE = 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'

const clients: RlsClient[] = []
const sessions: ClientHttp2Session[] = []
const sockets: Socket[] = []
afterEach(() => {
  for (const client of clients.splice(0)) client.close()
  for (const session of sessions.splice(0)) session.destroy()
  for (const socket of sockets.splice(0)) socket.destroy()
})

/** A service with Envoy rules and a gRPC listener on a free port, bounded by `grpc` (YAML flow map entries). */
async function startGrpc(grpc: string): Promise<{ grpcPort: number; url: string }> {
  const { service, url } = await startService(`${POLICIES}grpc: { port: 0, ${grpc} }\n`, {
    envoy: parseEnvoyConfig([{ file: 'rules.yaml', text: RULES }]),
  })
  return { grpcPort: service.grpcAddress!.port, url }
}

/** A raw HTTP/2 client session (closed after the test). */
function h2(port: number, settings: Record<string, number> = {}): ClientHttp2Session {
  const session = rawSession(port, settings)
  sessions.push(session)
  return session
}

/** Resolves once the server closed `socket` (at once when it already has). */
const socketClosed = (socket: Socket) =>
  new Promise<void>((resolve) => (socket.closed ? resolve() : socket.once('close', () => resolve())))
const sessionClosed = (session: ClientHttp2Session) =>
  new Promise<void>((resolve) => session.once('close', () => resolve()))

/** A raw TCP connection to `port` that sends nothing unless told to; resolves once connected. */
async function tcp(port: number): Promise<Socket> {
  const socket = connect(port, '127.0.0.1')
  socket.on('error', () => {})
  // Read (and drop) what arrives, so the server's close is seen.
  socket.resume()
  sockets.push(socket)
  await new Promise((resolve) => socket.once('connect', resolve))
  return socket
}

async function until(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

/** A ShouldRateLimit call through grpc-js, the client the Envoy tests use. */
async function grpcJsCall(port: number): Promise<string> {
  const client = rlsClient(`127.0.0.1:${port}`)
  clients.push(client)
  return (await client.shouldRateLimit({ domain: 'd', descriptors: [d(['user', 'ok'])] })).overall_code
}

describe('grpc: bounds in the config', () => {
  it("defaults to the HTTP listener's bounds where one applies, and sluice check prints them", () => {
    const config = parseConfig(`${POLICIES}grpc: { port: 8081 }\n`, 'test.yaml')
    expect(config.grpc).toMatchObject({
      maxConnections: 1024,
      handshakeTimeoutMs: 10_000,
      idleTimeoutMs: 300_000,
      callTimeoutMs: 10_000,
      maxConcurrentStreams: 100,
      maxSessionMemoryMb: 10,
    })
    const tuned = parseConfig(
      `${POLICIES}grpc:\n  port: 8081\n  maxConnections: 64\n  handshakeTimeout: 2s\n  idleTimeout: 1m\n  callTimeout: 500ms\n  maxConcurrentStreams: 32\n  maxSessionMemoryMb: 4\n`,
      'test.yaml',
    )
    expect(describeConfig(tuned)).toContain(
      'grpc: max 64 connections; handshake 2000ms, idle 60000ms, call 500ms; per connection 32 streams, 4 MB',
    )
  })

  it('keeps the bounds it started with on reload, and names the ones that wait for a restart', async () => {
    const lines: { msg: string; settings?: string[] }[] = []
    const { service } = await startService(`${POLICIES}grpc: { port: 0, maxConnections: 8 }\n`, {
      envoy: parseEnvoyConfig([{ file: 'rules.yaml', text: RULES }]),
      logger: pino({ level: 'warn' }, { write: (line: string) => lines.push(JSON.parse(line)) }),
    })
    service.reload(
      parseConfig(
        `${POLICIES}grpc: { port: 0, maxConnections: 9, callTimeout: 1s, trustedPeers: [private] }\n`,
        't.yaml',
      ),
    )
    expect(lines.find((line) => line.msg.includes('take effect on restart'))?.settings).toEqual([
      'grpc.maxConnections',
      'grpc.callTimeout',
    ])
  })

  it('refuses bounds that cannot work, naming file and line', async () => {
    await expect(startService(`${POLICIES}grpc:\n  port: 0\n  maxConnections: 0\n`)).rejects.toThrow(
      /^test\.yaml:5: grpc\.maxConnections: /,
    )
    await expect(startService(`${POLICIES}grpc:\n  port: 0\n  idleTimeout: 5 minutes\n`)).rejects.toThrow(
      /^test\.yaml:5: grpc\.idleTimeout: .*not a duration/,
    )
    await expect(startService(`${POLICIES}grpc:\n  port: 0\n  handshakeTimeout: 0\n`)).rejects.toThrow(
      /^test\.yaml:5: grpc\.handshakeTimeout: /,
    )
    // Longer than a Node timer holds (it would fire at once).
    await expect(startService(`${POLICIES}grpc:\n  port: 0\n  idleTimeout: 30d\n`)).rejects.toThrow(
      /^test\.yaml:5: grpc\.idleTimeout: at most 24d/,
    )
    await expect(startService(`${POLICIES}grpc:\n  port: 0\n  maxConcurrentStreams: 1.5\n`)).rejects.toThrow(
      /^test\.yaml:5: grpc\.maxConcurrentStreams: /,
    )
    await expect(startService(`${POLICIES}grpc:\n  port: 0\n  maxSessionMemoryMb: 0\n`)).rejects.toThrow(
      /^test\.yaml:5: grpc\.maxSessionMemoryMb: /,
    )
    await expect(startService(`${POLICIES}grpc:\n  port: 0\n  idleTimout: 1s\n`)).rejects.toThrow(
      /^test\.yaml:5: grpc\.idleTimout: unknown key; did you mean 'idleTimeout'\?/,
    )
  })
})

describe('the gRPC listener holds its bounds', () => {
  it('closes connections past grpc.maxConnections on accept, and takes one again when a slot frees', async () => {
    const { grpcPort } = await startGrpc('maxConnections: 3')
    const held = [h2(grpcPort), h2(grpcPort), h2(grpcPort)]
    await Promise.all(held.map(handshaken))
    // One more: closed by the server without a byte (no SETTINGS), while the three stay open.
    const extra = await tcp(grpcPort)
    let bytes = 0
    extra.on('data', (chunk: Buffer) => (bytes += chunk.length))
    extra.write(PREFACE)
    await socketClosed(extra)
    expect(bytes).toBe(0)
    expect(held.every((session) => !session.closed && !session.destroyed)).toBe(true)
    held[0]!.destroy()
    await until(() => held[0]!.destroyed, 1000, 'the session to close')
    await expect(grpcJsCall(grpcPort)).resolves.toBe('OK')
  })

  it('closes a connection that sends nothing, or its preface too slowly, after grpc.handshakeTimeout', async () => {
    const { grpcPort } = await startGrpc('handshakeTimeout: 300ms')
    const silent = await tcp(grpcPort)
    const dripping = await tcp(grpcPort)
    let sent = 0
    const drip = setInterval(() => {
      if (!dripping.destroyed && sent < PREFACE.length) dripping.write(PREFACE[sent++]!)
    }, 100)
    try {
      await Promise.all([socketClosed(silent), socketClosed(dripping)])
    } finally {
      clearInterval(drip)
    }
    // Cut while the preface was still arriving (a byte every 100 ms takes 2.4 s for 24).
    expect(sent).toBeLessThan(PREFACE.length)
    // A client that completes the handshake in time is served.
    await expect(grpcJsCall(grpcPort)).resolves.toBe('OK')
  })

  it('sends GOAWAY to a connection idle for grpc.idleTimeout and closes it; one with a call open stays', async () => {
    const { grpcPort } = await startGrpc('idleTimeout: 1s, callTimeout: 20s')
    const idle = h2(grpcPort)
    const busy = h2(grpcPort)
    let goaway = false
    idle.once('goaway', () => (goaway = true))
    await Promise.all([handshaken(idle), handshaken(busy)])
    const open = rawCall(busy, { end: false })
    await sessionClosed(idle)
    expect(goaway).toBe(true)
    expect(busy.closed || busy.destroyed).toBe(false)
    // The open call finishes normally; then the busy connection is idle too and gets closed.
    open.stream.end(frame())
    expect(await open.ended).toMatchObject({ grpcStatus: 0, rstCode: 0 })
    await sessionClosed(busy)
  })

  it('refuses streams past grpc.maxConcurrentStreams (REFUSED_STREAM) and resets calls open past grpc.callTimeout', async () => {
    const { grpcPort, url } = await startGrpc('maxConcurrentStreams: 10, callTimeout: 1s')
    // Sent before the server's SETTINGS arrive, so the client does not hold them back itself.
    const session = h2(grpcPort)
    const calls = Array.from({ length: 30 }, () => rawCall(session, { end: false }))
    const ends = await Promise.all(calls.map((c) => c.ended))
    const refused = ends.filter((e) => e.rstCode === constants.NGHTTP2_REFUSED_STREAM)
    expect(refused).toHaveLength(20)
    // The 10 accepted calls never finished their request: each ended by the server after
    // callTimeout, with DEADLINE_EXCEEDED or a reset.
    const cut = ends.filter((e) => e.rstCode !== constants.NGHTTP2_REFUSED_STREAM)
    expect(cut).toHaveLength(10)
    for (const end of cut)
      expect(end.grpcStatus === 4 || end.rstCode === constants.NGHTTP2_CANCEL, JSON.stringify(end)).toBe(true)
    expect((await fetch(`${url}/healthz`)).status).toBe(200)
    await expect(grpcJsCall(grpcPort)).resolves.toBe('OK')
  })

  it('resets calls whose answer the client never reads after grpc.callTimeout', async () => {
    const { grpcPort } = await startGrpc('callTimeout: 1s')
    // A receive window of 0: the server can send the answer's headers but never its message.
    const session = h2(grpcPort, { initialWindowSize: 0 })
    await handshaken(session)
    const ends = await Promise.all(Array.from({ length: 5 }, () => rawCall(session).ended))
    for (const end of ends)
      expect(end).toMatchObject({ httpStatus: 200, grpcStatus: undefined, rstCode: constants.NGHTTP2_CANCEL })
    await expect(grpcJsCall(grpcPort)).resolves.toBe('OK')
  })

  it('refuses new streams once a connection holds grpc.maxSessionMemoryMb of unsent answers', async () => {
    const { grpcPort } = await startGrpc(
      'maxSessionMemoryMb: 1, maxConcurrentStreams: 100000, callTimeout: 30s',
    )
    const session = h2(grpcPort, { initialWindowSize: 0 })
    await handshaken(session)
    // Answers the client never reads pile up until the memory bound refuses new streams
    // (ENHANCE_YOUR_CALM) or the server ends the connection; at most 5,000 calls.
    const ends: Promise<CallEnd>[] = []
    let refused = 0
    for (let batch = 0; batch < 50 && refused === 0 && !session.destroyed; batch++) {
      for (let i = 0; i < 100 && !session.destroyed; i++) {
        const { ended } = rawCall(session)
        ended.then((end) => {
          if (end.rstCode === constants.NGHTTP2_ENHANCE_YOUR_CALM) refused++
        })
        ends.push(ended)
      }
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    expect(refused > 0 || session.destroyed).toBe(true)
    expect(ends.length).toBeLessThan(5000)
    session.destroy()
    await expect(grpcJsCall(grpcPort)).resolves.toBe('OK')
  })
})

describe('sluice serve: the HTTP listener answers while the gRPC one is flooded', () => {
  let dir: string | undefined
  let child: ChildProcess | undefined
  afterEach(async () => {
    if (child !== undefined && child.exitCode === null) {
      const exited = new Promise((resolve) => child!.once('exit', resolve))
      child.kill('SIGKILL')
      await exited
    }
    child = undefined
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  })

  it('holds 300 idle connections, slow prefaces and never-read streams to the gRPC bounds under a file limit of 128', async () => {
    dir = mkdtempSync(join(tmpdir(), 'sluice-grpc-flood-'))
    const [port, grpcPort] = [await freePort(), await freePort()]
    writeFileSync(join(dir, 'rules.yaml'), RULES)
    writeFileSync(
      join(dir, 'sluice.yaml'),
      `${POLICIES}grpc:\n  port: ${grpcPort}\n  maxConnections: 32\n  handshakeTimeout: 1s\n  idleTimeout: 2s\n  callTimeout: 1s\n  maxConcurrentStreams: 10\nenvoy: { config: rules.yaml }\n`,
    )
    // A file limit the flood would exhaust without the connection cap (as `ulimit -n` in production).
    child = spawn(
      '/bin/sh',
      [
        '-c',
        'ulimit -n 128 && exec "$0" "$@"',
        process.execPath,
        CLI,
        'serve',
        '--config',
        join(dir, 'sluice.yaml'),
        '--port',
        String(port),
      ],
      {
        env: { ...process.env, SLUICE_STORE: '', REDIS_URL: '', SLUICE_ADMIN_TOKEN: '' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    )
    let output = ''
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk))
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk))
    await until(() => output.includes(`gRPC 127.0.0.1:${grpcPort}`), 15_000, 'the banner').catch(
      (error: Error) => {
        throw new Error(`${error.message}; the service printed: ${output}`)
      },
    )
    const healthy = async () =>
      (await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(5000) })).status
    const check = async () =>
      (
        await fetch(`http://127.0.0.1:${port}/v1/check`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ policy: 'api', key: 'k' }),
          signal: AbortSignal.timeout(5000),
        })
      ).status

    // The flood: 3 sessions each opening 20 streams whose answers they never read, 3 connections
    // that send the preface a byte at a time, then 300 that send nothing.
    const readers = Array.from({ length: 3 }, () => h2(grpcPort, { initialWindowSize: 0 }))
    await Promise.all(readers.map(handshaken))
    const streamEnds = readers.flatMap((session) => Array.from({ length: 20 }, () => rawCall(session).ended))
    const slow = await Promise.all(Array.from({ length: 3 }, () => tcp(grpcPort)))
    let sent = 0
    const drip = setInterval(() => {
      for (const socket of slow) if (!socket.destroyed) socket.write(PREFACE[sent % PREFACE.length]!)
      sent++
    }, 200)
    const idle = await Promise.all(Array.from({ length: 300 }, () => tcp(grpcPort)))
    try {
      expect(await healthy()).toBe(200)
      expect(await check()).toBe(200)
      // Past the cap, connections are closed as they arrive; the rest after the handshake timeout.
      await Promise.all([...idle, ...slow].map(socketClosed))
    } finally {
      clearInterval(drip)
    }
    // No stream of the never-reading sessions got its answer through: each was reset by the
    // server after callTimeout (or refused past maxConcurrentStreams).
    for (const end of await Promise.all(streamEnds)) {
      expect(end.grpcStatus).toBeUndefined()
      expect([constants.NGHTTP2_CANCEL, constants.NGHTTP2_REFUSED_STREAM]).toContain(end.rstCode)
    }
    expect(await healthy()).toBe(200)
    expect(await check()).toBe(200)
    await expect(grpcJsCall(grpcPort)).resolves.toBe('OK')
  }, 60_000)
})
