// sluice/fastify: a Fastify 5 plugin over the shared HTTP core. Per-route options go in the route's
// config: `app.post('/reports', { config: { sluice: { cost: 5 } } }, handler)`.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { asHttpLimiter, headerValue, pathOf } from '../http/core.js'
import type { HttpLimiter, HttpLimiterOptions, RouteOptions } from '../http/index.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Sluice options for this route: cost, extra rules, or skip. */
    sluice?: RouteOptions
  }
}

export type SluiceFastifyOptions = { http: HttpLimiter } | HttpLimiterOptions

/**
 * Register with `await app.register(sluice, { limiter, rules })` (or `{ http: createHttpLimiter(...) }`).
 * Applies to every route of the instance it is registered on, including routes added before it.
 */
export function sluice(
  instance: FastifyInstance,
  options: SluiceFastifyOptions,
  done: (error?: Error) => void,
): void {
  const http = asHttpLimiter('http' in options ? options.http : options)
  instance.addHook('onRoute', (route) => {
    const routeOptions = (route.config as { sluice?: RouteOptions } | undefined)?.sluice
    if (routeOptions !== undefined)
      http.prepare(routeOptions, `route ${route.method} ${route.url} config.sluice`)
  })
  instance.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    const outcome = await http.check(
      {
        method: request.method,
        route: request.routeOptions.url,
        path: pathOf(request.raw.url),
        remoteAddress: request.raw.socket.remoteAddress,
        header: (name) => headerValue(request.headers[name]),
        raw: request,
      },
      request.routeOptions.config.sluice,
    )
    reply.headers(outcome.headers)
    if (outcome.action === 'respond') return reply.code(outcome.status).send(outcome.body)
  })
  done()
}

// Like fastify-plugin: hooks apply to the parent instance, not only inside the plugin's scope.
Object.assign(sluice, { [Symbol.for('skip-override')]: true, [Symbol.for('fastify.display-name')]: 'sluice' })

export default sluice
