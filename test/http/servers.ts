// Real listening servers, one per adapter, all serving the same small API:
// GET /hello, GET /users/:id, POST /reports (cost 5, set the framework's own way), GET /health.
import { once } from 'node:events'
import {
  createServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type RequestListener,
  type Server,
} from 'node:http'
import { createAdaptorServer } from '@hono/node-server'
import express5 from 'express'
import express4 from 'express4'
import Fastify from 'fastify'
import { Hono } from 'hono'
import { sluice as sluiceExpress } from '../../packages/sluice/src/adapters/express.js'
import { sluice as sluiceFastify } from '../../packages/sluice/src/adapters/fastify.js'
import { sluice as sluiceHono } from '../../packages/sluice/src/adapters/hono.js'
import { withSluice } from '../../packages/sluice/src/adapters/node.js'
import type { HttpLimiter, RouteOptions } from '../../packages/sluice/src/http/index.js'

export type Listen = { port: 0 } | { path: string }

export interface Running {
  /** Requests answered by the app's handlers (not by the limiter). */
  readonly handled: () => number
  readonly target: { port: number } | { socketPath: string }
  close(): Promise<void>
}

export interface AdapterHarness {
  name: string
  start(http: HttpLimiter, listen: Listen): Promise<Running>
}

const REPORTS: RouteOptions = { cost: 5 }

async function listenNode(
  server: Server,
  listen: Listen,
): Promise<{ port: number } | { socketPath: string }> {
  if ('path' in listen) server.listen(listen.path)
  else server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  if ('path' in listen) return { socketPath: listen.path }
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('no port')
  return { port: address.port }
}

async function closeNode(server: Server): Promise<void> {
  server.closeAllConnections()
  await new Promise<void>((resolve) => server.close(() => resolve()))
}

/**
 * Apps served on 127.0.0.1 for one test file: `serve(app)` listens on a free port, `closeAll()`
 * (in an afterEach) closes every server served since.
 */
export function appServers(): {
  serve(app: RequestListener): Promise<{ port: number }>
  closeAll(): Promise<void>
} {
  const open: Server[] = []
  return {
    async serve(app) {
      const server = createServer(app)
      open.push(server)
      return (await listenNode(server, { port: 0 })) as { port: number }
    },
    async closeAll() {
      for (const server of open.splice(0)) await closeNode(server)
    },
  }
}

function expressHarness(name: string, express: typeof express5): AdapterHarness {
  return {
    name,
    async start(http, listen) {
      let handled = 0
      const app = express()
      const limit = sluiceExpress(http)
      app.get('/hello', limit, (_req, res) => {
        handled++
        res.send('hello')
      })
      app.get('/users/:id', limit, (req, res) => {
        handled++
        res.json({ id: req.params.id })
      })
      app.post('/reports', limit.route(REPORTS), (_req, res) => {
        handled++
        res.json({ queued: true })
      })
      app.get('/health', limit, (_req, res) => {
        handled++
        res.send('ok')
      })
      const server = createServer(app)
      const target = await listenNode(server, listen)
      return { handled: () => handled, target, close: () => closeNode(server) }
    },
  }
}

const fastifyHarness: AdapterHarness = {
  name: 'fastify 5',
  async start(http, listen) {
    let handled = 0
    const app = Fastify()
    await app.register(sluiceFastify, { http })
    app.get('/hello', async () => {
      handled++
      return 'hello'
    })
    app.get<{ Params: { id: string } }>('/users/:id', async (req) => {
      handled++
      return { id: req.params.id }
    })
    app.post('/reports', { config: { sluice: REPORTS } }, async () => {
      handled++
      return { queued: true }
    })
    app.get('/health', async () => {
      handled++
      return 'ok'
    })
    if ('path' in listen) await app.listen({ path: listen.path })
    else await app.listen({ port: 0, host: '127.0.0.1' })
    const address = app.server.address()
    const target =
      'path' in listen
        ? { socketPath: listen.path }
        : { port: typeof address === 'object' && address !== null ? address.port : 0 }
    return {
      handled: () => handled,
      target,
      close: async () => {
        app.server.closeAllConnections()
        await app.close()
      },
    }
  },
}

const honoHarness: AdapterHarness = {
  name: 'hono 4',
  async start(http, listen) {
    let handled = 0
    const app = new Hono()
    const limit = sluiceHono(http)
    app.get('/hello', limit, (c) => {
      handled++
      return c.text('hello')
    })
    app.get('/users/:id', limit, (c) => {
      handled++
      return c.json({ id: c.req.param('id') })
    })
    app.post('/reports', sluiceHono(http, { route: REPORTS }), (c) => {
      handled++
      return c.json({ queued: true })
    })
    app.get('/health', limit, (c) => {
      handled++
      return c.text('ok')
    })
    const server = createAdaptorServer({ fetch: app.fetch }) as Server
    const target = await listenNode(server, listen)
    return { handled: () => handled, target, close: () => closeNode(server) }
  },
}

const nodeHarness: AdapterHarness = {
  name: 'node:http',
  async start(http, listen) {
    let handled = 0
    const route = (req: IncomingMessage): string | undefined => {
      const path = (req.url ?? '/').split('?')[0] ?? '/'
      if (/^\/users\/[^/]+$/.test(path)) return '/users/:id'
      return ['/hello', '/reports', '/health'].includes(path) ? path : undefined
    }
    const server = createServer(
      withSluice(
        http,
        (_req, res) => {
          handled++
          res.setHeader('Content-Type', 'text/plain')
          res.end('hello')
        },
        { route, routeOptions: (r) => (r === '/reports' ? REPORTS : undefined) },
      ),
    )
    const target = await listenNode(server, listen)
    return { handled: () => handled, target, close: () => closeNode(server) }
  },
}

export const adapters: readonly AdapterHarness[] = [
  expressHarness('express 4', express4),
  expressHarness('express 5', express5),
  fastifyHarness,
  honoHarness,
  nodeHarness,
]

export interface Reply {
  status: number
  headers: IncomingHttpHeaders
  body: string
}

/** One HTTP request over TCP to 127.0.0.1 or over a unix socket. */
export function call(
  target: Running['target'],
  path: string,
  options: { method?: string; headers?: Record<string, string> } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        ...('port' in target ? { host: '127.0.0.1', port: target.port } : { socketPath: target.socketPath }),
        path,
        method: options.method ?? 'GET',
        headers: options.headers ?? {},
        agent: false,
      },
      (res) => {
        let body = ''
        res.setEncoding('utf8')
        res.on('data', (chunk: string) => {
          body += chunk
        })
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }))
      },
    )
    req.setTimeout(5000, () => req.destroy(new Error(`timeout on ${path}`)))
    req.on('error', reject)
    req.end()
  })
}
