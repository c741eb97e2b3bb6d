// sluice/hono: Hono 4 (4.8 and later: hono/route) middleware over the shared HTTP core.
import type { ServerResponse } from 'node:http'
import { createRequire } from 'node:module'
import type { Context, MiddlewareHandler } from 'hono'
import type { matchedRoutes } from 'hono/route'
import { UnsupportedError } from '../errors.js'
import { asHttpLimiter, deliveryOf, returnOutcome } from '../http/core.js'
import type { HttpLimiter, HttpLimiterOptions, RouteOptions } from '../http/index.js'
import { defaultLogger } from '../http/options.js'
import { countedOf, type ResponseCounter } from '../http/outcome-counting.js'
import { checkKnownKeys, keysOf } from '../options.js'
import { wrongAdapter } from './misuse.js'

export interface HonoAdapterOptions {
  /**
   * The peer address. Default: the socket of @hono/node-server (`c.env.incoming`). Other runtimes pass
   * their own, usually through the runtime's `getConnInfo` (from `hono/bun`, `hono/deno`,
   * `hono/cloudflare-workers`, ...): `remoteAddress: (c) => getConnInfo(c).remote.address`. Without
   * it off node-server, every client is `ip:unknown` (one shared budget): a warning says so, once per limiter.
   */
  remoteAddress?: (c: Context) => string | undefined
  /** Options for the routes this middleware is mounted on (`app.post('/reports', sluice(http, { route: { cost: 5 } }), h)`). */
  route?: RouteOptions<Context>
}

const OPTION_KEYS = keysOf<HonoAdapterOptions>({ remoteAddress: true, route: true })

const HONO_MISSING = 'sluice/hono needs hono 4.8 or later (an optional peer): npm install hono'

/** Whether `error` says that hono, or its `hono/route` (added in 4.8), cannot be found. */
function honoMissing(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown }
  return (
    (code === 'MODULE_NOT_FOUND' ||
      code === 'ERR_MODULE_NOT_FOUND' ||
      code === 'ERR_PACKAGE_PATH_NOT_EXPORTED') &&
    /'hono(\/route)?'|hono\/package\.json/.test(String(message))
  )
}

// Loading this entry without hono names the install instead of failing on a bare `hono/route`. A
// static import cannot say so (an ES module's imports fail before its code runs), so the helper is
// imported dynamically, which keeps each build on its own format's copy of hono (hono/route reads
// the context through a symbol of the copy that made it). Resolving is a synchronous check where
// the runtime has node:module; elsewhere the import's own failure says it, on the first request.
try {
  createRequire(import.meta.url).resolve('hono/route')
} catch (error) {
  if (honoMissing(error)) throw new UnsupportedError(HONO_MISSING)
}
let matchedRoutesOf: typeof matchedRoutes | undefined
const honoRoute: Promise<unknown> = import('hono/route').then(
  (helper) => {
    matchedRoutesOf = helper.matchedRoutes
  },
  (error: unknown) => {
    throw honoMissing(error) ? new UnsupportedError(HONO_MISSING) : error
  },
)
// Awaited by the first request; a failure must not be an unhandled rejection before then.
honoRoute.catch(() => {})

/** The pattern of the handler that will answer (not a middleware's `*`), or undefined when none matched. */
function handlerRoute(c: Context, matched: typeof matchedRoutes): string | undefined {
  const routes = matched(c)
  for (let i = routes.length - 1; i >= 0; i--) {
    const r = routes[i]
    if (r !== undefined && r.method !== 'ALL') return r.path
  }
  return undefined
}

/** Limiters already warned that no remote address could be found: the warning is logged once each. */
const warnedNoAddress = new WeakSet<HttpLimiter>()

const NO_ADDRESS_WARNING =
  'sluice: no client address: this request did not come through @hono/node-server (no c.env.incoming), ' +
  "so every client keys as 'ip:unknown' and shares one budget. Pass the runtime's peer address: " +
  'sluice(options, { remoteAddress: (c) => getConnInfo(c).remote.address }), with getConnInfo from ' +
  "your runtime's Hono adapter (hono/bun, hono/deno, hono/cloudflare-workers, ...)"

/** The peer address from @hono/node-server's `c.env.incoming`; warns once per limiter when there is none. */
function nodeRemoteAddress(http: HttpLimiter): (c: Context) => string | undefined {
  return (c) => {
    const env = c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined
    // A unix socket under node-server has `incoming` but no address: that is `missingIp`'s case, not this.
    if (env?.incoming === undefined && !warnedNoAddress.has(http)) {
      warnedNoAddress.add(http)
      ;(http.options.logger ?? defaultLogger).warn({ route: c.req.path }, NO_ADDRESS_WARNING)
    }
    return env?.incoming?.socket?.remoteAddress
  }
}

/**
 * Run the handler of a request counted by outcome, and tell `counted` when its response has ended:
 * on @hono/node-server when the socket's response closes (a client that went away first counts as
 * failed); elsewhere when the handler has answered.
 */
async function nextCounted(c: Context, next: () => Promise<void>, counted: ResponseCounter): Promise<void> {
  const outgoing = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing
  if (outgoing !== undefined && typeof outgoing.once === 'function') {
    if (outgoing.closed) counted.ended(outgoing.statusCode, c.res, outgoing.writableFinished)
    else outgoing.once('close', () => counted.ended(outgoing.statusCode, c.res, outgoing.writableFinished))
    return next()
  }
  let answered = false
  try {
    await next()
    answered = true
  } finally {
    counted.ended(answered ? c.res.status : 500, c.res, answered)
  }
}

/**
 * Hono middleware; the options' callbacks get the Hono `Context` as `request.raw`.
 * @example
 * app.use('*', sluice({ limiter, rules: [{ policy: 'perIp', key: 'ip' }] }))
 */
export function sluice(
  limiter: HttpLimiter<Context> | HttpLimiterOptions<Context>,
  options: HonoAdapterOptions = {},
): MiddlewareHandler {
  checkKnownKeys('sluice/hono options', options, OPTION_KEYS)
  const http = asHttpLimiter(limiter)
  const routeOptions =
    options.route === undefined
      ? undefined
      : http.prepare(options.route as RouteOptions, 'hono route options')
  const remoteAddress = options.remoteAddress ?? nodeRemoteAddress(http)
  const deliver = deliveryOf(http)
  return async (c, next, ...rest: unknown[]) => {
    // Given to another framework: Express passes (req, res, next), Fastify's register (instance, options, done).
    if (typeof (c as Partial<Context> | undefined)?.req?.header !== 'function') {
      const third = rest[0]
      const error = wrongAdapter('hono', [c, next, third])
      if (typeof third !== 'function') throw error
      ;(third as (error: Error) => void)(error)
      return undefined
    }
    if (matchedRoutesOf === undefined) await honoRoute
    const outcome = await deliver(
      {
        method: c.req.method,
        route: handlerRoute(c, matchedRoutesOf!),
        path: c.req.path,
        remoteAddress: remoteAddress(c),
        header: (name) => c.req.header(name),
        raw: c,
      },
      routeOptions,
      returnOutcome,
      undefined,
      undefined,
    )
    if (outcome.action === 'respond') {
      return new Response(outcome.body, { status: outcome.status, headers: outcome.headers })
    }
    const counted = countedOf(outcome)
    if (counted === undefined) await next()
    else await nextCounted(c, next, counted)
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
