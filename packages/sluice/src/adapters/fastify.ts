// sluice/fastify: a Fastify 5 plugin over the shared HTTP core. Per-route options go in the route's
// config: `app.post('/reports', { config: { sluice: { cost: 5 } } }, handler)`.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { InvalidOptionsError } from '../errors.js'
import { asHttpLimiter, type Delivery, deliveryOf, type HttpLimiter } from '../http/core.js'
import { type FrameworkTrust, proxyTrustConflict, reportConflict } from '../http/framework-trust.js'
import type { HttpLimiterOptions, HttpOutcome, HttpRequestInfo, RouteOptions } from '../http/index.js'
import { countedOf } from '../http/outcome-counting.js'
import { wrongAdapter } from './misuse.js'
import { headerValue, pathOf } from './request-info.js'
import { countOnClose } from './response-end.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Sluice options for this route: cost, extra rules, or skip. */
    sluice?: RouteOptions<FastifyRequest>
  }
}

/** The plugin's options: a core, or its options; their callbacks get the `FastifyRequest` as `request.raw`. */
export type SluiceFastifyOptions = { http: HttpLimiter<FastifyRequest> } | HttpLimiterOptions<FastifyRequest>

const FASTIFY_TRUST: FrameworkTrust = {
  setting: 'Fastify trustProxy',
  address: 'request.ip',
  off: 'leave trustProxy out of Fastify({ ... })',
}

/** The core's view of a Fastify request: a class, so `header` is one shared method, not a closure per request. */
class FastifyRequestInfo implements HttpRequestInfo {
  readonly method: string
  readonly route: string | undefined
  readonly path: string
  readonly remoteAddress: string | undefined
  readonly frameworkClientAddress: string | undefined
  readonly raw: FastifyRequest
  constructor(request: FastifyRequest, route: string | undefined, frameworkTrustsProxies: boolean) {
    const raw = request.raw
    this.method = request.method
    this.route = route
    this.path = pathOf(raw.url)
    this.remoteAddress = raw.socket.remoteAddress
    this.frameworkClientAddress = frameworkTrustsProxies ? request.ip : undefined
    this.raw = request
  }
  header(name: string): string | undefined {
    return headerValue(this.raw.headers[name])
  }
}

/**
 * The lower-case form of every name the core writes. `reply.header` lower-cases each name it is
 * given, and a name with no upper-case letter is the fast case of that conversion (a scan, nothing
 * to rewrite): the default five headers cost about half as much CPU in `reply.header` this way.
 */
const LOWER_CASE_NAMES = new Map<string, string>(
  [
    'X-RateLimit-Limit',
    'X-RateLimit-Remaining',
    'X-RateLimit-Reset',
    'RateLimit-Policy',
    'RateLimit',
    'RateLimit-Limit',
    'RateLimit-Remaining',
    'RateLimit-Reset',
    'Retry-After',
    'Content-Type',
  ].map((name) => [name, name.toLowerCase()]),
)

/** Apply an outcome: set the headers; answer from the hook when refused, else continue. */
function applyOutcome(outcome: HttpOutcome, reply: FastifyReply, next: (error?: Error) => void): void {
  // One `reply.header` per name, as `reply.headers` does, without its `Object.keys` array.
  const headers = outcome.headers
  for (const name in headers) reply.header(LOWER_CASE_NAMES.get(name) ?? name, headers[name])
  // Answering from the hook: send and do not call next.
  if (outcome.action === 'respond') {
    reply.code(outcome.status).send(outcome.body)
    return
  }
  const counted = countedOf(outcome)
  if (counted !== undefined) countOnClose(reply.raw, counted, reply)
  next()
}

/**
 * Register with `await app.register(sluice, { limiter, rules })` (or `{ http: createHttpLimiter(...) }`).
 * Applies to every route of the instance it is registered on, including routes added before it.
 * Bad options reject that `register` (and `app.ready()`). Behind a proxy, either Fastify's
 * `trustProxy` (Sluice then keys on `request.ip`) or Sluice's `trustProxy`, not both: with both,
 * the `register` rejects with `SLUICE_INVALID_OPTIONS`.
 */
export function sluice(
  instance: FastifyInstance,
  options: SluiceFastifyOptions,
  done: (error?: Error) => void,
): void {
  // Called the wrong way: by Express (req, res, next), or as a factory `sluice(options)`.
  if (typeof (instance as Partial<FastifyInstance> | undefined)?.addHook !== 'function') {
    const error = wrongAdapter('fastify', [instance, options, done])
    if (typeof done !== 'function') throw error
    done(error)
    return
  }
  // Errors go to `done`, so they reject `register`/`ready` instead of escaping avvio's queue.
  let http: HttpLimiter
  let deliver: Delivery
  try {
    if (options === null || typeof options !== 'object')
      throw new InvalidOptionsError(
        'sluice/fastify: await app.register(sluice, { limiter, rules }) or { http }',
      )
    http = asHttpLimiter('http' in options ? options.http : options)
    deliver = deliveryOf(http)
  } catch (error) {
    done(error instanceof Error ? error : new Error(String(error)))
    return
  }
  const conflict = proxyTrustConflict(http.options, FASTIFY_TRUST)
  // Fastify 5 keeps `trustProxy` out of `initialConfig`, but builds its request class with `ips`
  // only when it is on (a child instance's class inherits it), and `hasRequestDecorator` looks
  // there: so the conflict is refused here, with the register, before any request.
  if (conflict !== undefined && instance.hasRequestDecorator?.('ips') === true) {
    done(conflict)
    return
  }
  // The fallback: `request.ips` is documented as defined only when trustProxy is enabled. It is the
  // same for every request of the server, so it is read once.
  let fastifyTrustsProxies: boolean | undefined
  instance.addHook('onRoute', (route) => {
    const routeOptions = (route.config as { sluice?: RouteOptions } | undefined)?.sluice
    if (routeOptions !== undefined)
      http.prepare(routeOptions as RouteOptions, `route ${route.method} ${route.url} config.sluice`)
  })
  // A callback hook, so the common case (memory store) answers without a promise.
  instance.addHook(
    'onRequest',
    (request: FastifyRequest, reply: FastifyReply, next: (error?: Error) => void) => {
      fastifyTrustsProxies ??= request.ips !== undefined
      if (fastifyTrustsProxies && conflict !== undefined) return next(reportConflict(http, conflict))
      // Fastify 5 builds a fresh object (a dozen fields) on every read of `routeOptions`: read it once.
      const routeOptions = request.routeOptions
      const info = new FastifyRequestInfo(request, routeOptions.url, fastifyTrustsProxies)
      // Not returned: Fastify would take a returned promise for an async hook's.
      deliver(info, routeOptions.config.sluice as RouteOptions | undefined, applyOutcome, reply, next)
    },
  )
  done()
}

// Like fastify-plugin: hooks apply to the parent instance, not only inside the plugin's scope.
Object.assign(sluice, { [Symbol.for('skip-override')]: true, [Symbol.for('fastify.display-name')]: 'sluice' })

export default sluice
