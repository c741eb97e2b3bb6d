// Heap bytes a gRPC server holds per open ShouldRateLimit call, beyond what node:http2 itself holds:
// 990 calls over 10 connections send their headers and the first 5 bytes of a message, and wait.
// The heap after a full collection with them open, less the heap once they are reset (connections
// still open), is what the server, node:http2 and this process's client hold per call; the same with
// the bare node:http2 handler (bench/envoy-peers.mjs) leaves out node:http2's and the client's
// share. A call stays open for as long as its client takes to send the message (up to its
// deadline), and whatever it holds is promoted with it once it outlives a scavenge: a call should
// hold its own small state and nothing of the request that it has no use for (its headers object).
//   node --expose-gc bench/budgets/grpc-retained.mjs <sluice-server dist dir> sluice|bare
// Prints one JSON line: { calls, bytesPerCall }.
import { connect } from 'node:http2'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import pino from 'pino'
import { bareHttp2 } from '../envoy-peers.mjs'

const [distDir, subject] = process.argv.slice(2)
const RLS_PATH = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit'
const CONNECTIONS = 10
// Sluice allows 100 streams per connection by default (grpc.maxConcurrentStreams): one is the probe's.
const STREAMS = 99

/** The address of a listening server: Sluice's gRPC listener (memory store), or the bare handler. */
async function listen() {
  if (subject === 'bare') {
    const server = bareHttp2(Buffer.from([0, 0, 0, 0, 0]))
    await new Promise((done) => server.listen(0, '127.0.0.1', done))
    return { port: server.address().port, close: () => server.close() }
  }
  const { createService, parseConfig, parseEnvoyConfig } = await import(
    pathToFileURL(resolve(distDir, 'index.js')).href
  )
  const service = createService({
    config: parseConfig('policies:\n  api: { algorithm: token-bucket, limit: 1000, window: 1s }\n', 'b.yaml'),
    logger: pino({ level: 'silent' }),
    envoy: parseEnvoyConfig([
      {
        file: 'rules.yaml',
        text: 'domain: bench\ndescriptors:\n  - key: user\n    rate_limit: { unit: second, requests_per_unit: 1000 }\n',
      },
    ]),
    grpc: { port: 0, host: '127.0.0.1' },
  })
  await service.listen(0)
  return { port: service.grpcAddress.port, close: () => service.close(100) }
}

const settle = () => new Promise((done) => setTimeout(done, 50))
async function heapAfterCollection() {
  for (let i = 0; i < 3; i++) {
    await settle()
    globalThis.gc()
  }
  return process.memoryUsage().heapUsed
}

const server = await listen()
const sessions = await Promise.all(
  Array.from(
    { length: CONNECTIONS },
    () =>
      new Promise((done, fail) => {
        const session = connect(`http://127.0.0.1:${server.port}`)
        session.once('remoteSettings', () => done(session))
        session.once('error', fail)
      }),
  ),
)
const headers = {
  ':method': 'POST',
  ':path': RLS_PATH,
  'content-type': 'application/grpc',
  te: 'trailers',
  'grpc-timeout': '60S',
}
const calls = []
for (const session of sessions)
  for (let i = 0; i < STREAMS; i++) {
    const stream = session.request(headers)
    stream.on('error', () => {})
    // The prefix of a 16-byte message, and nothing more: the call waits for the rest.
    stream.write(Buffer.from([0, 0, 0, 0, 16]))
    calls.push(stream)
  }
// A whole call on every connection after the waiting ones: its answer comes once the server has
// taken every earlier stream of that connection (its headers and data, in order).
const probe = Buffer.from([0, 0, 0, 0, 0])
await Promise.all(
  sessions.map(
    (session) =>
      new Promise((done) => {
        const stream = session.request(headers)
        stream.on('error', done)
        stream.on('close', done)
        stream.resume()
        stream.end(probe)
      }),
  ),
)
const open = await heapAfterCollection()
// A call answered already (a deadline, a refusal) holds nothing: the figure would be meaningless.
const answered = calls.filter((stream) => stream.closed).length
if (answered > 0) throw new Error(`${answered} of the waiting calls were closed before they were reset`)
for (const stream of calls) stream.close()
await Promise.all(
  calls.map((stream) => (stream.closed ? undefined : new Promise((done) => stream.once('close', done)))),
)
const reset = await heapAfterCollection()
for (const session of sessions) session.destroy()
await server.close()
console.log(JSON.stringify({ calls: calls.length, bytesPerCall: (open - reset) / calls.length }))
