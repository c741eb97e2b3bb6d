// sluice/fastify: a Fastify 5 plugin over the shared HTTP core. Per-route options go in the route's
// config: `app.post('/reports', { config: { sluice: { cost: 5 } } }, handler)`.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { asHttpLimiter, headerValue, pathOf } from '../http/core.js'
import type { HttpLimiter, HttpLimiterOptions, HttpOutcome, RouteOptions } from '../http/index.js'

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
  // A callback hook, so the common case (memory store) answers without a promise.
  instance.addHook(
    'onRequest',
    (request: FastifyRequest, reply: FastifyReply, next: (error?: Error) => void) => {
      const outcome = http.check(
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
      const apply = (o: HttpOutcome): void => {
        reply.headers(o.headers)
        // Answering from the hook: send and do not call next.
        if (o.action === 'respond') reply.code(o.status).send(o.body)
        else next()
      }
      // check() never rejects.
      if (outcome instanceof Promise) outcome.then(apply)
      else apply(outcome)
    },
  )
  done()
}

// Like fastify-plugin: hooks apply to the parent instance, not only inside the plugin's scope.
Object.assign(sluice, { [Symbol.for('skip-override')]: true, [Symbol.for('fastify.display-name')]: 'sluice' })

export default sluice
