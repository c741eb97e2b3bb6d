// Promises per request that the HTTP side (adapter and core) adds when the decision waits for Redis:
// a real server over real sockets (the built package, `redisStore` on ioredis, one `ip` layer),
// counted with an async_hooks promise hook. The same server without the limiter and a bare
// `limiter.decide` on the same store are counted too, so what the framework and the store make cancels:
//   http side = (server with Sluice) - (server without a limiter) - (one limiter.decide)
//   node bench/budgets/adapter-promises.mjs <fastify|express> <dist dir> <redis port>
// Prints one JSON line: { httpSide, withSluice, withoutLimiter, decide }.
import { createHook } from 'node:async_hooks'
import { Agent, request as httpRequest } from 'node:http'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { Redis } from 'ioredis'

const [framework, distDir, redisPort] = process.argv.slice(2)
const dist = pathToFileURL(`${resolve(distDir)}/`).href
const { createLimiter, createHttpLimiter } = await import(new URL('index.js', dist).href)
const { redisStore } = await import(new URL('redis.js', dist).href)
const redis = new Redis(Number(redisPort), '127.0.0.1')
const limiter = createLimiter({
  store: redisStore(redis),
  policies: { perIp: { algorithm: 'fixed-window', limit: 1_000_000_000, window: '1m' } },
})
const http = createHttpLimiter({ limiter, rules: [{ policy: 'perIp', key: 'ip' }] })

async function serve(withSluice) {
  if (framework === 'fastify') {
    const Fastify = (await import('fastify')).default
    const app = Fastify()
    if (withSluice) await app.register((await import(new URL('fastify.js', dist).href)).sluice, { http })
    app.get('/items/:id', async () => ({ hello: 'world' }))
    await app.listen({ port: 0, host: '127.0.0.1' })
    return app.server
  }
  const express = (await import('express')).default
  const app = express()
  const handlers = withSluice ? [(await import(new URL('express.js', dist).href)).sluice(http)] : []
  app.get('/items/:id', ...handlers, (_req, res) => res.json({ hello: 'world' }))
  return await new Promise((done) => {
    const s = app.listen(0, '127.0.0.1', () => done(s))
  })
}

let promises = 0
const hook = createHook({
  init(_id, type) {
    if (type === 'PROMISE') promises++
  },
})

// One request at a time through a callback client: the client itself makes no promise.
function requests(port, n, done) {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  let left = n
  const next = () => {
    if (left-- === 0) {
      agent.destroy()
      return done()
    }
    httpRequest({ host: '127.0.0.1', port, path: '/items/1', agent }, (res) => {
      if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`)
      res.resume()
      res.on('end', next)
    }).end()
  }
  next()
}
const count = (port, n) =>
  new Promise((done) => {
    requests(port, 200, () => {
      promises = 0
      hook.enable()
      requests(port, n, () => {
        hook.disable()
        done(promises / n)
      })
    })
  })

const n = 2_000
const servers = { withSluice: await serve(true), withoutLimiter: await serve(false) }
const withSluice = await count(servers.withSluice.address().port, n)
const withoutLimiter = await count(servers.withoutLimiter.address().port, n)
// Decisions one after another, each continued by one `.then` (whose own promise is taken off).
const decisions = (calls) =>
  new Promise((done) => {
    let left = calls
    const step = () => (left-- === 0 ? done() : limiter.decide('perIp', 'ip:127.0.0.1').then(step))
    step()
  })
await decisions(200)
promises = 0
hook.enable()
await decisions(n)
hook.disable()
const decide = promises / n - 1
for (const s of Object.values(servers)) s.close()
redis.disconnect()
const httpSide = Math.round((withSluice - withoutLimiter - decide) * 100) / 100
console.log(JSON.stringify({ httpSide, withSluice, withoutLimiter, decide }))
process.exit(0)
