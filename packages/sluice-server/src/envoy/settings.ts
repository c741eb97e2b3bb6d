// The sluice.yaml settings of the Envoy front: `grpc:` (where the listener binds, whom it answers,
// and its bounds) and `envoy: { config, charge, responseHeaders, secretKeys, maxOverridePolicies }`
// (docs/envoy.md).
import { dirname, resolve } from 'node:path'
import { parseDuration, SluiceError } from 'sluice'
import { z } from 'zod'
import type { Locator } from '../server/config-errors.js'
import type { ListenerTls } from '../server/listener-tls.js'
import { listenerTlsSchema, resolveListenerTls } from '../server/listener-tls.js'

const CHARGE_MODES = ['all-or-nothing', 'every'] as const
/** `all-or-nothing`: no descriptor is charged when one is over; `every`: envoyproxy/ratelimit's way. */
export type ChargeMode = (typeof CHARGE_MODES)[number]

/** The gRPC listener's bounds by default: the HTTP listener's where one applies (docs/security.md). */
const GRPC_DEFAULTS = {
  maxConnections: 1024,
  handshakeTimeoutMs: 10_000,
  idleTimeoutMs: 300_000,
  callTimeoutMs: 10_000,
  maxConcurrentStreams: 100,
  maxSessionMemoryMb: 10,
} as const

/** The largest count or millisecond timeout taken: a Node timer longer than this fires at once. */
const MAX_COUNT = 2 ** 31 - 1
const duration = z.union([z.string(), z.number()], { error: 'must be a duration like 10s or 500ms' })
const atLeastOne = (what: string) =>
  z
    .number()
    .int({ error: `must be a whole number of ${what}, at least 1` })
    .min(1, { error: `must be a whole number of ${what}, at least 1` })
    .max(MAX_COUNT, { error: `must be a whole number of ${what}, at most ${MAX_COUNT}` })
    .optional()

export const grpcSchema = z
  .strictObject({
    port: z
      .number({ error: 'must be a port number from 0 to 65535' })
      .int()
      .min(0)
      .max(65535, { error: 'must be a port number from 0 to 65535' }),
    host: z.string({ error: 'must be an address to bind, like 127.0.0.1' }).min(1).optional(),
    trustedPeers: z.array(z.string(), { error: 'must be a list like [loopback, 10.0.0.0/8]' }).optional(),
    maxConnections: atLeastOne('connections'),
    handshakeTimeout: duration.optional(),
    idleTimeout: duration.optional(),
    callTimeout: duration.optional(),
    maxConcurrentStreams: atLeastOne('streams'),
    maxSessionMemoryMb: atLeastOne('megabytes'),
    tls: listenerTlsSchema,
  })
  .optional()

const POLICY_COUNT = 'must be a whole number from 1 to 100000'

export const envoySchema = z
  .strictObject({
    config: z.string({ error: 'must be the path of a file or folder in envoyproxy/ratelimit format' }).min(1),
    charge: z.enum(CHARGE_MODES, { error: 'must be all-or-nothing or every' }).optional(),
    responseHeaders: z.boolean({ error: 'must be true or false' }).optional(),
    secretKeys: z
      .array(z.string().min(1), { error: 'must be a list of descriptor keys, like [user, session]' })
      .optional(),
    maxOverridePolicies: z
      .number({ error: POLICY_COUNT })
      .int({ error: POLICY_COUNT })
      .min(1, { error: POLICY_COUNT })
      .max(100_000, { error: POLICY_COUNT })
      .optional(),
  })
  .optional()

/** Per-request limits (a descriptor's `limit`) kept as policies at once, by default. */
const DEFAULT_MAX_OVERRIDE_POLICIES = 256

/**
 * Descriptor keys whose values are secrets whatever the config says: the names Envoy's
 * `request_headers` action is given for API-key and credential headers. Compared ignoring case.
 */
const DEFAULT_SECRET_KEYS: readonly string[] = [
  'api_key',
  'apikey',
  'api-key',
  'x-api-key',
  'x_api_key',
  'authorization',
  'proxy-authorization',
  'token',
  'access_token',
  'cookie',
]

export interface GrpcSettings {
  /** Undefined: no gRPC listener (unless `sluice serve --grpc-port` gives one). */
  readonly port: number | undefined
  /** Default 127.0.0.1. */
  readonly host: string
  /**
   * Peers whose calls are answered (addresses, CIDRs, loopback, private, linklocal, and with mTLS
   * `subject:CN=envoy`: peers.ts). Default [loopback].
   */
  readonly trustedPeers: readonly string[]
  /** Connections held at once; more are closed on accept. Default 1024. Needs a restart, as all below. */
  readonly maxConnections: number
  /** Time a new connection has to send the HTTP/2 preface and its SETTINGS. Default 10 s. */
  readonly handshakeTimeoutMs: number
  /** A connection with no call open this long gets GOAWAY and is closed. Default 5 min. */
  readonly idleTimeoutMs: number
  /** Time a call has from its headers to its last byte out; then it is ended. Default 10 s. */
  readonly callTimeoutMs: number
  /** Calls open at once on one connection (SETTINGS_MAX_CONCURRENT_STREAMS); more are refused. Default 100. */
  readonly maxConcurrentStreams: number
  /** Memory one connection may hold (node:http2's maxSessionMemory, in MB); past it new calls are refused. Default 10. */
  readonly maxSessionMemoryMb: number
  /** TLS or mTLS (listener-tls.ts); undefined: cleartext HTTP/2. Files re-read on reload; on/off needs a restart. */
  readonly tls: ListenerTls | undefined
}

export interface EnvoySettings {
  /** Where the envoyproxy/ratelimit config is, resolved against the sluice.yaml folder. */
  readonly config: string | undefined
  readonly charge: ChargeMode
  /** Add RateLimit-Limit / -Remaining / -Reset to `response_headers_to_add`. Default false. */
  readonly responseHeaders: boolean
  /**
   * Descriptor keys (lower case) whose values are hashed before they reach a store key, a metric,
   * a log or the dashboard: DEFAULT_SECRET_KEYS and the config's `secretKeys`.
   */
  readonly secretKeys: readonly string[]
  /**
   * Policies made from per-request limits kept at once; one more drops the least recently used
   * (`sluice_envoy_override_policies_dropped_total`). Default DEFAULT_MAX_OVERRIDE_POLICIES.
   */
  readonly maxOverridePolicies: number
}

type GrpcInput = z.infer<typeof grpcSchema>

function timeoutAt(
  loc: Locator,
  input: GrpcInput,
  field: 'handshakeTimeout' | 'idleTimeout' | 'callTimeout',
  fallback: number,
): number {
  const value = input?.[field]
  if (value === undefined) return fallback
  let ms: number
  try {
    ms = parseDuration(value, `grpc.${field}`)
  } catch (error) {
    const message = error instanceof SluiceError ? error.message : String(error)
    throw loc.error(['grpc', field], message, error)
  }
  if (ms > MAX_COUNT) throw loc.error(['grpc', field], `grpc.${field}: at most 24d (${MAX_COUNT} ms)`)
  return ms
}

/** `grpc:` with its defaults; a bad duration is an InvalidConfigError naming file:line. */
export function resolveGrpc(loc: Locator, input: GrpcInput): GrpcSettings {
  const defaults = GRPC_DEFAULTS
  return {
    port: input?.port,
    host: input?.host ?? '127.0.0.1',
    trustedPeers: input?.trustedPeers ?? ['loopback'],
    maxConnections: input?.maxConnections ?? defaults.maxConnections,
    handshakeTimeoutMs: timeoutAt(loc, input, 'handshakeTimeout', defaults.handshakeTimeoutMs),
    idleTimeoutMs: timeoutAt(loc, input, 'idleTimeout', defaults.idleTimeoutMs),
    callTimeoutMs: timeoutAt(loc, input, 'callTimeout', defaults.callTimeoutMs),
    maxConcurrentStreams: input?.maxConcurrentStreams ?? defaults.maxConcurrentStreams,
    maxSessionMemoryMb: input?.maxSessionMemoryMb ?? defaults.maxSessionMemoryMb,
    tls: resolveListenerTls(loc, 'grpc', input?.tls),
  }
}

export function resolveEnvoy(written: z.infer<typeof envoySchema>, file: string): EnvoySettings {
  return {
    config: written?.config === undefined ? undefined : resolve(dirname(file), written.config),
    charge: written?.charge ?? 'all-or-nothing',
    responseHeaders: written?.responseHeaders ?? false,
    secretKeys: [
      ...new Set([...DEFAULT_SECRET_KEYS, ...(written?.secretKeys ?? [])].map((k) => k.toLowerCase())),
    ],
    maxOverridePolicies: written?.maxOverridePolicies ?? DEFAULT_MAX_OVERRIDE_POLICIES,
  }
}
