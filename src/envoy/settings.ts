// The sluice.yaml settings of the Envoy front: `grpc: { port, host }` and
// `envoy: { config, charge, responseHeaders, secretKeys, maxOverridePolicies }` (docs/envoy.md).
import { dirname, resolve } from 'node:path'
import { z } from 'zod'

export const CHARGE_MODES = ['all-or-nothing', 'every'] as const
/** `all-or-nothing`: no descriptor is charged when one is over; `every`: envoyproxy/ratelimit's way. */
export type ChargeMode = (typeof CHARGE_MODES)[number]

export const grpcSchema = z
  .strictObject({
    port: z
      .number({ error: 'must be a port number from 0 to 65535' })
      .int()
      .min(0)
      .max(65535, { error: 'must be a port number from 0 to 65535' }),
    host: z.string({ error: 'must be an address to bind, like 127.0.0.1' }).min(1).optional(),
    trustedPeers: z.array(z.string(), { error: 'must be a list like [loopback, 10.0.0.0/8]' }).optional(),
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
export const DEFAULT_MAX_OVERRIDE_POLICIES = 256

/**
 * Descriptor keys whose values are secrets whatever the config says: the names Envoy's
 * `request_headers` action is given for API-key and credential headers. Compared ignoring case.
 */
export const DEFAULT_SECRET_KEYS: readonly string[] = [
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
  /** Peers whose calls are answered (addresses, CIDRs, loopback, private, linklocal). Default [loopback]. */
  readonly trustedPeers: readonly string[]
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

export function resolveGrpc(written: z.infer<typeof grpcSchema>): GrpcSettings {
  return {
    port: written?.port,
    host: written?.host ?? '127.0.0.1',
    trustedPeers: written?.trustedPeers ?? ['loopback'],
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
