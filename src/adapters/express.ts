// sluice/express: Express 4 and 5 middleware over the shared HTTP core. Works with no Express import:
// it only needs the Node request/response and the `route`/`baseUrl` Express puts on the request.
import type { IncomingMessage, ServerResponse } from 'node:http'
import { asHttpLimiter, headerValue, pathOf } from '../http/core.js'
import type { HttpLimiter, HttpLimiterOptions, RouteOptions } from '../http/index.js'
import { sendOutcome } from './node.js'

/** The parts of an Express request the middleware reads. */
export interface ExpressLikeRequest extends IncomingMessage {
  route?: { path?: unknown }
  baseUrl?: string
  path?: string
}

export type ExpressMiddleware = (
  req: ExpressLikeRequest,
  res: ServerResponse,
  next: (error?: unknown) => void,
) => void

export interface ExpressLimiter extends ExpressMiddleware {
  /** Route middleware with per-route options: `app.post('/reports', limit.route({ cost: 5 }), handler)`. */
  route(options: RouteOptions): ExpressMiddleware
}

/**
 * Express middleware. Mount it on routes (`app.get('/users/:id', limit, handler)`) so it sees the
 * route pattern; mounted with `app.use` it runs before routing and every request counts as route `*`.
 * @example
 * const limit = sluice({ limiter, rules: [{ policy: 'perIp', key: 'ip' }, { policy: 'perUser', key: 'user' }] })
 * app.get('/users/:id', limit, (req, res) => res.json({ ok: true }))
 */
export function sluice(limiter: HttpLimiter | HttpLimiterOptions): ExpressLimiter {
  const http = asHttpLimiter(limiter)
  const make =
    (routeOptions: RouteOptions | undefined): ExpressMiddleware =>
    (req, res, next) => {
      const pattern = req.route?.path
      const route = pattern === undefined ? undefined : `${req.baseUrl ?? ''}${String(pattern)}`
      http
        .check(
          {
            method: req.method ?? 'GET',
            route,
            path: req.path ?? pathOf(req.url),
            remoteAddress: req.socket.remoteAddress,
            header: (name) => headerValue(req.headers[name]),
            raw: req,
          },
          routeOptions,
        )
        .then((outcome) => {
          if (!sendOutcome(res, outcome)) next()
        }, next)
    }
  const middleware = make(undefined) as ExpressLimiter
  middleware.route = (options) => make(http.prepare(options, 'express route options'))
  return middleware
}
