// The bounded HTTP/2 listener under the gRPC front: node:net accepts (connection cap), node:http2
// makes the sessions (stream and memory bounds), and each connection is watched for its handshake
// and idle time; with TLS, node:tls makes the handshake first (with the certificate in force when
// the connection came). Knows nothing of gRPC: grpc.ts answers the streams.
import type { IncomingHttpHeaders, ServerHttp2Session, ServerHttp2Stream } from 'node:http2'
import { createServer as createHttp2Server } from 'node:http2'
import type { AddressInfo, Socket } from 'node:net'
import { createServer } from 'node:net'
import type { SecureContextOptions, TLSSocket } from 'node:tls'
import { createServer as createTlsServer } from 'node:tls'
import { settlesWithin } from '../server/plumbing.js'
import type { ListeningAddress } from '../server/types.js'
import type { PeerSubject } from './peers.js'
import type { GrpcSettings } from './settings.js'

export type ListenerBounds = Pick<
  GrpcSettings,
  'maxConnections' | 'handshakeTimeoutMs' | 'idleTimeoutMs' | 'maxConcurrentStreams' | 'maxSessionMemoryMb'
>

/** What answers the streams of the listener's connections. */
export interface StreamHandler {
  /**
   * Answers one stream; `peer` is the connection's remote address, `subject` the subject of the
   * client certificate it showed (only when client certificates are required, so verified).
   */
  opened(
    stream: ServerHttp2Stream,
    headers: IncomingHttpHeaders,
    peer: string | undefined,
    subject: PeerSubject | undefined,
  ): void
  /** The stream is closed, however it ended (the listener's one 'close' listener of the stream calls it). */
  closed(stream: ServerHttp2Stream): void
}

/** TLS for the listener: the secure context's files, and whether clients must show a certificate. */
export interface Http2Tls {
  readonly context: SecureContextOptions
  readonly requireClientCert: boolean
}

export interface Http2Listener {
  listen(port: number, host: string): Promise<ListeningAddress>
  /** Stop accepting, send GOAWAY, let open streams finish (up to `graceMs`), then drop every connection. */
  shutdown(graceMs: number): Promise<void>
  /** With TLS: the certificate, key and CA for connections accepted from now on; open ones keep theirs. */
  setSecureContext(context: SecureContextOptions): void
}

/** A connection's open streams, its idle timer (refreshed as the last one closes), and who answers them. */
interface OpenStreams {
  streams: number
  readonly idle: NodeJS.Timeout
  readonly handler: StreamHandler
}
const OPEN = Symbol('open streams')
type WatchedStream = ServerHttp2Stream & { [OPEN]?: OpenStreams }

/** Shared by every stream (`this`), so a stream allocates no closure to be counted. */
function streamClosed(this: WatchedStream): void {
  const open = this[OPEN]!
  if (--open.streams === 0) open.idle.refresh()
  open.handler.closed(this)
}

/**
 * Once node:http2 has ended a session it waits for the socket to flush its last bytes, forever if
 * the peer stopped reading; the socket is dropped when the session is still ended this long later.
 */
const FLUSH_GRACE_MS = 1000

/**
 * An HTTP/2 listener (cleartext, prior knowledge, as Envoy's gRPC client speaks it) whose every
 * connection is bounded: at most `maxConnections` at once (more are closed on accept), the preface
 * and SETTINGS within `handshakeTimeoutMs`, GOAWAY after `idleTimeoutMs` with no stream open, at
 * most `maxConcurrentStreams` streams (more are refused) and `maxSessionMemoryMb` of memory (past
 * it new streams are refused, and node:http2 ends a session that keeps trying).
 */
export function http2Listener(bounds: ListenerBounds, handler: StreamHandler, tls?: Http2Tls): Http2Listener {
  // node:http2's own server makes the sessions but never listens: the accepting net.Server keeps
  // the cap and the raw socket, the one handle that can drop a peer whose writes never drain.
  const sessions = createHttp2Server({
    maxSessionMemory: bounds.maxSessionMemoryMb,
    settings: { maxConcurrentStreams: bounds.maxConcurrentStreams },
  })
  let accepted: ServerHttp2Session | undefined
  sessions.on('session', (session) => {
    accepted = session
  })
  /** Every connection: its socket, and a graceful close (GOAWAY, then dropped once it has ended). */
  const connections = new Set<{ socket: Socket; close(): void }>()
  /** Every accepted socket under TLS (node:tls bounds the handshake by handshakeTimeoutMs). */
  const encrypted = new Set<Socket>()
  let closing = false

  // node:tls takes each accepted socket the same way (an injected 'connection'): it verifies the
  // client certificate when one is required and hands over the socket once the handshake is done.
  const secure =
    tls === undefined
      ? undefined
      : createTlsServer({
          ...tls.context,
          ALPNProtocols: ['h2'],
          requestCert: tls.requireClientCert,
          rejectUnauthorized: tls.requireClientCert,
          handshakeTimeout: bounds.handshakeTimeoutMs,
        })
  secure?.on('secureConnection', (socket: TLSSocket) => {
    socket.on('error', () => {})
    const subject = tls?.requireClientCert === true ? socket.getPeerCertificate().subject : undefined
    take(socket, socket.remoteAddress, subject)
  })
  secure?.on('tlsClientError', (_error: Error, socket: TLSSocket) => socket.destroy())

  const server = createServer((socket) => {
    socket.on('error', () => {})
    if (secure === undefined) {
      take(socket, socket.remoteAddress, undefined)
      return
    }
    encrypted.add(socket)
    socket.once('close', () => encrypted.delete(socket))
    secure.emit('connection', socket)
  })
  server.maxConnections = bounds.maxConnections

  function take(socket: Socket, peer: string | undefined, subject: PeerSubject | undefined): void {
    // A handshake that ends after shutdown began gets no session to drain.
    if (closing) {
      socket.destroy()
      return
    }
    // Emitting 'connection' is how node:http2 takes a socket; it makes the session synchronously.
    sessions.emit('connection', socket)
    const session = accepted
    accepted = undefined
    if (session === undefined) {
      socket.destroy()
      return
    }
    watch(session, socket, peer, subject)
  }

  function watch(
    session: ServerHttp2Session,
    socket: Socket,
    peer: string | undefined,
    subject: PeerSubject | undefined,
  ): void {
    const handshake = setTimeout(() => socket.destroy(), bounds.handshakeTimeoutMs)
    session.once('remoteSettings', () => clearTimeout(handshake))
    // Fires once the connection has had no stream for idleTimeoutMs (refreshed as the last one closes).
    const idle = setTimeout(() => {
      if (open.streams === 0) entry.close()
    }, bounds.idleTimeoutMs)
    const open: OpenStreams = { streams: 0, idle, handler }
    let flushed: NodeJS.Timeout | undefined
    function closing(): void {
      flushed ??= setTimeout(() => {
        if (session.destroyed) socket.destroy()
        else flushed!.refresh()
      }, FLUSH_GRACE_MS)
    }
    const entry = {
      socket,
      close() {
        session.close()
        closing()
      },
    }
    connections.add(entry)
    session.on('stream', (stream: WatchedStream, headers: IncomingHttpHeaders) => {
      open.streams++
      stream[OPEN] = open
      stream.on('close', streamClosed)
      handler.opened(stream, headers, peer, subject)
    })
    // A protocol error, too many refused streams, or the peer's GOAWAY: node:http2 ends the session.
    session.once('error', closing)
    session.once('goaway', closing)
    socket.once('close', () => {
      connections.delete(entry)
      clearTimeout(handshake)
      clearTimeout(idle)
      clearTimeout(flushed)
    })
  }

  return {
    listen(port, host) {
      return new Promise((resolve, reject) => {
        server.once('error', reject)
        server.listen(port, host, () => {
          server.off('error', reject)
          const address = server.address() as AddressInfo
          const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address
          resolve({ host: address.address, port: address.port, url: `${shown}:${address.port}` })
        })
      })
    },
    async shutdown(graceMs) {
      closing = true
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()))
      for (const entry of connections) entry.close()
      if (!(await settlesWithin(stopped, graceMs))) {
        for (const { socket } of connections) socket.destroy()
        // The raw sockets under TLS: those still in their handshake are not in `connections`.
        for (const socket of encrypted) socket.destroy()
      }
      await stopped
    },
    setSecureContext(context) {
      secure?.setSecureContext(context)
    },
  }
}
