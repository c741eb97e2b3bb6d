// ShouldRateLimit on the wire, as a raw HTTP/2 client sees it: the answer's headers and trailers,
// deadlines (grpc-timeout) and cancellation, and a gRPC status for every request gRPC itself
// refuses (unknown method, wrong content type, compressed, missing, doubled, oversized or
// undecodable message, a bad timeout), never INTERNAL. The real service on a memory store.
import type { ClientHttp2Session } from 'node:http2'
import { constants } from 'node:http2'
import { afterEach, describe, expect, it } from 'vitest'
import { forwardStore } from '../../packages/sluice/src/store.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { parseEnvoyConfig } from '../../packages/sluice-server/src/envoy/config.js'
import { MAX_REQUEST_BYTES, RLS_PATH } from '../../packages/sluice-server/src/envoy/grpc.js'
import { parseConfig } from '../../packages/sluice-server/src/server/config.js'
import type { Service } from '../../packages/sluice-server/src/server/service.js'
import { createService } from '../../packages/sluice-server/src/server/service.js'
import type { StoreHandle } from '../../packages/sluice-server/src/server/types.js'
import { rlsClient } from '../helpers/envoy.js'
import { answerOf, frame, h2, handshaken, rawCall, userRequest } from '../helpers/raw-grpc.js'
import { quietLogger } from '../helpers/service.js'

const RULES = 'domain: d\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 5 }\n'
const running: { service: Service; close(): void }[] = []
afterEach(async () => {
  for (const r of running.splice(0)) {
    r.close()
    await r.service.close(500)
  }
})

/** A real memory store whose decisions answer `delayMs` late, so a call is in flight meanwhile. */
function slowStore(delayMs: number): StoreHandle {
  const inner = memoryStore()
  const store = forwardStore(inner, {
    name: 'slow-memory',
    inProcess: false,
    apply: async (steps, mode) => {
      await new Promise((resolve) => setTimeout(resolve, delayMs))
      return inner.apply(steps, mode)
    },
  })
  return { store, description: 'slow memory', ping: async () => {} }
}

/** A service with the rules above and a raw HTTP/2 session to its gRPC listener. */
async function start(store?: StoreHandle) {
  const service = createService({
    config: parseConfig('policies:\n  api: { algorithm: fixed-window, limit: 1, window: 1m }\n', 't.yaml'),
    logger: quietLogger,
    envoy: parseEnvoyConfig([{ file: 'rules.yaml', text: RULES }]),
    grpc: { port: 0 },
    ...(store === undefined ? {} : { store }),
  })
  await service.listen(0)
  const session = h2(service.grpcAddress!.port)
  running.push({ service, close: () => session.destroy() })
  await handshaken(session)
  return { service, session }
}

describe('ShouldRateLimit on the wire', () => {
  it('answers with gRPC headers, one message and trailers', async () => {
    const { session } = await start()
    const stream = rawCall(session)
    const headers = await new Promise<Record<string, unknown>>((resolve) =>
      stream.stream.once('response', resolve),
    )
    expect(headers[':status']).toBe(200)
    expect(headers['content-type']).toBe('application/grpc+proto')
    const chunks: Buffer[] = []
    stream.stream.on('data', (chunk: Buffer) => chunks.push(chunk))
    expect(await stream.ended).toMatchObject({ grpcStatus: 0, grpcMessage: 'OK', rstCode: 0 })
    const body = Buffer.concat(chunks)
    expect(body[0]).toBe(0) // not compressed
    expect(body.readUInt32BE(1)).toBe(body.length - 5)
  })

  it('answers DEADLINE_EXCEEDED when the decision outlasts grpc-timeout, and nothing after it', async () => {
    const { session } = await start(slowStore(300))
    const late = await rawCall(session, { headers: { 'grpc-timeout': '50m' } }).ended
    expect(late).toMatchObject({ grpcStatus: 4, grpcMessage: 'Deadline exceeded' })
    // A deadline the decision meets is answered.
    const inTime = await rawCall(session, { headers: { 'grpc-timeout': '5S' } }).ended
    expect(inTime).toMatchObject({ grpcStatus: 0, rstCode: 0 })
  })

  it('holds each call of one connection to its own deadline, whatever the order they came in', async () => {
    const { session } = await start(slowStore(400))
    const [longer, shorter, callTimeout, inTime, again] = await Promise.all(
      [
        { 'grpc-timeout': '60m' },
        { 'grpc-timeout': '20m' },
        {},
        { 'grpc-timeout': '5S' },
        { 'grpc-timeout': '20m' },
      ].map((headers) => rawCall(session, { headers }).ended),
    )
    for (const late of [longer, shorter, again])
      expect(late).toMatchObject({ grpcStatus: 4, grpcMessage: 'Deadline exceeded' })
    // The store answers after the limiter's store timeout (100 ms): within grpc.callTimeout (10 s
    // by default) and a deadline of 5 s.
    for (const answered of [callTimeout!, inTime!]) {
      expect(answered).toMatchObject({ grpcStatus: 0, rstCode: 0 })
      expect(answerOf(answered.body).overall_code).toBe('OK')
    }
  })

  it('drops a call the client cancels, and keeps serving the connection', async () => {
    const { session } = await start(slowStore(100))
    const cancelled = rawCall(session)
    await new Promise((resolve) => setTimeout(resolve, 20))
    cancelled.stream.close(constants.NGHTTP2_CANCEL)
    expect(await cancelled.ended).toMatchObject({ httpStatus: undefined, rstCode: constants.NGHTTP2_CANCEL })
    expect(await rawCall(session, { body: frame(userRequest('other')) }).ended).toMatchObject({
      grpcStatus: 0,
    })
  })

  const REFUSED: [
    string,
    Parameters<typeof rawCall>[1],
    Partial<Awaited<ReturnType<typeof rawCall>['ended']>>,
  ][] = [
    [
      'an unknown method',
      { headers: { ':path': '/envoy.service.ratelimit.v3.RateLimitService/Other' } },
      {
        httpStatus: 200,
        grpcStatus: 12,
        grpcMessage:
          'The server does not implement the method /envoy.service.ratelimit.v3.RateLimitService/Other',
      },
    ],
    [
      'a content type that is not gRPC',
      { headers: { 'content-type': 'application/json' } },
      { httpStatus: 415 },
    ],
    [
      'a compressed message',
      { headers: { 'grpc-encoding': 'gzip' }, body: frame(userRequest(), { compressed: true }) },
      { grpcStatus: 12, grpcMessage: 'Received a compressed message; this server takes identity only' },
    ],
    [
      'no message',
      { body: Buffer.alloc(0) },
      { grpcStatus: 12, grpcMessage: `Received no request message for unary method ${RLS_PATH}` },
    ],
    [
      'half a message',
      { body: frame().subarray(0, 8) },
      { grpcStatus: 12, grpcMessage: `Received no request message for unary method ${RLS_PATH}` },
    ],
    [
      'two messages',
      { body: Buffer.concat([frame(), frame()]) },
      { grpcStatus: 12, grpcMessage: `Received a second request message for unary method ${RLS_PATH}` },
    ],
    [
      'bytes that are no RateLimitRequest',
      { body: frame(Buffer.from([0xff, 0xff, 0xff, 0xff])) },
      { grpcStatus: 3 },
    ],
    [
      // domain "d", one descriptor whose entry user= declares a value of 5 bytes and holds 1
      'a request whose last value is cut short',
      {
        body: frame(
          Buffer.from([0x0a, 1, 0x64, 0x12, 11, 0x0a, 9, 0x0a, 4, 0x75, 0x73, 0x65, 0x72, 0x12, 5, 0x75]),
        ),
      },
      { grpcStatus: 3 },
    ],
    [
      // domain "d", a descriptor of 9 bytes whose entry user=u claims 9 of them after its own 2
      'an entry longer than its descriptor',
      {
        body: frame(
          Buffer.from([0x0a, 1, 0x64, 0x12, 9, 0x0a, 9, 0x0a, 4, 0x75, 0x73, 0x65, 0x72, 0x12, 1, 0x75]),
        ),
      },
      { grpcStatus: 3 },
    ],
    [
      'a grpc-timeout that is no timeout',
      { headers: { 'grpc-timeout': 'soon' } },
      { grpcStatus: 3, grpcMessage: 'grpc-timeout "soon" is not a timeout' },
    ],
  ]

  for (const [what, request, answer] of REFUSED) {
    it(`refuses ${what} with ${JSON.stringify(answer)}, charging nothing`, async () => {
      const { service, session } = await start()
      expect(await rawCall(session, request).ended).toMatchObject(answer)
      // The next valid call is the first one charged.
      const client = rlsClient(service.grpcAddress!.url)
      try {
        expect((await client.shouldRateLimit(userRequest())).statuses[0]!.limit_remaining).toBe(4)
      } finally {
        client.close()
      }
    })
  }

  it('refuses a message over the bound by its length prefix, before its bytes arrive', async () => {
    const { session } = await start()
    const prefix = Buffer.alloc(5)
    prefix.writeUInt32BE(MAX_REQUEST_BYTES + 1, 1)
    // Only the prefix is sent, and the request is left open: the answer cannot wait for the rest.
    const end = await rawCall(session, { body: prefix, end: false }).ended
    expect(end).toMatchObject({
      grpcStatus: 8,
      grpcMessage: `Received message larger than max (${MAX_REQUEST_BYTES + 1} vs ${MAX_REQUEST_BYTES})`,
      rstCode: constants.NGHTTP2_NO_ERROR,
    })
  })
})

/** A call whose request frame goes out in pieces cut at `cuts`, each written once the one before is sent. */
async function callInPieces(session: ClientHttp2Session, bytes: Buffer, cuts: readonly number[]) {
  const call = rawCall(session, { end: false })
  let from = 0
  for (const to of [...cuts, bytes.length]) {
    const piece = bytes.subarray(from, to)
    await new Promise<void>((resolve, reject) =>
      call.stream.write(piece, (error) => (error ? reject(error) : resolve())),
    )
    from = to
  }
  call.stream.end()
  return call.ended
}

describe('calls side by side, and requests in pieces', () => {
  it('answers concurrent calls of one connection each with its own status, message and trailers', async () => {
    const { session } = await start()
    // u-spent spends its 5 calls first: its next one is over the limit.
    for (let i = 0; i < 5; i++)
      expect((await rawCall(session, { body: frame(userRequest('u-spent')) }).ended).grpcStatus).toBe(0)
    const [allowed, over, undecodable, unknownDomain, twoHits, tooMany, again] = await Promise.all(
      [
        frame(userRequest('u-a')),
        frame(userRequest('u-spent')),
        frame(Buffer.from([0xff, 0xff, 0xff, 0xff])),
        frame({ domain: 'other', descriptors: [{ entries: [{ key: 'user', value: 'u-a' }] }] }),
        frame({ ...userRequest('u-b'), hits_addend: 2 }),
        frame({ ...userRequest('u-c'), hits_addend: 6 }),
        frame(userRequest('u-a')),
      ].map((body) => rawCall(session, { body }).ended),
    )
    for (const ok of [allowed!, over!, twoHits!, again!])
      expect(ok).toMatchObject({ httpStatus: 200, grpcStatus: 0, grpcMessage: 'OK', rstCode: 0 })
    // The two calls of u-a are decided in the order they came: 4 left, then 3.
    expect(answerOf(allowed!.body)).toMatchObject({ overall_code: 'OK', statuses: [{ limit_remaining: 4 }] })
    expect(answerOf(again!.body)).toMatchObject({ overall_code: 'OK', statuses: [{ limit_remaining: 3 }] })
    expect(answerOf(over!.body)).toMatchObject({
      overall_code: 'OVER_LIMIT',
      statuses: [{ code: 'OVER_LIMIT', limit_remaining: 0 }],
    })
    expect(answerOf(twoHits!.body)).toMatchObject({ overall_code: 'OK', statuses: [{ limit_remaining: 3 }] })
    expect(undecodable).toMatchObject({ httpStatus: 200, grpcStatus: 3, body: Buffer.alloc(0) })
    expect(undecodable!.grpcMessage).toMatch(/^the message is not a RateLimitRequest: /)
    expect(unknownDomain).toMatchObject({ grpcStatus: 5, body: Buffer.alloc(0) })
    expect(unknownDomain!.grpcMessage).toMatch(/^unknown domain "other"/)
    expect(tooMany).toMatchObject({ grpcStatus: 3, body: Buffer.alloc(0) })
    expect(tooMany!.grpcMessage).toMatch(/^hits_addend 6 can never be admitted by descriptors\[0\]/)
    // Nothing the refused calls carried was charged.
    const after = await rawCall(session, { body: frame({ ...userRequest('u-c'), hits_addend: 5 }) }).ended
    expect(answerOf(after.body).statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 0 })
  })

  it('answers a request that arrives in several DATA frames, its length prefix cut too', async () => {
    const { session } = await start()
    const bytes = frame(userRequest('u-pieces'))
    const end = await callInPieces(session, bytes, [2, 5, 9])
    expect(end).toMatchObject({ grpcStatus: 0, rstCode: 0 })
    expect(answerOf(end.body).statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 4 })
  })

  it('refuses a second message that begins in a later DATA frame, and one cut short at its end', async () => {
    const { session } = await start()
    const one = frame(userRequest('u-twice'))
    const second = await callInPieces(session, Buffer.concat([one, one]), [one.length, one.length + 3])
    expect(second).toMatchObject({
      grpcStatus: 12,
      grpcMessage: `Received a second request message for unary method ${RLS_PATH}`,
    })
    const short = await callInPieces(session, one.subarray(0, one.length - 1), [3])
    expect(short).toMatchObject({
      grpcStatus: 12,
      grpcMessage: `Received no request message for unary method ${RLS_PATH}`,
    })
    const client = await rawCall(session, { body: one }).ended
    expect(answerOf(client.body).statuses[0]!.limit_remaining).toBe(4)
  })
})
