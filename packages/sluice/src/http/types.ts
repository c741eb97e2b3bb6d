// The framework-neutral shapes the HTTP core works on: what an adapter hands in, what it gets back.

import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Decision, LayeredDecision, Limiter } from '../limiter.js'
import type { ListEntries } from '../lists.js'
import type { HeaderFamilies } from './headers.js'
import type { TrustProxy } from './ip.js'
import type { QueueOptions } from './queue.js'

/** A node:http request handler (`http.createServer(handler)`): sluice/node wraps one, sluice/metrics serves with them. */
export type NodeHandler = (req: IncomingMessage, res: ServerResponse) => unknown

/**
 * What the core needs to know about one request; each adapter builds this from its framework's request.
 * `Raw` is the type of `raw`: each adapter's options fill it in (Express's `Request`, Fastify's
 * `FastifyRequest`, Hono's `Context`, node's `IncomingMessage`), so callbacks reach it without a cast.
 */
export interface HttpRequestInfo<Raw = unknown> {
  /** The HTTP method as received. */
  method: string
  /** The route pattern as the framework knows it (`/users/:id`), never the raw URL; undefined when unknown. */
  route: string | undefined
  /** The path without query string, used only by `skip.paths`. */
  path: string
  /** The socket's peer address; undefined for a unix socket. */
  remoteAddress: string | undefined
  /**
   * The client address as the framework resolved it through proxies the framework was told to trust
   * (Express `req.ip` under `app.set('trust proxy', ...)`, Fastify `request.ip` under `trustProxy`).
   * Adapters set it only when the framework trusts proxies; the core then keys on it instead of
   * reading forwarding headers itself (Sluice's `trustProxy` must be unset: docs/http.md, "Behind a proxy").
   */
  frameworkClientAddress?: string | undefined
  /**
   * A request header by lower-case name (repeated headers joined with `, `). Call it as a method
   * (`request.header('x-user')`): the built-in adapters pass one shared method, not a closure per
   * request, so a detached `const { header } = request` has no request to read.
   */
  header(name: string): string | undefined
  /** The framework's own request object, for user callbacks (`user`, `tiers.resolve`, `skip.when`). */
  raw: Raw
}

/** Built-in key kinds: client IP (IPv6 grouped), user id, API key header, route, or one shared key. */
export type KeyKind = 'ip' | 'user' | 'apiKey' | 'route' | 'global'

/** A key: one built-in kind, several combined (e.g. `['user', 'route']`), or a function of the request. */
export type KeySpec<Raw = unknown> =
  | KeyKind
  | readonly KeyKind[]
  | ((request: HttpRequestInfo<Raw>) => string | undefined)

/**
 * Units a request spends: a whole number from 1, or a function of the request giving one (may be
 * async). A function's answer that is not a whole number from 1 fails that request with
 * `SLUICE_INVALID_COST` (logged; a 500, or a pass with `onError: 'open'`), and nothing is charged.
 */
export type RequestCost<Raw = unknown> =
  | number
  | ((request: HttpRequestInfo<Raw>) => number | Promise<number>)

/**
 * The policy of a layer for one request: a policy name of the limiter, or `null` for no limit on this
 * layer (may be async). A name the limiter does not have fails that request with `SLUICE_UNKNOWN_POLICY`.
 */
export type RequestPolicy<Raw = unknown> = (
  request: HttpRequestInfo<Raw>,
) => string | null | Promise<string | null>

/** One layer of limits: a policy (or one per tier, or one per request) applied to a key. */
export interface Rule<Raw = unknown> {
  /**
   * The limiter policy; a map from tier name to policy (`null`: no limit on this layer for that
   * tier); or a function of the request naming it (`(req) => isPremium(req) ? 'premium' : 'free'`).
   */
  policy: string | Readonly<Record<string, string | null>> | RequestPolicy<Raw>
  /** Whose budget this layer spends. A layer whose key is missing (anonymous user, no API key) is skipped, except `ip`, see `missingIp`. */
  key: KeySpec<Raw>
  /** Only on these routes: `'POST /reports'`, `'/reports/:id'` (any method), or a method alone: `'POST'`. Default: every route. */
  routes?: readonly string[]
  /** This layer's cost, whatever the route's (e.g. a per-IP request count), or a function of the request. */
  cost?: RequestCost<Raw>
  /**
   * Requests this layer never limits: `ips` (addresses, CIDRs) match the client IP, `keys` the
   * layer's key exactly. The layer is skipped without a store call; the other layers still apply.
   */
  allow?: ListEntries
  /**
   * Requests refused with 403 when this layer applies, without a store call: `ips` match the
   * client IP, `keys` the layer's key exactly. A deny wins over an allow.
   */
  deny?: ListEntries
  /**
   * After the response, give this layer's units back unless `countIf(status)` is true (status 0:
   * the client went away first). See docs/http.md, "Per rule: countIf".
   */
  countIf?: (status: number) => boolean
}

/** A response that has ended, as `requestWasSuccessful` sees it. */
export interface HttpResponseInfo {
  /** The status sent (or being sent, when the client went away first). */
  statusCode: number
  /** The framework's response: Express's and node:http's `res`, Fastify's `reply`, Hono's `c.res`. */
  raw: unknown
}

/**
 * Give a request's units back once its response has ended, by its outcome. The request is counted
 * when it arrives; a refused request took nothing and gets nothing back. Limiter-wide, and per route
 * over the limiter-wide values. See docs/http.md, "Counting by outcome".
 */
export interface OutcomeCountingOptions<Raw = unknown> {
  /** Give back the units of a failed response (`requestWasSuccessful` false, or the client went away before it was sent). Default false. */
  skipFailedRequests?: boolean
  /** Give back the units of a successful response. Default false. */
  skipSuccessfulRequests?: boolean
  /** Whether a response succeeded; may return a promise. Default: `response.statusCode < 400`. */
  requestWasSuccessful?: (
    request: HttpRequestInfo<Raw>,
    response: HttpResponseInfo,
  ) => boolean | Promise<boolean>
}

/** Per-route options: from the adapter (Express route middleware, Fastify route config) or `routes` in the options. */
export interface RouteOptions<Raw = unknown> extends OutcomeCountingOptions<Raw> {
  /** Units this route spends on every layer without a cost of its own, or a function of the request. Default 1. */
  cost?: RequestCost<Raw>
  /** Extra layers for this route, checked together with the global ones (all or nothing). */
  rules?: readonly Rule<Raw>[]
  /** Do not limit this route at all. */
  skip?: boolean
  /** This route's rate-limit refusal body (over the limiter's `message`): a string as text/plain, an object as JSON. */
  message?: string | Readonly<Record<string, unknown>> | readonly unknown[]
  /** This route's rate-limit refusal status (over the limiter's `statusCode`), from 400 to 599. */
  statusCode?: number
}

/** A response the core asks the adapter to send instead of calling the handler. */
export interface HttpResponseSpec {
  status: number
  headers: Record<string, string>
  body: string
}

/** The core's answer for one request. */
export type HttpOutcome =
  | {
      action: 'continue'
      /** Headers to set on the eventual response. */
      headers: Record<string, string>
      decision?: Decision | LayeredDecision
      /** True in shadow mode when the request would have been refused. */
      wouldDeny?: boolean
    }
  | ({ action: 'respond'; decision?: Decision | LayeredDecision } & HttpResponseSpec)

/** Context given to the custom `onLimited` handler and to `onDecision`. */
export interface LimitedContext<Raw = unknown> {
  request: HttpRequestInfo<Raw>
  decision: Decision | LayeredDecision
  /** The headers Sluice would send (rate-limit family and Retry-After). */
  headers: Record<string, string>
  /** The default response Sluice would send. */
  response: HttpResponseSpec
}

export interface DecisionInfo<Raw = unknown> {
  request: HttpRequestInfo<Raw>
  route: string
  tier: string | undefined
  decision: Decision | LayeredDecision
  shadow: boolean
}

/** A pino-compatible logger (pino itself fits). */
export interface HttpLogger {
  warn(details: object, message: string): void
  error(details: object, message: string): void
}

export interface TierOptions<Raw = unknown> {
  /** Map a request to a tier name; may be async. An unknown name (or undefined) means the default tier. */
  resolve(request: HttpRequestInfo<Raw>): string | undefined | Promise<string | undefined>
  /** The tier for unknown names, anonymous callers and (with `onError: 'default'`) resolver failures. */
  default: string
  /** How long a resolution is reused for the same identity. Default 30 s; 0 disables the cache. */
  cacheMs?: number
  /** Whose tier is cached: the user id (default), the API key, the IP, or a function. */
  cacheBy?: KeySpec<Raw>
  /** Most identities cached at once. Default 10,000. */
  cacheSize?: number
  /** When `resolve` throws or rejects: use the default tier (default) or answer 500. Logged either way. */
  onError?: 'default' | 'fail'
}

/** The options of `createHttpLimiter`; `Raw` types each callback's `request.raw` (see `HttpRequestInfo`). */
export interface HttpLimiterOptions<Raw = unknown> extends OutcomeCountingOptions<Raw> {
  /** The limiter (and so the store) that decides. Every policy named in rules must exist on it. */
  limiter: Limiter
  /** The layers checked on every request (all or nothing). */
  rules: readonly Rule<Raw>[]
  /** Per-route options keyed by `'METHOD /pattern'` or `'/pattern'`. */
  routes?: Readonly<Record<string, RouteOptions<Raw>>>
  tiers?: TierOptions<Raw>
  /** The user id of a request (e.g. from a verified session); undefined for anonymous requests. */
  user?: (request: HttpRequestInfo<Raw>) => string | undefined
  /** The header holding an API key. Default `x-api-key`. */
  apiKeyHeader?: string
  /** Which peers may set forwarding headers. Default `false` (the socket peer is the client). */
  trustProxy?: TrustProxy
  /** The forwarding header your trusted proxies write (`x-real-ip`: one address). Default `x-forwarded-for`. */
  proxyHeader?: 'x-forwarded-for' | 'forwarded' | 'x-real-ip'
  /** IPv6 clients are grouped by this prefix length. Default 64. */
  ipv6Prefix?: number
  /** When a request has no client IP (unix socket): share one `ip:unknown` budget (default), or refuse with 400. */
  missingIp?: 'shared' | 'reject'
  /** Keys longer than this are replaced by a hash of themselves (same caller, same budget). Default 256. */
  maxKeyLength?: number
  /** Requests never limited: by client IP/CIDR, exact path, route, or a predicate. */
  skip?: {
    ips?: readonly string[]
    paths?: readonly string[]
    routes?: readonly string[]
    when?: (request: HttpRequestInfo<Raw>) => boolean
  }
  /** Requests always refused with 403: by client IP/CIDR, or a predicate. */
  deny?: { ips?: readonly string[]; when?: (request: HttpRequestInfo<Raw>) => boolean }
  /** Decide, count, log and set headers, but never refuse. Default false. */
  shadow?: boolean
  /** Header families to send. Default `both`. */
  headers?: HeaderFamilies
  /** The 429 body: `json` (default) or `problem` (application/problem+json, RFC 9457). */
  body?: 'json' | 'problem'
  /**
   * Status of a request denied because the store failed under a policy with `onStoreError: 'closed'`
   * (decision reason `store_unavailable`): 503 (default) or 429; Retry-After is sent either way.
   * Fail-open (`degraded`) decisions pass as usual.
   */
  storeUnavailableStatus?: 503 | 429
  /**
   * The body of a rate-limit refusal instead of Sluice's JSON: a string (sent as
   * `text/plain; charset=utf-8`) or an object (sent as JSON). The headers stay. Not with `onLimited`.
   */
  message?: string | Readonly<Record<string, unknown>> | readonly unknown[]
  /** The status of a rate-limit refusal instead of 429, from 400 to 599. Not with `onLimited`. */
  statusCode?: number
  /** Custom response for a refused request; return undefined to send the default. */
  onLimited?: (context: LimitedContext<Raw>) => HttpResponseSpec | undefined
  /**
   * Queue a request that would be refused while it can fit within `maxWaitMs` (limiter.wait),
   * instead of answering 429; at most `maxQueued` (default 1,000) queued at once. See docs/waiting.md.
   */
  queue?: QueueOptions
  /** Called after every decision (also in shadow mode). Errors thrown by it are ignored. */
  onDecision?: (info: DecisionInfo<Raw>) => void
  /** When the limiter itself fails (store down, a key callback throws): answer 500 (default) or let the request through. Logged either way. */
  onError?: 'fail' | 'open'
  logger?: HttpLogger
  /** The wall clock for `X-RateLimit-Reset`. Default `Date.now`. */
  now?: () => number
}
