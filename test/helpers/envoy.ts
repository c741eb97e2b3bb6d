// Shared pieces of the Envoy tests: the configuration fixtures in envoyproxy/ratelimit's format, and
// a gRPC client built from Sluice's rls.proto (what Envoy sends, field numbers included).
import { join } from 'node:path'
import type { ChannelCredentials, ServiceError } from '@grpc/grpc-js'
import { credentials, loadPackageDefinition, Metadata } from '@grpc/grpc-js'
import { loadSync } from '@grpc/proto-loader'
import { PROTO_OPTIONS, rlsProtoPath } from '../../packages/sluice-server/src/envoy/grpc.js'

/** `test/fixtures/envoy-ratelimit`: `valid/` and `invalid/` configuration files (its README.md). */
export const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'envoy-ratelimit')

export interface Entry {
  key: string
  value: string
}
export interface RlsRequest {
  domain: string
  descriptors: { entries: Entry[]; limit?: { requests_per_unit: number; unit: string } }[]
  hits_addend?: number
}
export interface RlsStatus {
  code: 'OK' | 'OVER_LIMIT' | 'UNKNOWN'
  current_limit: { name: string; requests_per_unit: number; unit: string } | null
  limit_remaining: number
  duration_until_reset: { seconds: number; nanos: number } | null
}
export interface RlsResponse {
  overall_code: 'OK' | 'OVER_LIMIT' | 'UNKNOWN'
  statuses: RlsStatus[]
  response_headers_to_add: { key: string; value: string }[]
}

export interface RlsClient {
  /** One call; `metadata` is sent with it (`traceparent`, ...). */
  shouldRateLimit(request: RlsRequest, metadata?: Record<string, string>): Promise<RlsResponse>
  /** The call's error (code and details), or fails the test when it answers. */
  refused(request: RlsRequest): Promise<ServiceError>
  close(): void
}

type Unary = (
  request: RlsRequest,
  metadata: Metadata,
  callback: (error: ServiceError | null, response: RlsResponse) => void,
) => void

/**
 * A client of envoy.service.ratelimit.v3.RateLimitService at `address` (host:port), over plaintext
 * unless given `channel` credentials (`credentials.createSsl(ca, key, cert)` for TLS and mTLS).
 */
export function rlsClient(
  address: string,
  channel: ChannelCredentials = credentials.createInsecure(),
): RlsClient {
  const pkg = loadPackageDefinition(loadSync(rlsProtoPath(), PROTO_OPTIONS)) as unknown as {
    envoy: { service: { ratelimit: { v3: { RateLimitService: new (a: string, c: unknown) => unknown } } } }
  }
  const Client = pkg.envoy.service.ratelimit.v3.RateLimitService
  const client = new Client(address, channel) as {
    ShouldRateLimit: Unary
    close(): void
  }
  const call = (request: RlsRequest, metadata: Record<string, string> = {}) =>
    new Promise<RlsResponse>((resolve, reject) => {
      const sent = new Metadata()
      for (const [name, value] of Object.entries(metadata)) sent.set(name, value)
      client.ShouldRateLimit(request, sent, (error, response) => (error ? reject(error) : resolve(response)))
    })
  return {
    shouldRateLimit: call,
    refused: (request) =>
      call(request).then(
        (response) => {
          throw new Error(`expected a refusal, got ${JSON.stringify(response)}`)
        },
        (error: ServiceError) => error,
      ),
    close: () => client.close(),
  }
}

/** A descriptor from pairs: d(['key1', 'value1'], ['subkey1', 'x']). */
export const d = (...pairs: [string, string][]) => ({
  entries: pairs.map(([key, value]) => ({ key, value })),
})
