// The decision service: a node:http server answering rate-limit decisions (JSON API and nginx
// auth_request), admin actions, health, readiness and metrics. Built as a factory so tests run it
// in-process on port 0; the CLI adds config files, signals and store URLs around it.
import { randomBytes, timingSafeEqual } from 'node:crypto'
import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Logger } from 'pino'
import { pino } from 'pino'
import { Registry } from 'prom-client'
import { InvalidDurationError, SluiceError } from '../errors.js'
import type { StoreHealthEvent } from '../failover/options.js'
import { rateLimitBody, rateLimitHeaders } from '../http/headers.js'
import type { Decision, DecisionListener, Limiter } from '../limiter.js'
import { createLimiter } from '../limiter.js'
import type { Observability, ObservabilityOptions } from '../metrics/observability.js'
import { createObservability } from '../metrics/observability.js'
import type { Store } from '../store.js'
import { isSyncStore } from '../store.js'
import { memoryStore } from '../stores/memory.js'
import type { ServiceConfig } from './config.js'
import { limiterPolicies } from './config.js'
import { authzIpResolver, displayed, displayNamesOf, finished } from './observe.js'
import type { DecisionRequest } from './requests.js'
import {
  ClientError,
  checkCost,
  checkKey,
  entryFor,
  parseAdminRequest,
  parseDecisionRequest,
  parseJson,
  readBody,
} from './requests.js'
import { policiesForHeaders, present, presentLayered } from './responses.js'

/** The store the service decides on, with a way to ask whether it answers. */
export interface StoreHandle {
  readonly store: Store
  /** For logs and /readyz: `memory`, or the URL with any password hidden. */
  readonly description: string
  /** Resolves when the store answers, rejects when it does not. */
  ping(): Promise<void>
}

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
  /** The limiter in force (a new one after each reload, over the same store). */
  readonly limiter: Limiter
  readonly store: StoreHandle
  readonly logger: Logger
  /**
   * Listen for every decision, across reloads (policies under their internal names, `api._.f3a9c2`).
   * Returns a function that stops listening.
   */
  subscribe(listener: DecisionListener): () => void
  listen(port: number, host?: string): Promise<ListeningAddress>
  /**
   * Swap in a new, already validated config: counters of policies whose algorithm and window did not
   * change are kept (same store, same internal names). `store` and `prefix` changes need a restart.
   */
  reload(config: ServiceConfig): void
  /** Stop accepting, finish in-flight requests (up to `graceMs`), then close the store. */
  close(graceMs?: number): Promise<void>
}

/** A memory store with a trivial ping: what `npm start` runs on. */
export function memoryStoreHandle(): StoreHandle {
  return { store: memoryStore(), description: 'memory', ping: async () => {} }
}

const JSON_TYPE = 'application/json'
const READY_TIMEOUT_MS = 1000

/**
 * Create the decision service. Nothing listens until `listen()`.
 * @example
 * const service = createService({ config: parseConfig(text, 'inline') })
 * const { url } = await service.listen(0)
 */
export function createService(options: ServiceOptions): Service {
  const handle = options.store ?? memoryStoreHandle()
  const logger = options.logger ?? pino({ level: process.env.SLUICE_LOG_LEVEL ?? 'info' })
  const registry = new Registry()
  let listeners: DecisionListener[] = []
  const forward: DecisionListener = (event) => {
    for (const listener of listeners) listener(event)
  }

  // Observability: subscribed once through `forward`, so it outlives every reload. It sees
  // configured names (`api`, `api.pro`), not the internal ones that carry a shape hash.
  let displayNames = displayNamesOf(options.config)
  const observability =
    options.observability === false
      ? undefined
      : createObservability({
          ...options.observability,
          limiter: {
            subscribe: (listener) => subscribe((event) => listener(displayed(event, displayNames))),
          },
          registry,
          dashboardPath: '/dashboard',
        })
  const metrics = observability?.metrics
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

  let config = options.config
  let adminToken = options.adminToken ?? config.adminToken
  let limiter = buildLimiter(config)
  const syncStore = isSyncStore(handle.store)
  if (syncStore) metrics?.setStoreUp(limiter.store.name, true)
  let headerPolicies = policiesForHeaders(config)
  let authzIp = authzIpResolver(config)

  function buildLimiter(next: ServiceConfig): Limiter {
    return createLimiter({
      store: handle.store,
      policies: limiterPolicies(next),
      onDecision: forward,
      onStoreHealth,
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

  // Request ids: the caller's X-Request-Id when it is sane, else a per-boot prefix and a counter.
  const bootId = randomBytes(4).toString('hex')
  let requestCounter = 0
  function requestId(req: IncomingMessage): string {
    const given = req.headers['x-request-id']
    if (typeof given === 'string' && given.length > 0 && given.length <= 128 && /^[\x21-\x7e]+$/.test(given))
      return given
    requestCounter = (requestCounter + 1) % Number.MAX_SAFE_INTEGER
    return `${bootId}-${requestCounter.toString(36)}`
  }

  let inFlight = 0
  let closing = false
  let drained: (() => void) | undefined

  function settle(req: IncomingMessage, res: ServerResponse, id: string, started: number): void {
    inFlight--
    if (started > 0) {
      logger.debug(
        {
          reqId: id,
          method: req.method,
          url: req.url,
          status: res.statusCode,
          ms: performance.now() - started,
        },
        'request',
      )
    }
    if (closing && inFlight === 0) drained?.()
  }

  const server: Server = createServer((req, res) => {
    inFlight++
    const id = requestId(req)
    res.setHeader('x-request-id', id)
    const started = logger.isLevelEnabled('debug') ? performance.now() : 0
    route(req, res, id).then(
      () => settle(req, res, id, started),
      (error: unknown) => {
        fail(res, id, req, error)
        settle(req, res, id, started)
      },
    )
  })
  server.keepAliveTimeout = 65_000

  function send(res: ServerResponse, status: number, body: string, headers?: Record<string, string>): void {
    if (res.headersSent) return
    if (headers !== undefined) for (const name in headers) res.setHeader(name, headers[name]!)
    if (closing) res.setHeader('connection', 'close')
    res.writeHead(status, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(body) })
    res.end(body)
  }

  function errorBody(code: string, message: string): string {
    return JSON.stringify({ error: code, message })
  }

  function fail(res: ServerResponse, id: string, req: IncomingMessage, error: unknown): void {
    if (error instanceof ClientError) {
      logger.info({ reqId: id, method: req.method, url: req.url, error: error.code }, error.message)
      if (error.code === 'body_too_large') {
        // Do not read the rest of an oversized body: answer, then close the connection.
        res.setHeader('connection', 'close')
        req.resume()
      }
      send(res, error.status, errorBody(error.code, error.message))
      return
    }
    if (error instanceof SluiceError && error.code.startsWith('SLUICE_STORE')) {
      logger.error({ reqId: id, err: error }, 'store unavailable')
      send(res, 503, errorBody('store_unavailable', `the store did not answer: ${error.message}`))
      return
    }
    logger.error({ reqId: id, method: req.method, url: req.url, err: error }, 'internal error')
    send(res, 500, errorBody('internal_error', 'internal error; see the service log for this request id'))
  }

  async function jsonBody(req: IncomingMessage): Promise<unknown> {
    return parseJson(await readBody(req))
  }

  async function route(req: IncomingMessage, res: ServerResponse, id: string): Promise<void> {
    const url = req.url ?? '/'
    const queryAt = url.indexOf('?')
    const path = queryAt === -1 ? url : url.slice(0, queryAt)
    const method = req.method ?? 'GET'
    switch (path) {
      case '/v1/check':
      case '/v1/peek': {
        allow(method, 'POST')
        const request = parseDecisionRequest(config, await jsonBody(req))
        send(res, 200, await decide(request, path === '/v1/peek' ? 'peek' : 'consume'))
        return
      }
      case '/v1/authz':
        allow(method, 'GET', 'HEAD')
        await authz(req, res, new URLSearchParams(queryAt === -1 ? '' : url.slice(queryAt + 1)))
        return
      case '/v1/reset':
      case '/v1/block':
        allow(method, 'POST')
        await admin(req, res, path === '/v1/reset' ? 'reset' : 'block', id)
        return
      case '/healthz':
        allow(method, 'GET', 'HEAD')
        send(res, 200, '{"status":"ok"}')
        return
      case '/readyz':
        allow(method, 'GET', 'HEAD')
        await ready(res)
        return
      case '/dashboard':
      case '/dashboard/':
      case '/dashboard/events':
      case '/dashboard/snapshot.json':
        if (observability === undefined)
          throw new ClientError('not_found', 'the dashboard is off (observability: false)', 404)
        observability.dashboardHandler(req, res)
        if (path === '/dashboard/events') await finished(res)
        return
      case '/metrics': {
        allow(method, 'GET', 'HEAD')
        const text = await registry.metrics()
        res.writeHead(200, {
          'content-type': registry.contentType,
          'content-length': Buffer.byteLength(text),
        })
        res.end(text)
        return
      }
      default:
        throw new ClientError('not_found', `no route ${method} ${path}; see docs/service.md`, 404)
    }
  }

  function allow(method: string, ...methods: string[]): void {
    if (!methods.includes(method))
      throw new ClientError('method_not_allowed', `use ${methods.join(' or ')} here, not ${method}`, 405)
  }

  async function decide(request: DecisionRequest, mode: 'consume' | 'peek'): Promise<string> {
    if (!request.layered) {
      const check = request.checks[0]!
      const options = { cost: check.cost ?? 1 }
      // The memory store decides in-process: skip the promise round trip on the hot path.
      const d =
        mode === 'peek'
          ? await limiter.peek(check.policy, check.key, options)
          : syncStore
            ? limiter.consumeSync(check.policy, check.key, options)
            : await limiter.consume(check.policy, check.key, options)
      return JSON.stringify(present(d, request.entries[0]!))
    }
    const d = mode === 'consume' ? await limiter.consume(request.checks) : await limiter.peek(request.checks)
    return JSON.stringify(presentLayered(d, request.entries))
  }

  async function authz(req: IncomingMessage, res: ServerResponse, query: URLSearchParams): Promise<void> {
    for (const name of query.keys()) {
      if (name !== 'policy' && name !== 'tier' && name !== 'cost')
        throw new ClientError(
          'unknown_field',
          `unknown query parameter ${JSON.stringify(name)}; use policy, tier, cost`,
        )
    }
    const tierHeader = config.authz.tierHeader
    const headerTier = tierHeader === undefined ? undefined : req.headers[tierHeader]
    const tier =
      query.get('tier') ?? (typeof headerTier === 'string' && headerTier !== '' ? headerTier : undefined)
    const entry = entryFor(config, query.get('policy') ?? undefined, tier, 'query')
    const keyHeader = config.authz.keyHeader
    const rawKey = keyHeader === undefined ? authzIp(req) : req.headers[keyHeader]
    if (typeof rawKey !== 'string' || rawKey === '') {
      throw new ClientError(
        'missing_key',
        keyHeader === undefined ? 'no client address to limit on' : `the ${keyHeader} header is missing`,
      )
    }
    const key = checkKey(rawKey, keyHeader ?? 'client address')
    const costText = query.get('cost')
    const cost = checkCost(costText === null ? undefined : Number(costText), entry, 'query')
    const d = await limiter.consume(entry.internalName, key, { cost })
    const named: Decision = { ...d, policy: entry.name }
    const headers = rateLimitHeaders(named, headerPolicies.get(entry.internalName)!, {
      headers: 'both',
      nowMs: Date.now(),
    })
    // The adapters' body: nginx drops it, Traefik forwardAuth passes a denial's body to the client.
    // A `closed` policy whose store failed: 503 (or authz.storeUnavailableStatus) with Retry-After.
    const body = rateLimitBody(named, 'json', {
      storeUnavailableStatus: config.authz.storeUnavailableStatus,
    })
    send(res, body.status, body.body, headers)
  }

  function authorized(req: IncomingMessage): void {
    if (adminToken === undefined)
      throw new ClientError(
        'admin_disabled',
        'admin endpoints are off: set admin.token or SLUICE_ADMIN_TOKEN',
        403,
      )
    const header = req.headers.authorization ?? ''
    const given = Buffer.from(header.startsWith('Bearer ') ? header.slice(7) : '')
    const expected = Buffer.from(adminToken)
    if (given.length !== expected.length || !timingSafeEqual(given, expected))
      throw new ClientError('unauthorized', 'send Authorization: Bearer <admin token>', 401)
  }

  async function admin(
    req: IncomingMessage,
    res: ServerResponse,
    kind: 'reset' | 'block',
    id: string,
  ): Promise<void> {
    authorized(req)
    const { entries, key, duration } = parseAdminRequest(config, await jsonBody(req), kind)
    try {
      for (const entry of entries) {
        if (kind === 'reset') await limiter.reset(entry.internalName, key)
        else await limiter.block(entry.internalName, key, duration as string)
      }
    } catch (error) {
      if (error instanceof InvalidDurationError) throw new ClientError('invalid_duration', error.message)
      throw error
    }
    logger.info({ reqId: id, action: kind, policy: entries[0]!.name, key, duration }, `admin ${kind}`)
    send(res, 200, JSON.stringify({ ok: true, action: kind, policy: entries[0]!.name, key }))
  }

  async function ready(res: ServerResponse): Promise<void> {
    let timer: NodeJS.Timeout | undefined
    try {
      await Promise.race([
        handle.ping(),
        new Promise((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`no answer within ${READY_TIMEOUT_MS}ms`)),
            READY_TIMEOUT_MS,
          )
        }),
      ])
      send(res, 200, JSON.stringify({ ready: true, store: handle.description, reachable: true }))
    } catch (error) {
      // The store does not answer: ready only while some policy's failure mode still serves decisions.
      const modes = [...new Set([...config.entries.values()].map((entry) => entry.onStoreError))]
      const serving = modes.some((mode) => mode !== 'closed')
      send(
        res,
        serving ? 200 : 503,
        JSON.stringify({
          ready: serving,
          store: handle.description,
          reachable: false,
          serving: serving
            ? `failure modes: ${modes.join(', ')}`
            : 'nothing: every policy is onStoreError closed',
          health: limiter.health(),
          message: (error as Error).message,
        }),
      )
    } finally {
      clearTimeout(timer)
    }
  }

  return {
    registry,
    observability,
    get config() {
      return config
    },
    get limiter() {
      return limiter
    },
    store: handle,
    logger,
    subscribe,
    listen(port, host = '127.0.0.1') {
      return new Promise((resolve, reject) => {
        server.once('error', reject)
        server.listen(port, host, () => {
          server.off('error', reject)
          const address = server.address() as AddressInfo
          const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address
          resolve({ host: address.address, port: address.port, url: `http://${shown}:${address.port}` })
        })
      })
    },
    reload(next) {
      if (next.store !== config.store || next.prefix !== config.prefix) {
        logger.warn(
          { store: next.store, prefix: next.prefix },
          'store and prefix changes take effect on restart; keeping the current store',
        )
      }
      const nextLimiter = buildLimiter(next)
      const kept = [...next.entries.keys()].filter((name) => config.entries.has(name)).length
      config = next
      adminToken = options.adminToken ?? next.adminToken
      limiter = nextLimiter
      headerPolicies = policiesForHeaders(next)
      authzIp = authzIpResolver(next)
      displayNames = displayNamesOf(next)
      logger.info({ file: next.file, policies: next.entries.size, keptCounters: kept }, 'config reloaded')
    },
    async close(graceMs = 10_000) {
      if (closing) return
      closing = true
      // Ends the dashboard's event streams, which would otherwise hold the server open.
      observability?.close()
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()))
      server.closeIdleConnections()
      if (inFlight > 0) {
        let timer: NodeJS.Timeout | undefined
        await Promise.race([
          new Promise<void>((resolve) => {
            drained = resolve
          }),
          new Promise<void>((resolve) => {
            timer = setTimeout(resolve, graceMs)
          }),
        ])
        clearTimeout(timer)
      }
      server.closeAllConnections()
      await stopped
      await handle.store.close()
      logger.info('stopped')
    },
  }
}
