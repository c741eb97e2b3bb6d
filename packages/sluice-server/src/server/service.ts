// The decision service: a node:http server answering rate-limit decisions (JSON API and nginx
// auth_request), admin actions, health, readiness and metrics. Built as a factory so tests run it
// in-process on port 0; the CLI adds config files, signals and store URLs around it. This file wires
// config, limiter, observability and reload; routes.ts maps requests to the endpoints (decisions.ts,
// admin.ts) and plumbing.ts is the server around them.
import { type Logger, pino } from 'pino'
import { Registry } from 'prom-client'
import type { DecisionListener, Limiter, Policy, StoreHealthEvent } from 'sluice'
import { createLimiter, InvalidConfigError } from 'sluice'
import { checkKnownKeys, keysOf } from 'sluice/internal'
import { createObservability, createOpenTelemetry } from 'sluice/metrics'
import type { EnvoyContext } from '../envoy/decide.js'
import { grpcFront } from '../envoy/grpc.js'
import { overridePolicies } from '../envoy/overrides.js'
import { grpcPeerMatcher } from '../envoy/peers.js'
import type { ServiceConfig } from './config.js'
import { limiterPolicies, validateAdminToken } from './config.js'
import { abuseOptions } from './config-abuse.js'
import type { ListenerTls } from './listener-tls.js'
import { loadListenerTls } from './listener-tls.js'
import { authzIpResolver, authzPeerTrusted } from './observe.js'
import { overrideFeed } from './override-feed.js'
import { serve } from './plumbing.js'
import { dashboardRoute, route } from './routes.js'
import { memoryStoreHandle, redactStoreUrl } from './store-url.js'
import type { ListeningAddress, Service, ServiceContext, ServiceOptions, StoreHandle } from './types.js'

export { memoryStoreHandle } from './store-url.js'
export type { ListeningAddress, Service, ServiceOptions, StoreHandle } from './types.js'

const OPTION_KEYS = keysOf<ServiceOptions>({
  config: true,
  store: true,
  logger: true,
  adminToken: true,
  observability: true,
  envoy: true,
  grpc: true,
  telemetry: true,
})

/** The gRPC listener's settings read at start (its peers follow every reload). */
const GRPC_AT_START = [
  'port',
  'host',
  'maxConnections',
  'handshakeTimeoutMs',
  'idleTimeoutMs',
  'callTimeoutMs',
  'maxConcurrentStreams',
  'maxSessionMemoryMb',
] as const
/** True when both configs name the same store TLS files and server name. */
function sameStoreTls(a: ServiceConfig, b: ServiceConfig): boolean {
  return JSON.stringify(a.storeTls ?? {}) === JSON.stringify(b.storeTls ?? {})
}

/**
 * A reload with the same store settings reads the store's TLS files again (a rotated CA or client
 * certificate): the connections made from then on use them. One that cannot be read keeps the
 * previous ones, loudly.
 */
function rereadStoreTls(handle: StoreHandle, logger: Logger): void {
  if (handle.rereadTlsFiles === undefined) return
  try {
    handle.rereadTlsFiles()
    logger.info({ store: handle.description }, 'store TLS files read again; new connections use them')
  } catch (error) {
    logger.error(
      { store: handle.description },
      `store TLS files not read again, keeping the previous ones: ${(error as Error).message}`,
    )
  }
}

/** A listener's TLS as `serve` and the gRPC listener take it: the files read now (throws InvalidConfigError). */
function listenerTls(tls: ListenerTls | undefined, where: string) {
  return tls === undefined
    ? undefined
    : { context: loadListenerTls(tls, where), requireClientCert: tls.requireClientCert }
}

/** The TLS settings a reload cannot change: on or off, and whether client certificates are required. */
function tlsMode(tls: ListenerTls | undefined): string {
  return tls === undefined ? 'off' : tls.requireClientCert ? 'mtls' : 'tls'
}

/** The abuse settings as one comparable string (a change needs a restart: the windows hold state). */
function abuseKey(config: ServiceConfig): string {
  return JSON.stringify(abuseOptions(config.abuse, config.tierNames))
}

/**
 * Create the decision service. Nothing listens until `listen()`.
 * @example
 * const service = createService({ config: parseConfig(text, 'inline') })
 * const { url } = await service.listen(0)
 */
export function createService(options: ServiceOptions): Service {
  checkKnownKeys('createService', options, OPTION_KEYS)
  validateAdminToken(options.adminToken, 'adminToken')
  const handle = options.store ?? memoryStoreHandle()
  const logger = options.logger ?? pino({ level: process.env.SLUICE_LOG_LEVEL ?? 'info' })
  const registry = new Registry()
  let listeners: DecisionListener[] = []
  const forward: DecisionListener = (event) => {
    for (const listener of listeners) listener(event)
  }

  // Observability: subscribed once through `forward`, so it outlives every reload. Limiter policies
  // are named as configured (`api`, `api.pro`, `envoy:edge.user`; the storage id is apart), so
  // events reach it as decided.
  let envoyRules = options.envoy
  const grpcListener =
    options.grpc ??
    (options.config.grpc.port === undefined
      ? undefined
      : { port: options.config.grpc.port, host: options.config.grpc.host })
  if (grpcListener !== undefined && envoyRules === undefined)
    throw new InvalidConfigError(
      'a gRPC port needs Envoy rules: set envoy.config in the config or pass --envoy-config',
    )
  const observability =
    options.observability === false
      ? undefined
      : createObservability({
          ...options.observability,
          // The config's abuse: section, unless the caller turned the patterns off or tuned them.
          abuse: options.observability?.abuse ?? abuseOptions(options.config.abuse, options.config.tierNames),
          // The policies of the limiter in force (a reload swaps it): the dashboard shows their lists.
          limiter: {
            subscribe,
            get policies() {
              return ctx.limiter.policies
            },
          },
          registry,
          dashboardPath: '/dashboard',
        })
  const metrics = observability?.metrics
  // A multi-region store's regions: sluice_region_stale / _sync_age_seconds and the dashboard.
  const regionsOf = handle.regions?.bind(handle)
  if (regionsOf !== undefined) metrics?.watchRegions(regionsOf)
  const sharesOf = handle.shares?.bind(handle)
  if (sharesOf !== undefined) metrics?.watchShares(sharesOf)
  const { telemetry } = options
  // Like observability: subscribed once through `forward`, so it outlives every reload.
  const openTelemetry =
    telemetry === undefined
      ? undefined
      : createOpenTelemetry({
          meter: telemetry.meter,
          ...(telemetry.tracer === undefined ? {} : { tracer: telemetry.tracer }),
          limiter: { subscribe },
        })
  // The store's health, as the failover layer reports it, into sluice_store_up / _circuit_state /
  // _store_errors_total. The memory store is in-process: it is always up.
  const onStoreHealth = (event: StoreHealthEvent): void => {
    if (metrics === undefined) return
    if (event.type === 'error') metrics.recordStoreError(event.store)
    else {
      metrics.setStoreUp(event.store, event.up)
      metrics.setCircuitState(event.store, event.circuit)
    }
  }

  // Envoy's limits are policies of the same limiter (same store, metrics, failover as the HTTP API).
  function buildLimiter(next: ServiceConfig, extra: Readonly<Record<string, Policy>> = {}): Limiter {
    const envoyPolicies: Record<string, Policy> = {}
    for (const [name, policy] of Object.entries({ ...envoyRules?.policies, ...extra }))
      envoyPolicies[name] = { ...policy, onStoreError: next.onStoreError }
    return createLimiter({
      store: handle.store,
      policies: { ...limiterPolicies(next), ...envoyPolicies },
      onDecision: forward,
      onStoreHealth,
      waiting: { maxWaitersPerKey: next.waiting.maxWaitersPerKey, maxWaiters: next.waiting.maxWaiters },
      // Failover warnings (store failing, recovered) go to the service log, at most one per 10 s.
      logger,
    })
  }

  function subscribe(listener: DecisionListener): () => void {
    listeners = [...listeners, listener]
    return () => {
      listeners = listeners.filter((l) => l !== listener)
    }
  }

  const ctx: ServiceContext = {
    handle,
    logger,
    registry,
    observability,
    dashboardListener:
      options.config.dashboard.port === undefined || observability === undefined
        ? undefined
        : { host: options.config.dashboard.host ?? '127.0.0.1', port: options.config.dashboard.port },
    config: options.config,
    limiter: buildLimiter(options.config),
    adminToken: options.adminToken ?? options.config.adminToken,
    authzIp: authzIpResolver(options.config),
    authzTrusted: authzPeerTrusted(options.config),
    closing: false,
    inTrace: telemetry?.tracer === undefined ? undefined : telemetry.inTrace,
  }
  // An in-process store has no failover layer to report on it: it is up.
  if (handle.store.inProcess === true) metrics?.setStoreUp(ctx.limiter.store.name, true)
  if (observability !== undefined) {
    const feed = overrideFeed(ctx)
    ctx.overrideFeed = feed
    observability.watchOverrides(feed.current)
  }
  // Timeouts and the connection cap are the server's, fixed at start (a reload logs a change).
  const started = options.config
  const front = serve(ctx, route, started.http, listenerTls(started.http.tls, 'http.tls'))
  const dashboardFront =
    ctx.dashboardListener === undefined ? undefined : serve(ctx, dashboardRoute, started.http)
  let dashboardAddress: ListeningAddress | undefined

  // Per-request limit overrides (Envoy's descriptor `limit`) need policies of their own: a limiter
  // with them added, at most envoy.maxOverridePolicies of them, until the next reload.
  const overrides = overridePolicies({
    registry,
    max: () => ctx.config.envoy.maxOverridePolicies,
    build: (extra) => buildLimiter(ctx.config, extra),
  })
  let peerTrusted = grpcPeerMatcher(options.config.grpc.trustedPeers, 'grpc.trustedPeers')
  const limiterWith = (extra: Readonly<Record<string, Policy>>) => overrides.limiterWith(extra)
  // What a gRPC call is answered with: made at start and on each reload, and read by every call
  // as it is (nothing per call).
  const envoyContextOf = (): EnvoyContext => ({
    rules: envoyRules!,
    peerTrusted,
    settings: ctx.config.envoy,
    limiter: ctx.limiter,
    limiterWith,
    inTrace: ctx.inTrace,
  })
  let envoyContext = envoyContextOf()
  const grpc =
    grpcListener === undefined
      ? undefined
      : grpcFront(() => envoyContext, logger, started.grpc, listenerTls(started.grpc.tls, 'grpc.tls'))
  let grpcAddress: ListeningAddress | undefined

  return {
    registry,
    observability,
    get config() {
      return ctx.config
    },
    get limiter() {
      return ctx.limiter
    },
    store: handle,
    logger,
    subscribe,
    get dashboardAddress() {
      return dashboardAddress
    },
    get grpcAddress() {
      return grpcAddress
    },
    get envoy() {
      return envoyRules
    },
    async listen(port, host = '127.0.0.1') {
      const address = await front.listen(port, host)
      if (dashboardFront !== undefined && ctx.dashboardListener !== undefined) {
        try {
          dashboardAddress = await dashboardFront.listen(
            ctx.dashboardListener.port,
            ctx.dashboardListener.host,
          )
        } catch (error) {
          await front.shutdown(0)
          throw error
        }
      }
      if (grpc !== undefined && grpcListener !== undefined) {
        try {
          grpcAddress = await grpc.listen(grpcListener.port, grpcListener.host ?? '127.0.0.1')
        } catch (error) {
          await Promise.all([front.shutdown(0), dashboardFront?.shutdown(0)])
          throw error
        }
      }
      return address
    },
    reload(next, nextEnvoy) {
      const { config } = ctx
      const storeKept =
        next.store === config.store &&
        sameStoreTls(next, config) &&
        next.storeCompactValues === config.storeCompactValues &&
        JSON.stringify(next.regions) === JSON.stringify(config.regions)
      if (!storeKept || next.prefix !== config.prefix) {
        logger.warn(
          { store: redactStoreUrl(next.store), prefix: next.prefix },
          'store and prefix changes take effect on restart; keeping the current store',
        )
      }
      if (storeKept) rereadStoreTls(handle, logger)
      const restartOnly: string[] = (['headersTimeoutMs', 'requestTimeoutMs', 'maxConnections'] as const)
        .filter((name) => next.http[name] !== started.http[name])
        .map((name) => `http.${name}`)
      if (next.dashboard.host !== started.dashboard.host || next.dashboard.port !== started.dashboard.port)
        restartOnly.push('dashboard.host', 'dashboard.port')
      for (const name of GRPC_AT_START)
        if (next.grpc[name] !== started.grpc[name]) restartOnly.push(`grpc.${name.replace(/Ms$/, '')}`)
      if (abuseKey(next) !== abuseKey(started)) restartOnly.push('abuse')
      // The certificate files are read again (a bad one refuses the reload); the mode stays.
      const httpTls = tlsMode(next.http.tls) === tlsMode(started.http.tls) ? next.http.tls : undefined
      const grpcTls = tlsMode(next.grpc.tls) === tlsMode(started.grpc.tls) ? next.grpc.tls : undefined
      if (httpTls === undefined && started.http.tls !== next.http.tls) restartOnly.push('http.tls')
      if (grpcTls === undefined && started.grpc.tls !== next.grpc.tls) restartOnly.push('grpc.tls')
      const httpContext = listenerTls(httpTls, 'http.tls')?.context
      const grpcContext = listenerTls(grpcTls, 'grpc.tls')?.context
      if (JSON.stringify(next.telemetry) !== JSON.stringify(started.telemetry)) restartOnly.push('telemetry')
      if (restartOnly.length > 0)
        logger.warn(
          { settings: restartOnly },
          'these settings take effect on restart; keeping the current ones',
        )
      if (nextEnvoy !== undefined) envoyRules = nextEnvoy
      const nextLimiter = buildLimiter(next)
      overrides.clear()
      peerTrusted = grpcPeerMatcher(next.grpc.trustedPeers, 'grpc.trustedPeers')
      if (httpContext !== undefined) front.setSecureContext(httpContext)
      if (grpcContext !== undefined) grpc?.setSecureContext(grpcContext)
      const ids = new Set([...config.entries.values()].map((entry) => entry.id))
      const kept = [...next.entries.values()].filter((entry) => ids.has(entry.id)).length
      ctx.config = next
      ctx.adminToken = options.adminToken ?? next.adminToken
      ctx.limiter = nextLimiter
      ctx.authzIp = authzIpResolver(next)
      ctx.authzTrusted = authzPeerTrusted(next)
      envoyContext = envoyContextOf()
      logger.info({ file: next.file, policies: next.entries.size, keptCounters: kept }, 'config reloaded')
    },
    async close(graceMs = 10_000) {
      if (ctx.closing) return
      ctx.closing = true
      ctx.overrideFeed?.stop()
      // Ends the dashboard's event streams, which would otherwise hold the server open.
      observability?.close()
      await Promise.all([front.shutdown(graceMs), dashboardFront?.shutdown(graceMs), grpc?.shutdown(graceMs)])
      await handle.store.close()
      // Last: the decisions answered while draining are exported too.
      openTelemetry?.close()
      await telemetry?.shutdown()
      logger.info('stopped')
    },
  }
}
