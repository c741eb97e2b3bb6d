// The service's routes: which endpoint answers a path and method (docs/service.md lists them).
// The decision endpoints live in decisions.ts, admin and readiness in admin.ts; /healthz, /metrics
// and the dashboard are answered here, and so are the browser checks every request passes first
// (Origin, CORS preflight) and the dashboard's token.
import type { IncomingMessage, ServerResponse } from 'node:http'
import { admin, ready, sameSecret } from './admin.js'
import { authz, decisionJson } from './decisions.js'
import { lists } from './lists.js'
import { finished } from './observe.js'
import { reportOutcome } from './outcomes.js'
import { overrides } from './overrides.js'
import { send } from './plumbing.js'
import { ClientError, jsonBody, parseDecisionRequest } from './requests.js'
import type { ServiceContext } from './types.js'
import { settle, waiting } from './waiting.js'

/** Throw 405 unless the request's method is one of `methods`. */
function allow(method: string, ...methods: string[]): void {
  if (!methods.includes(method))
    throw new ClientError('method_not_allowed', `use ${methods.join(' or ')} here, not ${method}`, 405)
}

/**
 * A request from a browser page (it carries `Origin`): refused with 403 unless the origin is in
 * `http.allowedOrigins`; an allowed one gets CORS headers, and its preflight is answered here
 * (returns true: nothing more to do). `/v1/authz` is exempt: proxies (nginx auth_request) forward
 * the browser's own headers to it, it takes no body, and its key is the client's address or a
 * header a page cannot set cross-site without a preflight, which is never answered for it.
 */
function browserRequest(
  ctx: ServiceContext,
  req: IncomingMessage,
  res: ServerResponse,
  origin: string,
  path: string,
): boolean {
  if (path === '/v1/authz') return false
  if (!ctx.config.http.allowedOrigins.has(origin.toLowerCase()))
    throw new ClientError(
      'origin_not_allowed',
      `requests from browser origin ${JSON.stringify(origin)} are refused; list it in http.allowedOrigins to allow it`,
      403,
    )
  res.setHeader('access-control-allow-origin', origin)
  res.setHeader('vary', 'origin')
  if (req.method !== 'OPTIONS') return false
  res.writeHead(204, {
    'access-control-allow-methods': 'GET, HEAD, POST',
    'access-control-allow-headers': 'content-type, authorization, x-request-id',
    'access-control-max-age': '600',
  })
  res.end()
  return true
}

const DASHBOARD_PATHS = new Set([
  '/dashboard',
  '/dashboard/',
  '/dashboard/events',
  '/dashboard/snapshot.json',
])

/**
 * The dashboard, its event stream and snapshot. With `dashboard.token`, each needs it, as
 * `Authorization: Bearer <token>` or `?token=` (the page passes its own query on to its stream).
 */
async function dashboard(
  ctx: ServiceContext,
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  query: string,
) {
  if (ctx.observability === undefined)
    throw new ClientError('not_found', 'the dashboard is off (observability: false)', 404)
  const token = ctx.config.dashboard.token
  if (token !== undefined) {
    const header = req.headers.authorization
    const given =
      header?.startsWith('Bearer ') === true
        ? header.slice(7)
        : (new URLSearchParams(query).get('token') ?? '')
    if (!sameSecret(given, token))
      throw new ClientError(
        'unauthorized',
        'the dashboard needs its token: ?token=<token> or Authorization: Bearer',
        401,
      )
  }
  ctx.observability.dashboardHandler(req, res)
  if (path === '/dashboard/events') await finished(res)
}

/** Answer one request; a ClientError (or any other throw) becomes the plumbing's error answer. */
export async function route(
  ctx: ServiceContext,
  req: IncomingMessage,
  res: ServerResponse,
  id: string,
): Promise<void> {
  const url = req.url ?? '/'
  const queryAt = url.indexOf('?')
  const path = queryAt === -1 ? url : url.slice(0, queryAt)
  const method = req.method ?? 'GET'
  const origin = req.headers.origin
  if (origin !== undefined && browserRequest(ctx, req, res, origin, path)) return
  switch (path) {
    case '/v1/check':
    case '/v1/peek': {
      // The hot path: these two awaits and no per-request closure (npm run bench -- --only service).
      allow(method, 'POST')
      const request = parseDecisionRequest(ctx.config, await jsonBody(req))
      send(ctx, res, 200, await decisionJson(ctx, request, path === '/v1/peek' ? 'peek' : 'consume'))
      return
    }
    case '/v1/authz':
      allow(method, 'GET', 'HEAD')
      await authz(ctx, req, res, new URLSearchParams(queryAt === -1 ? '' : url.slice(queryAt + 1)))
      return
    case '/v1/outcome':
      allow(method, 'POST')
      await reportOutcome(ctx, res, new URLSearchParams(queryAt === -1 ? '' : url.slice(queryAt + 1)))
      return
    case '/v1/reset':
    case '/v1/block':
      allow(method, 'POST')
      await admin(ctx, req, res, path === '/v1/reset' ? 'reset' : 'block', id)
      return
    case '/v1/wait':
    case '/v1/reserve':
      allow(method, 'POST')
      await waiting(ctx, req, res, path)
      return
    case '/healthz':
      allow(method, 'GET', 'HEAD')
      send(ctx, res, 200, '{"status":"ok"}')
      return
    case '/readyz':
      allow(method, 'GET', 'HEAD')
      await ready(ctx, res)
      return
    case '/dashboard':
    case '/dashboard/':
    case '/dashboard/events':
    case '/dashboard/snapshot.json':
      if (ctx.dashboardListener !== undefined)
        throw new ClientError('not_found', 'the dashboard has a listener of its own (dashboard.port)', 404)
      await dashboard(ctx, req, res, path, queryAt === -1 ? '' : url.slice(queryAt + 1))
      return
    case '/metrics': {
      allow(method, 'GET', 'HEAD')
      const text = await ctx.registry.metrics()
      res.writeHead(200, {
        'content-type': ctx.registry.contentType,
        'content-length': Buffer.byteLength(text),
      })
      res.end(text)
      return
    }
    default:
      if (path.startsWith('/v1/lists/')) {
        await lists(ctx, req, res, path, id)
        return
      }
      if (path.startsWith('/v1/settle/')) {
        allow(method, 'POST')
        await settle(ctx, req, res, path)
        return
      }
      if (path.startsWith('/v1/overrides/')) {
        const query = new URLSearchParams(queryAt === -1 ? '' : url.slice(queryAt + 1))
        await overrides(ctx, req, res, path, query, id)
        return
      }
      throw new ClientError('not_found', `no route ${method} ${path}; see docs/service.md`, 404)
  }
}

/** The dashboard's own listener (dashboard.port): the dashboard and nothing else. */
export async function dashboardRoute(
  ctx: ServiceContext,
  req: IncomingMessage,
  res: ServerResponse,
  _id: string,
): Promise<void> {
  const url = req.url ?? '/'
  const queryAt = url.indexOf('?')
  const path = queryAt === -1 ? url : url.slice(0, queryAt)
  const origin = req.headers.origin
  if (origin !== undefined && browserRequest(ctx, req, res, origin, path)) return
  if (!DASHBOARD_PATHS.has(path))
    throw new ClientError('not_found', `no route ${path} on the dashboard listener; try /dashboard`, 404)
  await dashboard(ctx, req, res, path, queryAt === -1 ? '' : url.slice(queryAt + 1))
}
