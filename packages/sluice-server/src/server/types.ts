// The service's types: the public ones (`sluice/server` exports them through service.ts) and the
// context its endpoints share (internal: what a reload swaps, what is fixed, whether it is closing).
import type { IncomingMessage } from 'node:http'
import type { Logger } from 'pino'
import type { Registry } from 'prom-client'
import type { DecisionListener, Limiter } from 'sluice'
import type { Observability, ObservabilityOptions } from 'sluice/metrics'
import type { EnvoyRules } from '../envoy/config.js'
import type { ServiceConfig } from './config.js'
import type { StoreHandle } from './store-url.js'
import type { ServiceTelemetry } from './telemetry.js'

export type { StoreHandle } from './store-url.js'

export interface ServiceOptions {
  config: ServiceConfig
  /** Default: an in-memory store. The service closes it on `close()`. */
  store?: StoreHandle
  /** Default: pino JSON logs on stdout at `info`. */
  logger?: Logger
  /** Overrides the config's `admin.token` (the CLI passes SLUICE_ADMIN_TOKEN). */
  adminToken?: string
  /**
   * Tuning of the metrics, top keys and dashboard served on /metrics and /dashboard (the limiter,
   * registry and path are the service's). `false`: serve only the registry on /metrics, no dashboard.
   */
  observability?: false | Omit<ObservabilityOptions, 'limiter' | 'registry' | 'dashboardPath'>
  /**
   * The Envoy rate limit rules (`loadEnvoyConfig`) the gRPC listener answers from; their limits are
   * policies of the same limiter, store and metrics as the HTTP API.
   */
  envoy?: EnvoyRules
  /** The gRPC listener for Envoy; overrides the config's `grpc:` (needs `envoy`). */
  grpc?: { port: number; host?: string }
  /**
   * OpenTelemetry export (`startTelemetry(config.telemetry)`): decision metrics on its Meter, a span
   * per decision on its Tracer, joined to a request's `traceparent`. The service shuts it down on `close()`.
   */
  telemetry?: ServiceTelemetry
}

export interface ListeningAddress {
  readonly host: string
  readonly port: number
  /** `http://host:port` */
  readonly url: string
}

export interface Service {
  /** The Prometheus registry served on /metrics; the metrics module registers its collectors here. */
  readonly registry: Registry
  /**
   * Metrics, top keys, spikes and the dashboard (served on /metrics and /dashboard), fed by every
   * decision across reloads, with policies under their configured names (`api`, or `api.pro` for a
   * tier). Undefined when created with `observability: false`.
   */
  readonly observability: Observability | undefined
  /** The config in force (changes on reload). */
  readonly config: ServiceConfig
  /**
   * The limiter in force (a new one after each reload, over the same store). Its policies are named
   * as configured (`api`, `api.pro`, `envoy:edge.user`), each with its storage `id` (`api._.f3a9c2`).
   */
  readonly limiter: Limiter
  readonly store: StoreHandle
  readonly logger: Logger
  /**
   * Listen for every decision, across reloads, with policies named as configured (`api`, `api.pro`).
   * Returns a function that stops listening.
   */
  subscribe(listener: DecisionListener): () => void
  /**
   * Listen on `port` (and, when the config sets `dashboard.port`, start the dashboard's own
   * listener on `dashboard.host:dashboard.port` too).
   */
  listen(port: number, host?: string): Promise<ListeningAddress>
  /** Where the dashboard's own listener listens, once `listen()` resolved; undefined without `dashboard.port`. */
  readonly dashboardAddress: ListeningAddress | undefined
  /** Where the gRPC listener for Envoy listens (`host:port`), once `listen()` resolved; else undefined. */
  readonly grpcAddress: ListeningAddress | undefined
  /** The Envoy rules in force (changes on reload), or undefined. */
  readonly envoy: EnvoyRules | undefined
  /**
   * Swap in a new, already validated config (and Envoy rules, when given): counters of policies whose
   * algorithm and window did not change are kept (same store, same storage ids). `store`,
   * `prefix` and the listeners' ports need a restart.
   */
  reload(config: ServiceConfig, envoy?: EnvoyRules): void
  /** Stop accepting (HTTP and gRPC), finish in-flight requests (up to `graceMs`), then close the store. */
  close(graceMs?: number): Promise<void>
}

/**
 * What every endpoint reads (one object per service). Endpoints read the config-derived fields at
 * the moment they use them, so a request that straddles a reload sees the new config from then on.
 */
export interface ServiceContext {
  readonly handle: StoreHandle
  readonly logger: Logger
  /** Served on /metrics. */
  readonly registry: Registry
  /** Serves /dashboard; undefined with `observability: false`. */
  readonly observability: Observability | undefined
  /** The dashboard's own bind (the config's at start; a change needs a restart), or undefined. */
  readonly dashboardListener: { readonly host: string; readonly port: number } | undefined
  // Swapped together by reload():
  config: ServiceConfig
  limiter: Limiter
  /** The `adminToken` option, else the config's `admin.token`; undefined turns admin endpoints off. */
  adminToken: string | undefined
  /** The client address a /v1/authz request is limited on (observe.ts, authzIpResolver). */
  authzIp: (req: IncomingMessage) => string | undefined
  /** Whether the peer's authz.keyHeader / tierHeader are believed (observe.ts, authzPeerTrusted). */
  authzTrusted: (req: IncomingMessage) => boolean
  /** Set by close(): every answer from then on carries `connection: close`. */
  closing: boolean
  /** Answers a request in the trace of its `traceparent` (telemetry with traces); undefined: off. */
  readonly inTrace: ServiceTelemetry['inTrace'] | undefined
  /** The dashboard's copy of the per-key overrides (override-feed.ts); undefined without a dashboard. */
  overrideFeed?: { refresh(): Promise<void>; stop(): void }
}
