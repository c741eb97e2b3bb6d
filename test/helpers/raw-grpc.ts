// Raw gRPC over node:http2 for the tests of the gRPC listener: frames and headers a gRPC library
// would never send (compressed flags, bad timeouts, calls left open, answers never read), and the
// answer as the server wrote it: HTTP status, grpc-status and grpc-message, or the stream's reset.
import type { ClientHttp2Session, ClientHttp2Stream, OutgoingHttpHeaders } from 'node:http2'
import { connect } from 'node:http2'
import { loadSync } from '@grpc/proto-loader'
import { PROTO_OPTIONS, RLS_PATH, rlsProtoPath } from '../../packages/sluice-server/src/envoy/grpc.js'
import type { RlsRequest, RlsResponse } from './envoy.js'

const method = (
  loadSync(rlsProtoPath(), PROTO_OPTIONS)['envoy.service.ratelimit.v3.RateLimitService'] as Record<
    string,
    { requestSerialize(value: RlsRequest): Buffer; responseDeserialize(bytes: Buffer): RlsResponse }
  >
).ShouldRateLimit!
const serializeRequest = method.requestSerialize

/** The RateLimitResponse of an answer's body (one gRPC message, its prefix included), as protobufjs reads it. */
export function answerOf(body: Buffer): RlsResponse {
  if (body.length < 5 || body.readUInt32BE(1) !== body.length - 5)
    throw new Error(`not one gRPC message: ${body.toString('hex')}`)
  return method.responseDeserialize(body.subarray(5))
}

/** A valid ShouldRateLimit request of domain `d` for `user`. */
export const userRequest = (user = 'u'): RlsRequest => ({
  domain: 'd',
  descriptors: [{ entries: [{ key: 'user', value: user }] }],
})

/** One length-prefixed gRPC message: a request (encoded) or raw bytes, flagged compressed or not. */
export function frame(message: RlsRequest | Buffer = userRequest(), { compressed = false } = {}): Buffer {
  const bytes = Buffer.isBuffer(message) ? message : serializeRequest(message)
  const prefix = Buffer.alloc(5)
  prefix[0] = compressed ? 1 : 0
  prefix.writeUInt32BE(bytes.length, 1)
  return Buffer.concat([prefix, bytes])
}

/** A raw HTTP/2 client session to 127.0.0.1:`port` with the given SETTINGS; errors are ignored. */
export function h2(port: number, settings: Record<string, number> = {}): ClientHttp2Session {
  const session = connect(`http://127.0.0.1:${port}`, { settings })
  session.on('error', () => {})
  return session
}

/** Resolves once the server's SETTINGS arrived: the HTTP/2 handshake is done. */
export const handshaken = (session: ClientHttp2Session) =>
  new Promise<void>((resolve) => session.once('remoteSettings', () => resolve()))

export interface CallEnd {
  /** :status of the answer's headers; undefined when none came. */
  httpStatus: number | undefined
  /** grpc-status of the answer (trailers, or a trailers-only answer); undefined when none came. */
  grpcStatus: number | undefined
  /** grpc-message, percent-decoded. */
  grpcMessage: string | undefined
  /** The RST_STREAM code the stream closed with (0: closed normally). */
  rstCode: number
  /** The answer's DATA, its gRPC prefix included (empty when none came). */
  body: Buffer
}

export interface RawCall {
  stream: ClientHttp2Stream
  ended: Promise<CallEnd>
}

const GRPC_HEADERS = {
  ':method': 'POST',
  ':path': RLS_PATH,
  'content-type': 'application/grpc',
  te: 'trailers',
}

/**
 * A call on `session`: the request headers (ShouldRateLimit's, with `headers` over them), then
 * `body`, then the end of the request; with `end: false` the request is left open (and `body`
 * sent only when given), else `body` is one valid request's frame unless given.
 */
export function rawCall(
  session: ClientHttp2Session,
  { headers = {}, body, end = true }: { headers?: OutgoingHttpHeaders; body?: Buffer; end?: boolean } = {},
): RawCall {
  const stream = session.request({ ...GRPC_HEADERS, ...headers })
  const result: CallEnd = {
    httpStatus: undefined,
    grpcStatus: undefined,
    grpcMessage: undefined,
    rstCode: 0,
    body: Buffer.alloc(0),
  }
  const chunks: Buffer[] = []
  const read = (fields: Record<string, unknown>) => {
    if (fields[':status'] !== undefined) result.httpStatus = Number(fields[':status'])
    if (fields['grpc-status'] !== undefined) result.grpcStatus = Number(fields['grpc-status'])
    if (typeof fields['grpc-message'] === 'string') result.grpcMessage = decodeURI(fields['grpc-message'])
  }
  stream.on('response', read)
  stream.on('trailers', read)
  stream.on('error', () => {})
  stream.on('data', (chunk: Buffer) => chunks.push(chunk))
  if (end) stream.end(body ?? frame())
  else if (body !== undefined) stream.write(body)
  const ended = new Promise<CallEnd>((resolve) =>
    stream.once('close', () =>
      resolve({ ...result, rstCode: stream.rstCode ?? 0, body: Buffer.concat(chunks) }),
    ),
  )
  return { stream, ended }
}
