// Frameworks as their users configure them: Express `trust proxy` and Fastify `trustProxy` decide who
// the client is when Sluice's own `trustProxy` is not set (both set is refused), the Fastify plugin's
// errors reach `register`/`ready`, an adapter used with the wrong framework says so, and Hono off
// @hono/node-server warns once instead of keying everyone as `ip:unknown` in silence.
import { once } from 'node:events'
import { createServer, type Server } from 'node:http'
import express5 from 'express'
import express4 from 'express4'
import Fastify, { type FastifyInstance } from 'fastify'
import { Hono } from 'hono'
import { afterEach, describe, expect, it } from 'vitest'
import { sluice as sluiceExpress } from '../../packages/sluice/src/adapters/express.js'
import { sluice as sluiceFastify } from '../../packages/sluice/src/adapters/fastify.js'
import { sluice as sluiceHono } from '../../packages/sluice/src/adapters/hono.js'
import { SluiceError } from '../../packages/sluice/src/errors.js'
import type { HttpLimiterOptions, HttpLogger } from '../../packages/sluice/src/http/index.js'
import { createHttpLimiter } from '../../packages/sluice/src/http/index.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { call } from './servers.js'

type Options = Omit<HttpLimiterOptions, 'limiter'>

/** One request per client per minute: a second client that shares the first one's key is refused. */
function options(extra: Partial<Options> = {}): HttpLimiterOptions {
  const limiter = createLimiter({
    policies: { perIp: { algorithm: 'sliding-window-log', limit: 1, window: '1m' } },
  })
  return { limiter, rules: [{ policy: 'perIp', key: 'ip' }], ...extra }
}

function capture(): { logger: HttpLogger; warnings: string[]; errors: string[]; errorDetails: object[] } {
  const warnings: string[] = []
  const errors: string[] = []
  const errorDetails: object[] = []
  return {
    warnings,
    errors,
    errorDetails,
    logger: {
      warn: (_d, message) => warnings.push(message),
      error: (details, message) => {
        errors.push(message)
        errorDetails.push(details)
      },
    },
  }
}

const forwarded = (client: string) => ({ headers: { 'x-forwarded-for': client } })

let cleanup: (() => Promise<void>)[] = []
afterEach(async () => {
  for (const close of cleanup) await close()
  cleanup = []
})

async function listen(server: Server): Promise<{ port: number }> {
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  cleanup.push(async () => {
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  })
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('no port')
  return { port: address.port }
}

async function listenFastify(app: FastifyInstance): Promise<{ port: number }> {
  await app.listen({ port: 0, host: '127.0.0.1' })
  cleanup.push(async () => {
    app.server.closeAllConnections()
    await app.close()
  })
  const address = app.server.address()
  return { port: typeof address === 'object' && address !== null ? address.port : 0 }
}

/** The error an Express app's error handler received, answered as JSON `{ code, message }`. */
function errorHandler(
  error: unknown,
  _req: unknown,
  res: { status(code: number): { json(body: unknown): void } },
  _next: unknown,
): void {
  const e = error as { code?: unknown; message?: unknown }
  res.status(500).json({ code: e.code, message: e.message, sluice: error instanceof SluiceError })
}

for (const [name, express] of [
  ['express 4', express4],
  ['express 5', express5],
] as const) {
  describe(`${name} with app.set('trust proxy')`, () => {
    async function serve(trust: unknown, extra: Partial<Options> = {}) {
      const app = express()
      if (trust !== undefined) app.set('trust proxy', trust)
      app.get('/hello', sluiceExpress(options(extra)), (_req, res) => {
        res.send('hello')
      })
      app.use(errorHandler)
      return listen(createServer(app))
    }

    it('keys on req.ip: two forwarded clients behind a loopback proxy get separate budgets', async () => {
      const target = await serve('loopback')
      expect((await call(target, '/hello', forwarded('203.0.113.1'))).status).toBe(200)
      expect((await call(target, '/hello', forwarded('203.0.113.2'))).status).toBe(200)
      expect((await call(target, '/hello', forwarded('203.0.113.1'))).status).toBe(429)
    })

    it('keys on req.ip with a hop count too (trust proxy 1)', async () => {
      const target = await serve(1)
      expect((await call(target, '/hello', forwarded('198.51.100.7'))).status).toBe(200)
      expect((await call(target, '/hello', forwarded('198.51.100.8'))).status).toBe(200)
    })

    it('ignores forwarding headers when Express trusts no proxy (the default)', async () => {
      const target = await serve(undefined)
      expect((await call(target, '/hello', forwarded('203.0.113.1'))).status).toBe(200)
      expect((await call(target, '/hello', forwarded('203.0.113.2'))).status).toBe(429)
    })

    it("refuses Sluice's trustProxy set as well: the error names which setting to remove", async () => {
      const { logger, errors, errorDetails } = capture()
      const target = await serve('loopback', { trustProxy: ['loopback'], logger })
      const reply = await call(target, '/hello', forwarded('203.0.113.1'))
      expect((await call(target, '/hello', forwarded('203.0.113.2'))).status).toBe(500)
      expect(errors).toHaveLength(1) // logged once, whatever the app's error handler does
      // The log line carries the error, and so the fix: which setting to remove or turn off.
      const logged = (errorDetails[0] as { err?: SluiceError }).err
      expect(logged).toMatchObject({ code: 'SLUICE_INVALID_OPTIONS' })
      expect(logged?.message).toMatch(/Remove trustProxy from Sluice's options/)
      expect(logged?.message).toMatch(/app\.set\('trust proxy', false\)/)
      expect(reply.status).toBe(500)
      const body = JSON.parse(reply.body) as { code: string; message: string; sluice: boolean }
      expect(body.sluice).toBe(true)
      expect(body.code).toBe('SLUICE_INVALID_OPTIONS')
      expect(body.message).toMatch(/trust proxy/)
      expect(body.message).toMatch(/remove/i)
      expect(body.message).toMatch(/trustProxy/)
    })

    it('refuses an explicit Sluice trustProxy: false while Express trusts proxies', async () => {
      const target = await serve(true, { trustProxy: false })
      const reply = await call(target, '/hello', forwarded('203.0.113.1'))
      expect(reply.status).toBe(500)
      expect((JSON.parse(reply.body) as { code: string }).code).toBe('SLUICE_INVALID_OPTIONS')
    })

    it("keeps Sluice's own trustProxy when Express trusts no proxy", async () => {
      const target = await serve(false, { trustProxy: ['loopback'] })
      expect((await call(target, '/hello', forwarded('203.0.113.1'))).status).toBe(200)
      expect((await call(target, '/hello', forwarded('203.0.113.2'))).status).toBe(200)
    })

    it('a Fastify plugin used as Express middleware gets the wrong-adapter error, not a TypeError', async () => {
      const app = express()
      app.use(sluiceFastify as never)
      app.get('/hello', (_req, res) => {
        res.send('hello')
      })
      app.use(errorHandler)
      const reply = await call(await listen(createServer(app)), '/hello')
      expect(reply.status).toBe(500)
      const body = JSON.parse(reply.body) as { code: string; message: string; sluice: boolean }
      expect(body).toMatchObject({ code: 'SLUICE_WRONG_ADAPTER', sluice: true })
      expect(body.message).toMatch(/sluice\/express/)
    })
  })
}

describe('fastify 5 with trustProxy', () => {
  it('keys on request.ip: two forwarded clients behind a loopback proxy get separate budgets', async () => {
    const app = Fastify({ trustProxy: '127.0.0.1' })
    await app.register(sluiceFastify, options())
    app.get('/hello', async () => 'hello')
    const target = await listenFastify(app)
    expect((await call(target, '/hello', forwarded('203.0.113.1'))).status).toBe(200)
    expect((await call(target, '/hello', forwarded('203.0.113.2'))).status).toBe(200)
    expect((await call(target, '/hello', forwarded('203.0.113.1'))).status).toBe(429)
  })

  it('ignores forwarding headers without trustProxy (the default)', async () => {
    const app = Fastify()
    await app.register(sluiceFastify, options())
    app.get('/hello', async () => 'hello')
    const target = await listenFastify(app)
    expect((await call(target, '/hello', forwarded('203.0.113.1'))).status).toBe(200)
    expect((await call(target, '/hello', forwarded('203.0.113.2'))).status).toBe(429)
  })

  it("refuses Sluice's trustProxy set as well at registration: register rejects, naming which setting to remove", async () => {
    for (const trustProxy of [true, '127.0.0.1', ['127.0.0.1']]) {
      const app = Fastify({ trustProxy })
      cleanup.push(() => app.close())
      const error = await app.register(sluiceFastify, options({ trustProxy: ['loopback'] })).then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(error, String(trustProxy)).toBeInstanceOf(SluiceError)
      expect(error).toMatchObject({ code: 'SLUICE_INVALID_OPTIONS' })
      const message = (error as Error).message
      expect(message).toMatch(/Fastify trustProxy/)
      expect(message).toMatch(/remove/i)
    }
  })

  it("refuses it in a child plugin too, and accepts Sluice's trustProxy when Fastify trusts no proxy", async () => {
    const app = Fastify({ trustProxy: 'loopback' })
    cleanup.push(() => app.close())
    app.register(async (child) => {
      await child.register(sluiceFastify, options({ trustProxy: false }))
    })
    await expect(app.ready()).rejects.toMatchObject({ code: 'SLUICE_INVALID_OPTIONS' })
    const plain = Fastify({ trustProxy: false })
    await plain.register(sluiceFastify, options({ trustProxy: ['loopback'] }))
    plain.get('/hello', async () => 'hello')
    const target = await listenFastify(plain)
    expect((await call(target, '/hello', forwarded('203.0.113.1'))).status).toBe(200)
    expect((await call(target, '/hello', forwarded('203.0.113.2'))).status).toBe(200)
  })
})

describe('fastify 5 register errors', () => {
  const bad: [string, unknown][] = [
    ['no limiter', { rules: [{ policy: 'perIp', key: 'ip' }] }],
    ['no options at all', undefined],
    ['{ http: undefined }', { http: undefined }],
    ['trustProxy: true (not a Sluice value)', { ...options(), trustProxy: true }],
    ['a rule naming an unknown policy', { ...options(), rules: [{ policy: 'nope', key: 'ip' }] }],
  ]
  for (const [what, value] of bad) {
    it(`${what}: a try/catch'd await app.register rejects with the SluiceError`, async () => {
      const app = Fastify()
      let caught: unknown
      try {
        await app.register(sluiceFastify, value as never)
      } catch (error) {
        caught = error
      }
      expect(caught).toBeInstanceOf(SluiceError)
      await app.close()
    })
  }

  it('app.ready() rejects when register was not awaited', async () => {
    const app = Fastify()
    app.register(sluiceFastify, { rules: [] } as never)
    await expect(app.ready()).rejects.toMatchObject({ code: 'SLUICE_INVALID_OPTIONS' })
    await app.close()
  })

  it('an Express middleware given to register rejects with the wrong-adapter error', async () => {
    const app = Fastify()
    let caught: unknown
    try {
      await app.register(sluiceExpress(options()) as never)
    } catch (error) {
      caught = error
    }
    expect(caught).toBeInstanceOf(SluiceError)
    expect(caught).toMatchObject({ code: 'SLUICE_WRONG_ADAPTER' })
    expect((caught as Error).message).toMatch(/sluice\/fastify/)
    await app.close()
  })

  it('calling the plugin like a middleware factory throws the wrong-adapter error at once', () => {
    expect(() => (sluiceFastify as unknown as (o: unknown) => unknown)(options())).toThrow(
      expect.objectContaining({ code: 'SLUICE_WRONG_ADAPTER' }),
    )
  })
})

describe('Hono middleware and Express middleware swapped', () => {
  it('Hono middleware mounted with Express app.use reaches the error handler as SLUICE_WRONG_ADAPTER', async () => {
    const app = express5()
    app.use(sluiceHono(options()) as never)
    app.get('/hello', (_req, res) => {
      res.send('hello')
    })
    app.use(errorHandler)
    const reply = await call(await listen(createServer(app)), '/hello')
    expect(reply.status).toBe(500)
    const body = JSON.parse(reply.body) as { code: string; message: string }
    expect(body.code).toBe('SLUICE_WRONG_ADAPTER')
    expect(body.message).toMatch(/sluice\/express/)
  })

  it("Express middleware mounted in Hono reaches Hono's onError as SLUICE_WRONG_ADAPTER", async () => {
    const app = new Hono()
    const seen: unknown[] = []
    app.onError((error, c) => {
      seen.push(error)
      return c.text('failed', 500)
    })
    app.use('*', sluiceExpress(options()) as never)
    app.get('/hello', (c) => c.text('hello'))
    expect((await app.fetch(new Request('http://localhost/hello'))).status).toBe(500)
    expect(seen[0]).toBeInstanceOf(SluiceError)
    expect(seen[0]).toMatchObject({ code: 'SLUICE_WRONG_ADAPTER' })
    expect((seen[0] as Error).message).toMatch(/sluice\/hono/)
  })
})

describe('hono 4 off @hono/node-server', () => {
  const request = (client?: string) =>
    new Request('http://localhost/hello', client === undefined ? {} : { headers: { 'x-client': client } })

  it('warns once per limiter, naming the remoteAddress option', async () => {
    const { logger, warnings } = capture()
    const app = new Hono()
    app.use('*', sluiceHono(options({ logger })))
    app.get('/hello', (c) => c.text('hello'))
    // No env.incoming: every client is `ip:unknown`, one shared budget.
    expect((await app.fetch(request())).status).toBe(200)
    expect((await app.fetch(request())).status).toBe(429)
    expect((await app.fetch(request())).status).toBe(429)
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toMatch(/remoteAddress: \(c\) =>/)
  })

  it('warns once for a core shared by two mounts, and once more for another core', async () => {
    const { logger, warnings } = capture()
    const shared = createHttpLimiter(options({ logger }))
    const app = new Hono()
    app.get('/a', sluiceHono(shared), (c) => c.text('a'))
    app.get('/b', sluiceHono(shared), (c) => c.text('b'))
    app.get('/c', sluiceHono(options({ logger })), (c) => c.text('c'))
    for (const path of ['/a', '/b', '/a', '/b']) await app.fetch(new Request(`http://localhost${path}`))
    expect(warnings).toHaveLength(1)
    await app.fetch(new Request('http://localhost/c'))
    expect(warnings).toHaveLength(2)
  })

  it('keys on remoteAddress(c) when given, with no warning', async () => {
    const { logger, warnings } = capture()
    const app = new Hono()
    app.use('*', sluiceHono(options({ logger }), { remoteAddress: (c) => c.req.header('x-client') }))
    app.get('/hello', (c) => c.text('hello'))
    expect((await app.fetch(request('203.0.113.1'))).status).toBe(200)
    expect((await app.fetch(request('203.0.113.2'))).status).toBe(200)
    expect((await app.fetch(request('203.0.113.1'))).status).toBe(429)
    expect(warnings).toEqual([])
  })
})
