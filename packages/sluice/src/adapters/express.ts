// sluice/express: Express 4 and 5 middleware over the shared HTTP core. Works with no Express import:
// it only needs the Node request/response and the `route`/`baseUrl` Express puts on the request.
// Express's types (@types/express) type `request.raw` in the options' callbacks, nothing at run time.
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Request } from 'express'
import { asHttpLimiter, deliveryOf } from '../http/core.js'
import {
  type FrameworkTrust,
  frameworkTrustsProxies,
  proxyTrustConflict,
  reportConflict,
} from '../http/framework-trust.js'
import type { HttpLimiter, HttpLimiterOptions, HttpOutcome, RouteOptions } from '../http/index.js'
import { countedOf } from '../http/outcome-counting.js'
import { wrongAdapter } from './misuse.js'
import { sendOutcome } from './node.js'
import { NodeRequestInfo, pathOf } from './request-info.js'
import { countOnClose } from './response-end.js'

/** The parts of an Express request the middleware reads. */
export interface ExpressLikeRequest extends IncomingMessage {
  route?: { path?: unknown }
  baseUrl?: string
  path?: string
  /** The client address Express resolved (through `trust proxy` when set). */
  ip?: string | undefined
  /** The app handling the request: its `trust proxy` setting says whether `ip` went through proxies. */
  app?: { get(setting: string): unknown }
}

const EXPRESS_TRUST: FrameworkTrust = {
  setting: "Express app.set('trust proxy', ...)",
  address: 'req.ip',
  off: "app.set('trust proxy', false)",
}

/** Send a refusal, or pass the request on. */
function continueOrAnswer(outcome: HttpOutcome, res: ServerResponse, next: (error?: unknown) => void): void {
  if (sendOutcome(res, outcome)) return
  const counted = countedOf(outcome)
  if (counted !== undefined) countOnClose(res, counted, res)
  next()
}

export type ExpressMiddleware = (
  req: ExpressLikeRequest,
  res: ServerResponse,
  next: (error?: unknown) => void,
) => void

export interface ExpressLimiter extends ExpressMiddleware {
  /** Route middleware with per-route options: `app.post('/reports', limit.route({ cost: 5 }), handler)`. */
  route(options: RouteOptions<Request>): ExpressMiddleware
}

/**
 * Express middleware. Mount it on routes (`app.get('/users/:id', limit, handler)`) so it sees the
 * route pattern; mounted with `app.use` it runs before routing and every request counts as route `*`.
 * Behind a proxy, either `app.set('trust proxy', ...)` (Sluice then keys on `req.ip`) or Sluice's
 * `trustProxy`, not both: with both, every request fails with `SLUICE_INVALID_OPTIONS` (via `next`).
 * The options' callbacks get Express's `Request` as `request.raw`.
 * @example
 * const limit = sluice({ limiter, rules: [{ policy: 'perIp', key: 'ip' }, { policy: 'perUser', key: 'user' }] })
 * app.get('/users/:id', limit, (req, res) => res.json({ ok: true }))
 */
export function sluice(limiter: HttpLimiter<Request> | HttpLimiterOptions<Request>): ExpressLimiter {
  const http = asHttpLimiter(limiter)
  const deliver = deliveryOf(http)
  // Refused only if the app turns out to trust proxies (known per request: `req.app`).
  const conflict = proxyTrustConflict(http.options, EXPRESS_TRUST)
  const make =
    (routeOptions: RouteOptions | undefined): ExpressMiddleware =>
    (req, res, next) => {
      // Given to another framework (Fastify's register passes instance, options, done).
      if (typeof (res as Partial<ServerResponse> | undefined)?.setHeader !== 'function') {
        const error = wrongAdapter('express', [req, res, next])
        if (typeof next === 'function') return next(error)
        throw error
      }
      let frameworkClientAddress: string | undefined
      if (typeof req.app?.get === 'function' && frameworkTrustsProxies(req.app.get('trust proxy'))) {
        if (conflict !== undefined) return next(reportConflict(http, conflict))
        frameworkClientAddress = req.ip
      }
      const pattern = req.route?.path
      const route = pattern === undefined ? undefined : `${req.baseUrl ?? ''}${String(pattern)}`
      const info = new NodeRequestInfo(req, route, req.path ?? pathOf(req.url), frameworkClientAddress)
      // Not returned: Express 5 would continue a returned promise, one more per request.
      deliver(info, routeOptions, continueOrAnswer, res, next)
    }
  const middleware = make(undefined) as ExpressLimiter
  middleware.route = (options) => make(http.prepare(options as RouteOptions, 'express route options'))
  return middleware
}
