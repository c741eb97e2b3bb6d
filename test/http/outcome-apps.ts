// Real servers of every adapter for the outcome-counting tests (skipFailedRequests and the like,
// rules' countIf): each serves /ok 200, /fail 500, /missing 404, /unauthorized 401 and /hang (answers
// only at close), and a store wrapper that tells each refund once it has reached the store.
import { once } from 'node:events'
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http'
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
import { forwardStore, type Step, type Store } from '../../packages/sluice/src/store.js'
import type { Reply } from './servers.js'

export class Refunds {
  readonly steps: Step[] = []
  #waiters: { count: number; resolve: () => void }[] = []
  wrap(inner: Store): Store {
    return forwardStore(inner, {
      refund: async (steps: readonly Step[]) => {
        await inner.refund(steps)
        this.steps.push(...steps)
        for (const w of this.#waiters.splice(0)) {
          if (this.steps.length >= w.count) w.resolve()
          else this.#waiters.push(w)
        }
      },
    })
  }
  /** Resolves once `count` steps have been refunded in all. */
  reach(count: number): Promise<void> {
    if (this.steps.length >= count) return Promise.resolve()
    return new Promise((resolve) => this.#waiters.push({ count, resolve }))
  }
}

export interface App {
  readonly target: { port: number }
  /** Resolves when a request to /hang is in its handler; the handler answers only at close. */
  readonly hanging: () => Promise<void>
  close(): Promise<void>
}

export interface Harness {
  name: string
  start(http: HttpLimiter, route?: RouteOptions): Promise<App>
}

/** The routes every app serves: /ok 200, /fail 500, /missing 404, /unauthorized 401, /hang (answers only at close). */
function hangSignal() {
  let started: () => void = () => {}
  const startedP = new Promise<void>((r) => {
    started = r
  })
  let release: () => void = () => {}
  const released = new Promise<void>((r) => {
    release = r
  })
  return { started: () => started(), hanging: () => startedP, released, release }
}

async function listen(server: Server): Promise<{ port: number }> {
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return { port: (server.address() as { port: number }).port }
}

async function closeServer(server: Server): Promise<void> {
  server.closeAllConnections()
  await new Promise<void>((resolve) => server.close(() => resolve()))
}

export function expressHarness(name: string, express: typeof express5): Harness {
  return {
    name,
    async start(http, route) {
      const hang = hangSignal()
      const app = express()
      const sluice = sluiceExpress(http)
      const limit = route === undefined ? sluice : sluice.route(route)
      app.get('/ok', limit, (_q, s) => s.send('ok'))
      app.get('/fail', limit, (_q, s) => s.status(500).send('fail'))
      app.get('/missing', limit, (_q, s) => s.status(404).send('missing'))
      app.get('/unauthorized', limit, (_q, s) => s.status(401).send('unauthorized'))
      app.get('/hang', limit, async (_q, s) => {
        hang.started()
        await hang.released
        s.send('late')
      })
      const server = createServer(app)
      const target = await listen(server)
      return {
        target,
        hanging: hang.hanging,
        close: async () => {
          hang.release()
          await closeServer(server)
        },
      }
    },
  }
}

const fastifyHarness: Harness = {
  name: 'fastify 5',
  async start(http, route) {
    const hang = hangSignal()
    const app = Fastify()
    await app.register(sluiceFastify, { http })
    const config = route === undefined ? {} : { config: { sluice: route } }
    app.get('/ok', config, async () => 'ok')
    app.get('/fail', config, async (_q, reply) => reply.code(500).send('fail'))
    app.get('/missing', config, async (_q, reply) => reply.code(404).send('missing'))
    app.get('/unauthorized', config, async (_q, reply) => reply.code(401).send('unauthorized'))
    app.get('/hang', config, async () => {
      hang.started()
      await hang.released
      return 'late'
    })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const target = { port: (app.server.address() as { port: number }).port }
    return {
      target,
      hanging: hang.hanging,
      close: async () => {
        hang.release()
        app.server.closeAllConnections()
        await app.close()
      },
    }
  },
}

const honoHarness: Harness = {
  name: 'hono 4',
  async start(http, route) {
    const hang = hangSignal()
    const app = new Hono()
    const limit = sluiceHono(http, route === undefined ? {} : { route })
    app.get('/ok', limit, (c) => c.text('ok'))
    app.get('/fail', limit, (c) => c.text('fail', 500))
    app.get('/missing', limit, (c) => c.text('missing', 404))
    app.get('/unauthorized', limit, (c) => c.text('unauthorized', 401))
    app.get('/hang', limit, async (c) => {
      hang.started()
      await hang.released
      return c.text('late')
    })
    const server = createAdaptorServer({ fetch: app.fetch }) as Server
    const target = await listen(server)
    return {
      target,
      hanging: hang.hanging,
      close: async () => {
        hang.release()
        await closeServer(server)
      },
    }
  },
}

const nodeHarness: Harness = {
  name: 'node:http',
  async start(http, route) {
    const hang = hangSignal()
    const server = createServer(
      withSluice(
        http,
        (req, res) => {
          const path = req.url ?? '/'
          if (path === '/hang') {
            hang.started()
            void hang.released.then(() => res.end('late'))
            return
          }
          res.statusCode = STATUS_OF_PATH[path] ?? 200
          res.end(path.slice(1))
        },
        { route: (req: IncomingMessage) => req.url, routeOptions: () => route },
      ),
    )
    const target = await listen(server)
    return {
      target,
      hanging: hang.hanging,
      close: async () => {
        hang.release()
        await closeServer(server)
      },
    }
  },
}

/** What the node:http app answers on each path (200 on any other). */
const STATUS_OF_PATH: Readonly<Record<string, number>> = {
  '/fail': 500,
  '/missing': 404,
  '/unauthorized': 401,
}

export const harnesses: readonly Harness[] = [
  expressHarness('express 4', express4),
  expressHarness('express 5', express5),
  fastifyHarness,
  honoHarness,
  nodeHarness,
]

export function remaining(reply: Reply): number {
  return Number(reply.headers['x-ratelimit-remaining'])
}

/** Open a request to /hang, wait until its handler runs, then drop the connection. */
export async function abortHanging(app: App): Promise<void> {
  const req = httpRequest({ host: '127.0.0.1', port: app.target.port, path: '/hang', agent: false })
  req.on('error', () => {})
  req.end()
  await app.hanging()
  req.destroy()
}
