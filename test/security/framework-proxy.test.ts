// Attack through a real nginx in front of Express 5 and Fastify 5 configured the way their users do
// (`app.set('trust proxy', '127.0.0.1')`, `Fastify({ trustProxy: '127.0.0.1' })`, no `trustProxy` in
// Sluice's options). Clients connect from their own loopback addresses (127.0.0.5, ...), nginx appends
// them to X-Forwarded-For. Each client must be keyed on its own address, never on nginx's 127.0.0.1
// (one client spending its budget would lock out everyone), and a client that forges X-Forwarded-For
// must stay in its own budget.
import { once } from 'node:events'
import { createServer, request, type Server } from 'node:http'
import express from 'express'
import Fastify, { type FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sluice as sluiceExpress } from '../../packages/sluice/src/adapters/express.js'
import { sluice as sluiceFastify } from '../../packages/sluice/src/adapters/fastify.js'
import type { HttpLimiterOptions } from '../../packages/sluice/src/http/index.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { type RunningNginx, startNginx } from '../helpers/nginx-harness.js'
import { freePort } from '../helpers/service.js'

/** Two requests per client per minute; every decision's key is recorded. */
function options(keys: string[]): HttpLimiterOptions {
  const limiter = createLimiter({
    policies: { perIp: { algorithm: 'sliding-window-log', limit: 2, window: '1m' } },
  })
  return {
    limiter,
    rules: [{ policy: 'perIp', key: 'ip' }],
    onDecision: (info) => keys.push(info.decision.key),
  }
}

let nginx: RunningNginx | undefined
let nginxPort = 0
let expressServer: Server | undefined
let fastify: FastifyInstance | undefined
const expressKeys: string[] = []
const fastifyKeys: string[] = []

/** One GET through nginx, from the client address `from` (any 127.0.0.0/8 address is on lo). */
function get(path: string, from: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port: nginxPort, path, localAddress: from, headers, agent: false },
      (res) => {
        res.resume()
        res.on('end', () => resolve(res.statusCode ?? 0))
      },
    )
    req.setTimeout(5000, () => req.destroy(new Error(`timeout on ${path}`)))
    req.on('error', reject)
    req.end()
  })
}

beforeAll(async () => {
  const app = express()
  app.set('trust proxy', '127.0.0.1') // nginx, and only nginx
  app.get('/express/hello', sluiceExpress(options(expressKeys)), (_req, res) => {
    res.send('hello')
  })
  expressServer = createServer(app).listen(0, '127.0.0.1')
  await once(expressServer, 'listening')
  const expressPort = (expressServer.address() as { port: number }).port

  fastify = Fastify({ trustProxy: '127.0.0.1' })
  await fastify.register(sluiceFastify, options(fastifyKeys))
  fastify.get('/fastify/hello', async () => 'hello')
  await fastify.listen({ port: 0, host: '127.0.0.1' })
  const fastifyPort = (fastify.server.address() as { port: number }).port

  nginxPort = await freePort()
  const location = (prefix: string, port: number) =>
    [
      `  location ${prefix} {`,
      `    proxy_pass http://127.0.0.1:${port};`,
      '    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;',
      '  }',
    ].join('\n')
  nginx = await startNginx(
    [
      'server {',
      `  listen 127.0.0.1:${nginxPort};`,
      location('/express/', expressPort),
      location('/fastify/', fastifyPort),
      '}',
      '',
    ].join('\n'),
    nginxPort,
  )
})

afterAll(async () => {
  await nginx?.stop()
  expressServer?.closeAllConnections()
  await new Promise((resolve) => expressServer?.close(resolve))
  await fastify?.close()
})

for (const [framework, keys] of [
  ['express', expressKeys],
  ['fastify', fastifyKeys],
] as const) {
  describe(`nginx in front of ${framework} with the framework's trust proxy`, () => {
    const path = `/${framework}/hello`

    it("a client that spends its budget does not spend its neighbour's", async () => {
      expect([
        await get(path, '127.0.0.5'),
        await get(path, '127.0.0.5'),
        await get(path, '127.0.0.5'),
      ]).toEqual([200, 200, 429])
      expect(await get(path, '127.0.0.6')).toBe(200)
      expect(keys.slice(-4)).toEqual(['ip:127.0.0.5', 'ip:127.0.0.5', 'ip:127.0.0.5', 'ip:127.0.0.6'])
    })

    it('a client forging X-Forwarded-For stays in its own budget and cannot spend a victim’s', async () => {
      const forged = (address: string) => ({ 'x-forwarded-for': address })
      const statuses = []
      // A new forged address on every request, then the victim's own address.
      for (const address of ['198.51.100.1', '198.51.100.2', '198.51.100.3', '127.0.0.8', '127.0.0.8'])
        statuses.push(await get(path, '127.0.0.7', forged(address)))
      expect(statuses).toEqual([200, 200, 429, 429, 429])
      expect(new Set(keys.slice(-5))).toEqual(new Set(['ip:127.0.0.7']))
      expect(await get(path, '127.0.0.8')).toBe(200)
    })
  })
}
