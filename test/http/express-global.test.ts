// Express with app.use: the middleware runs before routing, so every request counts as route `*`
// (bounded keys, never the raw URL). Shadow mode also covers the deny list.
import { createServer } from 'node:http'
import express from 'express'
import { afterEach, expect, it } from 'vitest'
import { sluice } from '../../packages/sluice/src/adapters/express.js'
import { createHttpLimiter } from '../../packages/sluice/src/http/index.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { call } from './servers.js'

let close: (() => void) | undefined
afterEach(() => close?.())

async function serve(options: Partial<Parameters<typeof createHttpLimiter>[0]>) {
  const limiter = createLimiter({
    policies: { perRoute: { algorithm: 'sliding-window-log', limit: 5, window: '1m' } },
  })
  const app = express()
  app.use(sluice(createHttpLimiter({ limiter, rules: [{ policy: 'perRoute', key: 'route' }], ...options })))
  app.get('/users/:id', (_req, res) => {
    res.send('ok')
  })
  const server = createServer(app).listen(0, '127.0.0.1')
  await new Promise((resolve) => server.once('listening', resolve))
  close = () => server.close()
  const address = server.address()
  return { port: typeof address === 'object' && address !== null ? address.port : 0 }
}

it('keys app.use middleware as route * per method', async () => {
  const target = await serve({})
  expect((await call(target, '/users/1')).headers['x-ratelimit-remaining']).toBe('4')
  expect((await call(target, '/users/2')).headers['x-ratelimit-remaining']).toBe('3')
  expect((await call(target, '/anything/else')).headers['x-ratelimit-remaining']).toBe('2')
  expect((await call(target, '/users/1', { method: 'POST' })).headers['x-ratelimit-remaining']).toBe('4')
})

it('lets denied clients through in shadow mode, logging them', async () => {
  const warnings: string[] = []
  const target = await serve({
    shadow: true,
    deny: { ips: ['127.0.0.0/8'] },
    logger: { warn: (_d, m) => warnings.push(m), error: () => {} },
  })
  expect((await call(target, '/users/1')).status).toBe(200)
  expect(warnings).toEqual(['sluice: shadow mode would refuse a denied client'])
})
