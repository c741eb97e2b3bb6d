// The server side of bench/cases/http.ts: one hello-world server per process, plain JavaScript over
// the built package (dist/), so the measured process runs what users run (no TypeScript loader).
//   node bench/cases/http-server.mjs <fastify|express> <variant> <redisPort>
const [framework, variant, redisPortText] = process.argv.slice(2)
const redisPort = Number(redisPortText)
const dist = new URL('../../dist/', import.meta.url)
const LIMIT = 1_000_000_000

let redis
if (variant.endsWith('redis')) {
  const { Redis } = await import('ioredis')
  redis = new Redis(redisPort, '127.0.0.1', { maxRetriesPerRequest: 1 })
}

let sluiceCore
if (variant.startsWith('sluice')) {
  const { createLimiter, createHttpLimiter } = await import(new URL('index.js', dist).href)
  let store
  if (variant === 'sluice-redis') store = (await import(new URL('redis.js', dist).href)).redisStore(redis)
  const limiter = createLimiter({
    ...(store === undefined ? {} : { store }),
    policies: { perIp: { algorithm: 'fixed-window', limit: LIMIT, window: '1m' } },
  })
  sluiceCore = createHttpLimiter({ limiter, rules: [{ policy: 'perIp', key: 'ip' }] })
}

let port
if (framework === 'fastify') {
  const Fastify = (await import('fastify')).default
  const app = Fastify()
  if (sluiceCore !== undefined) {
    const { sluice } = await import(new URL('fastify.js', dist).href)
    await app.register(sluice, { http: sluiceCore })
  } else if (variant.startsWith('peer')) {
    const rateLimit = (await import('@fastify/rate-limit')).default
    await app.register(rateLimit, { max: LIMIT, timeWindow: 60_000, ...(redis ? { redis } : {}) })
  }
  app.get('/', async () => ({ hello: 'world' }))
  await app.listen({ port: 0, host: '127.0.0.1' })
  port = app.server.address().port
} else {
  const express = (await import('express')).default
  const app = express()
  const handlers = []
  if (sluiceCore !== undefined) {
    const { sluice } = await import(new URL('express.js', dist).href)
    handlers.push(sluice(sluiceCore))
  } else if (variant.startsWith('peer')) {
    const { rateLimit } = await import('express-rate-limit')
    let store
    if (redis !== undefined) {
      const { RedisStore } = await import('rate-limit-redis')
      store = new RedisStore({ sendCommand: (command, ...args) => redis.call(command, ...args) })
    }
    handlers.push(rateLimit({ windowMs: 60_000, limit: LIMIT, ...(store ? { store } : {}) }))
  }
  app.get('/', ...handlers, (_req, res) => {
    res.json({ hello: 'world' })
  })
  port = await new Promise((resolve) => {
    const server = app.listen(0, '127.0.0.1', () => resolve(server.address().port))
  })
}

process.on('message', (message) => {
  if (message === 'cpu') process.send({ cpu: process.cpuUsage() })
})
process.send({ ready: port })
