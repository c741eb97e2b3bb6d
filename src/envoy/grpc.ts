// The gRPC listener answering Envoy's envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit
// on @grpc/grpc-js, from Sluice's own rls.proto. Bounded messages and streams; draining on close.
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { ServiceDefinition, ServiceError, UntypedServiceImplementation } from '@grpc/grpc-js'
import { Server, ServerCredentials, status } from '@grpc/grpc-js'
import { loadSync } from '@grpc/proto-loader'
import type { Logger } from 'pino'
import { settlesWithin } from '../server/plumbing.js'
import type { ListeningAddress } from '../server/types.js'
import type { EnvoyContext, WireRequest, WireResponse } from './decide.js'
import { EnvoyRequestError, shouldRateLimit } from './decide.js'

/** Where rls.proto is: beside this module in src/envoy/, copied beside the chunks in dist/. */
export function rlsProtoPath(): string {
  return join(dirname(fileURLToPath(import.meta.url)), 'rls.proto')
}

/** Options of proto-loader, the same for the server and the test clients. */
export const PROTO_OPTIONS = { keepCase: true, longs: Number, enums: String, defaults: true } as const

/** The service definition grpc-js serves (loaded once per process). */
let definition: ServiceDefinition | undefined
export function rateLimitServiceDefinition(): ServiceDefinition {
  definition ??= loadSync(rlsProtoPath(), PROTO_OPTIONS)[
    'envoy.service.ratelimit.v3.RateLimitService'
  ] as ServiceDefinition
  return definition
}

/** `127.0.0.1:5000`, `[::1]:5000` or `ipv4:10.0.0.5:5000` (grpc-js's peer) -> the address. */
export function peerAddress(peer: string): string | undefined {
  const bare = peer.replace(/^ipv[46]:/, '')
  if (bare.startsWith('[')) return bare.slice(1, bare.indexOf(']'))
  const colon = bare.lastIndexOf(':')
  return colon < 0 ? undefined : bare.slice(0, colon)
}

/** The largest request accepted: Envoy's requests are a few hundred bytes. */
export const MAX_REQUEST_BYTES = 64 * 1024

export interface GrpcFront {
  listen(port: number, host: string): Promise<ListeningAddress>
  /** Stop accepting calls, let in-flight ones finish (up to `graceMs`), then cancel the rest. */
  shutdown(graceMs: number): Promise<void>
}

/** A gRPC server answering ShouldRateLimit with `context()` (read per call: reloads apply at once). */
export function grpcFront(context: () => EnvoyContext, logger: Logger): GrpcFront {
  const server = new Server({
    'grpc.max_receive_message_length': MAX_REQUEST_BYTES,
    'grpc.max_send_message_length': 4 * 1024 * 1024,
    'grpc.max_concurrent_streams': 1000,
  })
  const implementation: UntypedServiceImplementation = {
    ShouldRateLimit(
      call: { request: WireRequest; getPeer(): string },
      callback: (error: Partial<ServiceError> | null, value?: WireResponse) => void,
    ) {
      const ctx = context()
      const peer = peerAddress(call.getPeer())
      if (!ctx.peerTrusted(peer)) {
        logger.warn({ grpc: true, peer }, 'ShouldRateLimit from a peer not in grpc.trustedPeers')
        callback({
          code: status.PERMISSION_DENIED,
          details: `peer ${peer ?? 'unknown'} is not in grpc.trustedPeers`,
        })
        return
      }
      shouldRateLimit(ctx, call.request).then(
        (response) => callback(null, response),
        (error: unknown) => {
          if (error instanceof EnvoyRequestError) {
            logger.info({ grpc: true, peer: call.getPeer(), code: error.grpcCode }, error.message)
            callback({ code: error.grpcCode, details: error.message })
            return
          }
          logger.error({ grpc: true, err: error }, 'internal error in ShouldRateLimit')
          callback({ code: status.INTERNAL, details: 'internal error; see the service log' })
        },
      )
    },
  }
  server.addService(rateLimitServiceDefinition(), implementation)

  return {
    listen(port, host) {
      return new Promise((resolve, reject) => {
        const shown = host.includes(':') ? `[${host}]` : host
        server.bindAsync(`${shown}:${port}`, ServerCredentials.createInsecure(), (error, bound) => {
          if (error !== null) reject(error)
          else resolve({ host, port: bound, url: `${shown}:${bound}` })
        })
      })
    },
    async shutdown(graceMs) {
      const drained = new Promise<void>((resolve) => server.tryShutdown(() => resolve()))
      if (!(await settlesWithin(drained, graceMs))) server.forceShutdown()
    },
  }
}
