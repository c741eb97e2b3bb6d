// The service's routes: which endpoint answers a path and method (docs/service.md lists them).
// The decision endpoints live in decisions.ts, admin and readiness in admin.ts; /healthz, /metrics
// and the dashboard are answered here.
import type { IncomingMessage, ServerResponse } from 'node:http'
import { admin, ready } from './admin.js'
import { authz, decide } from './decisions.js'
import { finished } from './observe.js'
import { send } from './plumbing.js'
import { ClientError, jsonBody, parseDecisionRequest } from './requests.js'
import type { ServiceContext } from './types.js'

/** Throw 405 unless the request's method is one of `methods`. */
function allow(method: string, ...methods: string[]): void {
  if (!methods.includes(method))
    throw new ClientError('method_not_allowed', `use ${methods.join(' or ')} here, not ${method}`, 405)
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
  switch (path) {
    case '/v1/check':
    case '/v1/peek': {
      // The hot path: these two awaits and no per-request closure (npm run bench -- --only service).
      allow(method, 'POST')
      const request = parseDecisionRequest(ctx.config, await jsonBody(req))
      send(ctx, res, 200, await decide(ctx, request, path === '/v1/peek' ? 'peek' : 'consume'))
      return
    }
    case '/v1/authz':
      allow(method, 'GET', 'HEAD')
      await authz(ctx, req, res, new URLSearchParams(queryAt === -1 ? '' : url.slice(queryAt + 1)))
      return
    case '/v1/reset':
    case '/v1/block':
      allow(method, 'POST')
      await admin(ctx, req, res, path === '/v1/reset' ? 'reset' : 'block', id)
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
      if (ctx.observability === undefined)
        throw new ClientError('not_found', 'the dashboard is off (observability: false)', 404)
      ctx.observability.dashboardHandler(req, res)
      if (path === '/dashboard/events') await finished(res)
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
      throw new ClientError('not_found', `no route ${method} ${path}; see docs/service.md`, 404)
  }
}
