// The gRPC listener answering Envoy's envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit:
// the one unary method over node:http2 (listener.ts bounds the connections), its messages coded
// from Sluice's own rls.proto by proto-loader. Bounded messages, calls and streams; draining on close.
import type { IncomingHttpHeaders, ServerHttp2Stream } from 'node:http2'
import { constants } from 'node:http2'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { MethodDefinition } from '@grpc/proto-loader'
import { loadSync } from '@grpc/proto-loader'
import type { Logger } from 'pino'
import type { EnvoyContext, WireRequest, WireResponse } from './decide.js'
import { EnvoyRequestError, shouldRateLimit } from './decide.js'
import type { Http2Listener, Http2Tls } from './listener.js'
import { http2Listener } from './listener.js'
import type { PeerSubject } from './peers.js'
import type { GrpcSettings } from './settings.js'

/** Where rls.proto is: beside this module in src/envoy/, copied beside the chunks in dist/. */
export function rlsProtoPath(): string {
  return join(dirname(fileURLToPath(import.meta.url)), 'rls.proto')
}

/** Options of proto-loader, the same for the server and the test clients. */
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

/** The request decoder and response encoder of ShouldRateLimit (loaded once per process). */
let codec: MethodDefinition<WireRequest, WireResponse> | undefined
function rlsCodec(): MethodDefinition<WireRequest, WireResponse> {
  codec ??= (
    loadSync(rlsProtoPath(), PROTO_OPTIONS)['envoy.service.ratelimit.v3.RateLimitService'] as Record<
      string,
      MethodDefinition<WireRequest, WireResponse>
    >
  ).ShouldRateLimit!
  return codec
}

const CONTENT_TYPE = 'application/grpc+proto'
/** Only uncompressed messages are taken: Envoy sends them so, and a client told this sends no other. */
const ANSWER_HEADERS = {
  ':status': 200,
  'content-type': CONTENT_TYPE,
  'grpc-accept-encoding': 'identity',
}
const OK_TRAILERS = { 'grpc-status': String(STATUS.OK), 'grpc-message': 'OK' }

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
    { ...ANSWER_HEADERS, 'grpc-status': String(code), 'grpc-message': encodeURI(message) },
    { endStream: true },
  )
  if (!stream.readableEnded) stream.close(constants.NGHTTP2_NO_ERROR)
}

/** One length-prefixed gRPC message, not compressed. */
function framed(message: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + message.length)
  out[0] = 0
  out.writeUInt32BE(message.length, 1)
  out.set(message, 5)
  return out
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
  const { requestDeserialize: decode, responseSerialize: encode } = rlsCodec()

  async function answer(
    stream: ServerHttp2Stream,
    ctx: EnvoyContext,
    body: Buffer,
    peer: string | undefined,
  ) {
    let request: WireRequest
    try {
      request = decode(body)
    } catch (error) {
      endWith(
        stream,
        STATUS.INVALID_ARGUMENT,
        `the message is not a RateLimitRequest: ${(error as Error).message}`,
      )
      return
    }
    let response: WireResponse
    try {
      response = await shouldRateLimit(ctx, request)
    } catch (error) {
      if (error instanceof EnvoyRequestError) {
        logger.info({ grpc: true, peer, code: error.grpcCode }, error.message)
        endWith(stream, error.grpcCode, error.message)
        return
      }
      logger.error({ grpc: true, err: error }, 'internal error in ShouldRateLimit')
      endWith(stream, STATUS.INTERNAL, 'internal error; see the service log')
      return
    }
    // A call the client cancelled (or the server timed out) meanwhile gets nothing.
    if (stream.destroyed || stream.closed || stream.headersSent) return
    stream.respond(ANSWER_HEADERS, { waitForTrailers: true })
    stream.once('wantTrailers', () => stream.sendTrailers(OK_TRAILERS))
    stream.end(framed(encode(response)))
  }

  function onStream(
    stream: ServerHttp2Stream,
    headers: IncomingHttpHeaders,
    peer: string | undefined,
    subject: PeerSubject | undefined,
  ): void {
    stream.on('error', () => {})
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

    // One timer per call: the client's deadline (grpc-timeout) or grpc.callTimeout, the sooner.
    let timeoutMs = settings.callTimeoutMs
    let expired = `the call took longer than grpc.callTimeout (${settings.callTimeoutMs} ms)`
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
    const timer = setTimeout(() => endWith(stream, STATUS.DEADLINE_EXCEEDED, expired), timeoutMs)
    stream.once('close', () => clearTimeout(timer))

    // The request: one message of at most MAX_REQUEST_BYTES, refused by its prefix when it is larger.
    const chunks: Buffer[] = []
    let received = 0
    let declared = -1
    stream.on('data', (chunk: Buffer) => {
      if (stream.headersSent) return
      chunks.push(chunk)
      received += chunk.length
      if (declared < 0 && received >= 5) {
        const head = chunks.length === 1 ? chunk : Buffer.concat(chunks)
        if (head[0] !== 0) {
          endWith(
            stream,
            STATUS.UNIMPLEMENTED,
            'Received a compressed message; this server takes identity only',
          )
          return
        }
        declared = head.readUInt32BE(1)
        if (declared > MAX_REQUEST_BYTES) {
          endWith(
            stream,
            STATUS.RESOURCE_EXHAUSTED,
            `Received message larger than max (${declared} vs ${MAX_REQUEST_BYTES})`,
          )
          return
        }
      }
      if (declared >= 0 && received > 5 + declared)
        endWith(
          stream,
          STATUS.UNIMPLEMENTED,
          `Received a second request message for unary method ${RLS_PATH}`,
        )
    })
    stream.once('end', () => {
      if (stream.headersSent) return
      if (declared < 0 || received < 5 + declared) {
        endWith(stream, STATUS.UNIMPLEMENTED, `Received no request message for unary method ${RLS_PATH}`)
        return
      }
      const body = Buffer.concat(chunks, received).subarray(5)
      // With traces, the call's traceparent metadata is the active context while it is answered.
      const answered =
        ctx.inTrace === undefined
          ? answer(stream, ctx, body, peer)
          : ctx.inTrace(headers, () => answer(stream, ctx, body, peer))
      answered.catch((error: unknown) => {
        logger.error({ grpc: true, err: error }, 'internal error in ShouldRateLimit')
        endWith(stream, STATUS.INTERNAL, 'internal error; see the service log')
      })
    })
  }

  return http2Listener(settings, onStream, tls)
}
