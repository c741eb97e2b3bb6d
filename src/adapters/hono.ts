// sluice/hono: Hono 4 (4.8 and later: hono/route) middleware over the shared HTTP core.
import type { Context, MiddlewareHandler } from 'hono'
import { matchedRoutes } from 'hono/route'
import { asHttpLimiter } from '../http/core.js'
import type { HttpLimiter, HttpLimiterOptions, RouteOptions } from '../http/index.js'

export interface HonoAdapterOptions {
  /** The peer address. Default: the socket of @hono/node-server (`c.env.incoming`); other runtimes pass their own. */
  remoteAddress?: (c: Context) => string | undefined
  /** Options for the routes this middleware is mounted on (`app.post('/reports', sluice(http, { route: { cost: 5 } }), h)`). */
  route?: RouteOptions
}

/** The pattern of the handler that will answer (not a middleware's `*`), or undefined when none matched. */
function handlerRoute(c: Context): string | undefined {
  const routes = matchedRoutes(c)
  for (let i = routes.length - 1; i >= 0; i--) {
    const r = routes[i]
    if (r !== undefined && r.method !== 'ALL') return r.path
  }
  return undefined
}

function nodeRemoteAddress(c: Context): string | undefined {
  const env = c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined
  return env?.incoming?.socket?.remoteAddress
}

/**
 * @example
 * app.use('*', sluice({ limiter, rules: [{ policy: 'perIp', key: 'ip' }] }))
 */
export function sluice(
  limiter: HttpLimiter | HttpLimiterOptions,
  options: HonoAdapterOptions = {},
): MiddlewareHandler {
  const http = asHttpLimiter(limiter)
  const routeOptions =
    options.route === undefined ? undefined : http.prepare(options.route, 'hono route options')
  const remoteAddress = options.remoteAddress ?? nodeRemoteAddress
  return async (c, next) => {
    const outcome = await http.check(
      {
        method: c.req.method,
        route: handlerRoute(c),
        path: c.req.path,
        remoteAddress: remoteAddress(c),
        header: (name) => c.req.header(name),
        raw: c,
      },
      routeOptions,
    )
    if (outcome.action === 'respond') {
      return new Response(outcome.body, { status: outcome.status, headers: outcome.headers })
    }
    await next()
    const entries = Object.entries(outcome.headers)
    if (entries.length === 0) return undefined
    try {
      for (const [name, value] of entries) c.res.headers.set(name, value)
    } catch {
      // A Response with immutable headers (e.g. from fetch): copy it, then set.
      c.res = new Response(c.res.body, c.res)
      for (const [name, value] of entries) c.res.headers.set(name, value)
    }
    return undefined
  }
}
