// The two reference servers of the envoy bench case (bench/cases/envoy.ts), each run in its own process:
//   node bench/envoy-peers.mjs bare-http2 <port> <response frame, hex>
//     node:http2 answering ShouldRateLimit's path with one fixed response frame and OK trailers,
//     reading the request to its end and decoding nothing: what any gRPC server over node:http2 pays.
//   node bench/envoy-peers.mjs grpc-js-empty <port>
//     @grpc/grpc-js serving rls.proto, its ShouldRateLimit answering OK at once.
//   node bench/envoy-peers.mjs h2-framing <port> <response frame, hex>
//     HTTP/2 spoken by bench/h2-framing.mjs over node:net, answering every stream with the frame and
//     OK trailers: what the protocol's own work costs, without node:http2.
// Each prints `ready` once it listens on 127.0.0.1, and exits cleanly on SIGTERM (so a --cpu-prof
// run writes its profile). `bareHttp2` is the first, for a script that runs it in its own process.
import { createServer } from 'node:http2'
import { fileURLToPath } from 'node:url'
import { framingServer } from './h2-framing.mjs'

const RLS_PATH = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit'
const PROTO = fileURLToPath(new URL('../packages/sluice-server/src/envoy/rls.proto', import.meta.url))

/**
 * The bare handler: a node:http2 server answering ShouldRateLimit's path with `frame` and OK
 * trailers once the request has ended, decoding nothing (not listening yet).
 */
export function bareHttp2(frame) {
  const headers = {
    ':status': 200,
    'content-type': 'application/grpc+proto',
    'grpc-accept-encoding': 'identity',
  }
  const trailers = { 'grpc-status': '0', 'grpc-message': 'OK' }
  const server = createServer()
  server.on('stream', (stream, requestHeaders) => {
    stream.on('error', () => {})
    if (requestHeaders[':path'] !== RLS_PATH) {
      stream.respond(
        { ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '12' },
        { endStream: true },
      )
      return
    }
    stream.resume()
    stream.once('end', () => {
      stream.respond(headers, { waitForTrailers: true })
      stream.once('wantTrailers', () => stream.sendTrailers(trailers))
      stream.end(frame)
    })
  })
  return server
}

async function main(kind, port, responseHex) {
  if (kind === 'bare-http2' || kind === 'h2-framing') {
    const frame = Buffer.from(responseHex ?? '', 'hex')
    const server = kind === 'bare-http2' ? bareHttp2(frame) : framingServer(frame)
    server.listen(port, '127.0.0.1', () => process.stdout.write('ready\n'))
    process.once('SIGTERM', () => {
      server.close()
      process.exit(0)
    })
  } else if (kind === 'grpc-js-empty') {
    const { Server, ServerCredentials, loadPackageDefinition } = await import('@grpc/grpc-js')
    const { loadSync } = await import('@grpc/proto-loader')
    const options = { keepCase: true, longs: Number, enums: String, defaults: true }
    const pkg = loadPackageDefinition(loadSync(PROTO, options))
    const server = new Server()
    const answer = { overall_code: 'OK', statuses: [{ code: 'OK' }] }
    server.addService(pkg.envoy.service.ratelimit.v3.RateLimitService.service, {
      ShouldRateLimit: (_call, callback) => callback(null, answer),
    })
    server.bindAsync(`127.0.0.1:${port}`, ServerCredentials.createInsecure(), (error) => {
      if (error) throw error
      process.stdout.write('ready\n')
    })
    process.once('SIGTERM', () => {
      server.forceShutdown()
      process.exit(0)
    })
  } else {
    process.stderr.write(`unknown server ${kind}; bare-http2, h2-framing or grpc-js-empty\n`)
    process.exit(2)
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [kind, portText, responseHex] = process.argv.slice(2)
  await main(kind, Number(portText), responseHex)
}
