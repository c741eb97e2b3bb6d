// The gRPC listener answering Envoy's envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit:
// the one unary method over node:http2 (listener.ts bounds the connections), its messages coded by
// rls-codec.ts as rls.proto describes them. Bounded messages, calls and streams; draining on close.
import type { IncomingHttpHeaders, ServerHttp2Stream } from 'node:http2'
import { constants } from 'node:http2'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Logger } from 'pino'
import type { Tracked } from './deadlines.js'
import { deadlines } from './deadlines.js'
import type { EnvoyContext, WireRequest, WireResponse } from './decide.js'
import { EnvoyRequestError, shouldRateLimit } from './decide.js'
import type { Http2Listener, Http2Tls } from './listener.js'
import { http2Listener } from './listener.js'
import type { PeerSubject } from './peers.js'
import { decodeRateLimitRequest, encodeRateLimitResponseFrame, MalformedMessageError } from './rls-codec.js'
import type { GrpcSettings } from './settings.js'

/**
 * Where rls.proto is: beside this module in src/envoy/, copied beside the chunks in dist/. The
 * listener codes its messages itself (rls-codec.ts); gRPC clients build theirs from this file.
 */
export function rlsProtoPath(): string {
  return join(dirname(fileURLToPath(import.meta.url)), 'rls.proto')
}

/** Options of proto-loader for a client built from rls.proto (the tests' clients use these). */
export const PROTO_OPTIONS = { keepCase: true, longs: Number, enums: String, defaults: true } as const

/** The path gRPC calls ShouldRateLimit by. */
export const RLS_PATH = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit'

/** The largest request accepted: Envoy's requests are a few hundred bytes. */
export const MAX_REQUEST_BYTES = 64 * 1024

/** gRPC status codes (grpc/doc/statuscodes.md) answered here; decide.ts's own come with its errors. */
const STATUS = {
  OK: 0,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
} as const

const CONTENT_TYPE = 'application/grpc+proto'
/** Only uncompressed messages are taken: Envoy sends them so, and a client told this sends no other. */
const ANSWER_HEADERS = {
  ':status': 200,
  'content-type': CONTENT_TYPE,
  'grpc-accept-encoding': 'identity',
}
const OK_TRAILERS = { 'grpc-status': String(STATUS.OK), 'grpc-message': 'OK' }
/** node:http2 copies the options it is given, so every answer passes this one. */
const ANSWER_OPTIONS = { waitForTrailers: true }

/** `grpc-timeout`: up to 8 digits and a unit (hours to nanoseconds), as milliseconds. */
const TIMEOUT = /^(\d{1,8})([HMSmun])$/
const TIMEOUT_UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 1e-3, n: 1e-6 }

/**
 * End a call with a status and no message: a trailers-only answer when nothing went out yet, then
 * a reset of what the client may still be sending (RFC 9113 8.1: the answer is complete); a reset
 * alone when the answer's headers are out.
 */
function endWith(stream: ServerHttp2Stream, code: number, message: string): void {
  if (stream.destroyed || stream.closed) return
  if (stream.headersSent) {
    stream.close(constants.NGHTTP2_CANCEL)
    return
  }
  stream.respond(
    {
      ':status': 200,
      'content-type': CONTENT_TYPE,
      'grpc-accept-encoding': 'identity',
      'grpc-status': String(code),
      'grpc-message': encodeURI(message),
    },
    { endStream: true },
  )
  if (!stream.readableEnded) stream.close(constants.NGHTTP2_NO_ERROR)
}

/** The gRPC listener: listening, and draining on shutdown. */
export type GrpcFront = Http2Listener

/**
 * A gRPC server answering ShouldRateLimit with `context()` (read per call: reloads apply at once),
 * within the bounds of `settings` (docs/security.md, "The gRPC listener").
 */
export function grpcFront(
  context: () => EnvoyContext,
  logger: Logger,
  settings: GrpcSettings,
  tls?: Http2Tls,
): GrpcFront {
  /** Ends a call whose decision failed: its own status for a refusal, INTERNAL for anything else. */
  function fail(stream: ServerHttp2Stream, error: unknown, peer: string | undefined): void {
    if (error instanceof EnvoyRequestError) {
      logger.info({ grpc: true, peer, code: error.grpcCode }, error.message)
      endWith(stream, error.grpcCode, error.message)
      return
    }
    logger.error({ grpc: true, err: error }, 'internal error in ShouldRateLimit')
    endWith(stream, STATUS.INTERNAL, 'internal error; see the service log')
  }

  /** Decodes the request (`frame` holds its gRPC prefix), decides it and answers. */
  function answer(stream: ServerHttp2Stream, call: Call, frame: Buffer): void {
    let request: WireRequest
    try {
      request = decodeRateLimitRequest(frame, 5)
    } catch (error) {
      if (!(error instanceof MalformedMessageError)) throw error
      endWith(stream, STATUS.INVALID_ARGUMENT, `the message is not a RateLimitRequest: ${error.message}`)
      return
    }
    let response: WireResponse | Promise<WireResponse>
    try {
      response = shouldRateLimit(call.ctx, request)
    } catch (error) {
      fail(stream, error, call.peer)
      return
    }
    if (response instanceof Promise)
      response.then(
        (r) => respond(stream, r),
        (error: unknown) => fail(stream, error, call.peer),
      )
    else respond(stream, response)
  }

  /** The request is complete: refused when it holds no whole message, else answered. */
  function onEnd(this: CallStream): void {
    const call = this[CALL]!
    if (this.headersSent) return
    if (call.declared < 0 || call.received < 5 + call.declared) {
      endWith(this, STATUS.UNIMPLEMENTED, `Received no request message for unary method ${RLS_PATH}`)
      return
    }
    const frame = call.bytes()
    try {
      // With traces, the call's traceparent metadata is the active context while it is answered.
      if (call.ctx.inTrace === undefined) answer(this, call, frame)
      else call.ctx.inTrace(call.headers!, () => answer(this, call, frame))
    } catch (error) {
      logger.error({ grpc: true, err: error }, 'internal error in ShouldRateLimit')
      endWith(this, STATUS.INTERNAL, 'internal error; see the service log')
    }
  }

  function onStream(
    stream: CallStream,
    headers: IncomingHttpHeaders,
    peer: string | undefined,
    subject: PeerSubject | undefined,
  ): void {
    stream.on('error', ignore)
    const contentType = headers['content-type']
    if (typeof contentType !== 'string' || !contentType.startsWith('application/grpc')) {
      stream.respond({ ':status': 415 }, { endStream: true })
      if (!stream.readableEnded) stream.close(constants.NGHTTP2_NO_ERROR)
      return
    }
    const path = headers[':path']
    if (path !== RLS_PATH) {
      endWith(stream, STATUS.UNIMPLEMENTED, `The server does not implement the method ${path}`)
      return
    }
    const ctx = context()
    if (!ctx.peerTrusted(peer, subject)) {
      logger.warn({ grpc: true, peer, subject }, 'ShouldRateLimit from a peer not in grpc.trustedPeers')
      endWith(stream, STATUS.PERMISSION_DENIED, `peer ${peer ?? 'unknown'} is not in grpc.trustedPeers`)
      return
    }

    // One deadline per call: the client's (grpc-timeout) or grpc.callTimeout, the sooner.
    let timeoutMs = settings.callTimeoutMs
    let expired = callTimeoutMessage
    const written = headers['grpc-timeout']
    if (written !== undefined) {
      const match = TIMEOUT.exec(String(written))
      if (match === null) {
        endWith(stream, STATUS.INVALID_ARGUMENT, `grpc-timeout ${JSON.stringify(written)} is not a timeout`)
        return
      }
      const deadlineMs = Math.floor(Number(match[1]) * TIMEOUT_UNIT_MS[match[2]!]!)
      if (deadlineMs <= timeoutMs) {
        timeoutMs = deadlineMs
        expired = 'Deadline exceeded'
      }
    }
    // The request's headers are kept only for a trace's context: held by a call that outlives a
    // scavenge, they would be promoted with it, and node:http2 itself lets them go at once.
    const call = new Call(stream, ctx, ctx.inTrace === undefined ? undefined : headers, peer, expired)
    stream[CALL] = call
    due.track(call, timeoutMs)
    // The handlers are shared by every call (`this` is the stream): a call allocates no closures.
    stream.on('data', onData)
    stream.on('end', onEnd)
  }

  /** A call's stream closed: it no longer expires (a stream refused before its call began has no call). */
  function onClosed(stream: CallStream): void {
    const call = stream[CALL]
    if (call !== undefined) due.drop(call)
  }

  const callTimeoutMessage = `the call took longer than grpc.callTimeout (${settings.callTimeoutMs} ms)`
  const due = deadlines(expire)
  return http2Listener(settings, { opened: onStream, closed: onClosed }, tls)
}

/** What the handlers of one call share, kept on its stream; its deadline's place too. */
class Call implements Tracked {
  /** The request's bytes so far (the gRPC prefix included): the first chunk, and any after it. */
  first: Buffer | undefined = undefined
  more: Buffer[] | undefined = undefined
  received = 0
  /** The message length its prefix declares; -1 until the prefix is in. */
  declared = -1
  deadlineList: Tracked['deadlineList'] = undefined
  previous: Tracked | undefined = undefined
  next: Tracked | undefined = undefined
  dueAt = 0

  constructor(
    readonly stream: ServerHttp2Stream,
    readonly ctx: EnvoyContext,
    /** The request's headers while traces are on (their `traceparent`), else undefined. */
    readonly headers: IncomingHttpHeaders | undefined,
    readonly peer: string | undefined,
    /** The grpc-message of DEADLINE_EXCEEDED when the call expires. */
    readonly expired: string,
  ) {}

  add(chunk: Buffer): void {
    if (this.first === undefined) this.first = chunk
    else if (this.more === undefined) this.more = [chunk]
    else this.more.push(chunk)
    this.received += chunk.length
  }

  /** The bytes received, in one buffer (the first chunk itself when it holds them all). */
  bytes(): Buffer {
    if (this.more === undefined) return this.first ?? EMPTY
    return Buffer.concat([this.first!, ...this.more], this.received)
  }
}
const CALL = Symbol('call')
type CallStream = ServerHttp2Stream & { [CALL]?: Call }
const EMPTY = Buffer.alloc(0)

function ignore(): void {}

function expire(call: Call): void {
  endWith(call.stream, STATUS.DEADLINE_EXCEEDED, call.expired)
}

/** Answers OK trailers once the answer's message is out. */
function sendOkTrailers(this: ServerHttp2Stream): void {
  this.sendTrailers(OK_TRAILERS)
}

/** The answer: headers, the one message, OK trailers; nothing to a call cancelled (or timed out) meanwhile. */
function respond(stream: ServerHttp2Stream, response: WireResponse): void {
  if (stream.destroyed || stream.closed || stream.headersSent) return
  stream.respond(ANSWER_HEADERS, ANSWER_OPTIONS)
  stream.on('wantTrailers', sendOkTrailers)
  stream.end(encodeRateLimitResponseFrame(response))
}

/** The request: one message of at most MAX_REQUEST_BYTES, refused by its prefix when it is larger. */
function onData(this: CallStream, chunk: Buffer): void {
  if (this.headersSent) return
  const call = this[CALL]!
  call.add(chunk)
  if (call.declared < 0 && call.received >= 5) {
    const head = call.bytes()
    if (head[0] !== 0) {
      endWith(this, STATUS.UNIMPLEMENTED, 'Received a compressed message; this server takes identity only')
      return
    }
    call.declared = head.readUInt32BE(1)
    if (call.declared > MAX_REQUEST_BYTES) {
      endWith(
        this,
        STATUS.RESOURCE_EXHAUSTED,
        `Received message larger than max (${call.declared} vs ${MAX_REQUEST_BYTES})`,
      )
      return
    }
  }
  if (call.declared >= 0 && call.received > 5 + call.declared)
    endWith(this, STATUS.UNIMPLEMENTED, `Received a second request message for unary method ${RLS_PATH}`)
}
