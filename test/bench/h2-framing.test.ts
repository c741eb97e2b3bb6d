// The envoy bench case's framing ceiling (bench/h2-framing.mjs) is a ceiling only if it speaks
// HTTP/2 as the real servers do: grpc-js and node:http2 clients get the frame it was given, with OK
// trailers, over many streams of one connection and past the connection's flow-control window each way.
import { once } from 'node:events'
import { connect } from 'node:http2'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { framingServer } from '../../bench/h2-framing.mjs'
import { RLS_PATH } from '../../packages/sluice-server/src/envoy/grpc.js'
import { rlsClient } from '../helpers/envoy.js'

/** A RateLimitResponse of overall_code OK (field 1, enum value 1), as a gRPC frame. */
const ANSWER = Buffer.from([0, 0, 0, 0, 2, 0x08, 0x01])
/** A RateLimitRequest of domain "d" (field 1), as a gRPC frame. */
const REQUEST = Buffer.from([0, 0, 0, 0, 3, 0x0a, 0x01, 0x64])

/** A frame of 1,000 bytes: its message is opaque to a node:http2 client. */
const LARGE = Buffer.concat([Buffer.from([0, 0, 0, 0x03, 0xe3]), Buffer.alloc(995, 7)])

describe('bench/h2-framing.mjs', () => {
  const server = framingServer(ANSWER)
  const large = framingServer(LARGE)
  let address = ''
  let largeAddress = ''
  beforeAll(async () => {
    for (const s of [server, large]) {
      s.listen(0, '127.0.0.1')
      await once(s, 'listening')
    }
    address = `127.0.0.1:${(server.address() as AddressInfo).port}`
    largeAddress = `127.0.0.1:${(large.address() as AddressInfo).port}`
  })
  afterAll(() => {
    server.close()
    large.close()
  })

  it('answers a grpc-js client its frame, over concurrent calls of one channel', async () => {
    const client = rlsClient(address)
    try {
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) => client.shouldRateLimit({ domain: `d${i}`, descriptors: [] })),
      )
      expect(answers.map((a) => a.overall_code)).toEqual(Array(20).fill('OK'))
    } finally {
      client.close()
    }
  })

  it("answers every stream of a node:http2 session, past the client's 65,535-byte connection window", async () => {
    const session = connect(`http://${largeAddress}`)
    try {
      // 2,000 answers of 1,000 bytes, 50 streams at a time: 30 times the connection window the
      // client grants at first, so answers wait for its WINDOW_UPDATEs; the requests' 144 KB exceed
      // the server's own window, which it must give back as it reads.
      const answers: { status: unknown; body: Buffer; trailers: unknown }[] = []
      for (let batch = 0; batch < 40; batch++) {
        answers.push(
          ...(await Promise.all(
            Array.from(
              { length: 50 },
              () =>
                new Promise<{ status: unknown; body: Buffer; trailers: unknown }>((resolve, reject) => {
                  const stream = session.request({
                    ':method': 'POST',
                    ':path': RLS_PATH,
                    'content-type': 'application/grpc',
                    te: 'trailers',
                  })
                  let status: unknown
                  let trailers: unknown
                  const chunks: Buffer[] = []
                  stream.on('response', (headers) => {
                    status = headers[':status']
                  })
                  stream.on('trailers', (t) => {
                    trailers = t['grpc-status']
                  })
                  stream.on('data', (chunk: Buffer) => chunks.push(chunk))
                  stream.on('end', () => resolve({ status, body: Buffer.concat(chunks), trailers }))
                  stream.on('error', reject)
                  stream.end(Buffer.concat([REQUEST, Buffer.alloc(64)]))
                }),
            ),
          )),
        )
      }
      expect(answers).toHaveLength(2000)
      for (const a of answers) {
        expect(a.status).toBe(200)
        expect(a.body.equals(LARGE)).toBe(true)
        expect(a.trailers).toBe('0')
      }
    } finally {
      session.close()
    }
  })
})
