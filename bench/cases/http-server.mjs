// The server side of bench/cases/http.ts: one hello-world server per process, plain JavaScript over
// the built package (dist/), so the measured process runs what users run (no TypeScript loader).
// Every limiter at its own defaults, with a limit no run reaches (each request does the full work).
//   node bench/cases/http-server.mjs <fastify|express> <variant> <redisPort>
// Messages from the parent (IPC): 'cpu' -> { cpu: process.cpuUsage() }; 'stop' -> exit 0 (so a
// `node --cpu-prof` run writes its profile).
const [framework, requested, redisPortText] = process.argv.slice(2)
const redisPort = Number(redisPortText)
// `<variant>-baseline`: the same server over another build (SLUICE_BENCH_BASELINE_DIST), so a change
// is measured before and after in one run.
const baseline = requested.endsWith('-baseline')
const variant = baseline ? requested.slice(0, -'-baseline'.length) : requested
const dist = baseline
  ? new URL(`file://${process.env.SLUICE_BENCH_BASELINE_DIST.replace(/\/?$/, '/')}`)
  : new URL('../../packages/sluice/dist/', import.meta.url)
const LIMIT = 1_000_000_000
const WINDOW_MS = 60_000

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
  // `sluice-memory-legacy`: only the three X-RateLimit-* headers, the peers' header set, so the
  // cost of Sluice's default headers (both families) shows as the difference between the two.
  const headers = variant === 'sluice-memory-legacy' ? { headers: 'legacy' } : {}
  sluiceCore = createHttpLimiter({ limiter, rules: [{ policy: 'perIp', key: 'ip' }], ...headers })
}

/** rate-limiter-flexible's Express middleware as its README writes it (it ships none of its own). */
async function rateLimiterFlexibleMiddleware() {
  const { RateLimiterRedis } = await import('rate-limiter-flexible')
  const rateLimiter = new RateLimiterRedis({
    storeClient: redis,
    keyPrefix: 'middleware',
    points: LIMIT,
    duration: WINDOW_MS / 1000,
  })
  return (req, res, next) => {
    rateLimiter
      .consume(req.ip)
      .then(() => next())
      .catch(() => res.status(429).send('Too Many Requests'))
  }
}

/** Sluice's default header lines as this server's Sluice variant writes them (values of the same length). */
const SLUICE_DEFAULT_LINES = [
  ['ratelimit', '"perIp";r=999999999;t=60'],
  ['ratelimit-policy', '"perIp";q=1000000000;w=60'],
  ['x-ratelimit-limit', '1000000000'],
  ['x-ratelimit-remaining', '999999999'],
  ['x-ratelimit-reset', '1796329345'],
]

let server
if (framework === 'fastify') {
  const Fastify = (await import('fastify')).default
  const app = Fastify()
  if (sluiceCore !== undefined) {
    const { sluice } = await import(new URL('fastify.js', dist).href)
    await app.register(sluice, { http: sluiceCore })
  } else if (variant.startsWith('fastify-rate-limit')) {
    const rateLimit = (await import('@fastify/rate-limit')).default
    await app.register(rateLimit, { max: LIMIT, timeWindow: WINDOW_MS, ...(redis ? { redis } : {}) })
  } else if (variant.startsWith('header-lines-')) {
    // No limiter: a callback hook writing fixed header lines, the default's five or the peer's
    // three, so what the lines cost Fastify and node:http shows apart from any limiter's work.
    const lines = variant === 'header-lines-5' ? SLUICE_DEFAULT_LINES : SLUICE_DEFAULT_LINES.slice(2)
    app.addHook('onRequest', (_request, reply, next) => {
      for (const [name, value] of lines) reply.header(name, value)
      next()
    })
  } else if (variant !== 'none') throw new Error(`no variant ${variant} for fastify`)
  app.get('/', async () => ({ hello: 'world' }))
  await app.listen({ port: 0, host: '127.0.0.1' })
  server = app.server
} else if (framework === 'express') {
  const express = (await import('express')).default
  const app = express()
  const handlers = []
  if (sluiceCore !== undefined) {
    const { sluice } = await import(new URL('express.js', dist).href)
    handlers.push(sluice(sluiceCore))
  } else if (variant.startsWith('express-rate-limit')) {
    const { rateLimit } = await import('express-rate-limit')
    let store
    if (redis !== undefined) {
      const { RedisStore } = await import('rate-limit-redis')
      store = new RedisStore({ sendCommand: (command, ...args) => redis.call(command, ...args) })
    }
    handlers.push(rateLimit({ windowMs: WINDOW_MS, limit: LIMIT, ...(store ? { store } : {}) }))
  } else if (variant === 'rate-limiter-flexible-redis') {
    handlers.push(await rateLimiterFlexibleMiddleware())
  } else if (variant !== 'none') throw new Error(`no variant ${variant} for express`)
  app.get('/', ...handlers, (_req, res) => {
    res.json({ hello: 'world' })
  })
  server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s))
  })
} else throw new Error(`no framework ${framework}`)

process.on('message', (message) => {
  if (message === 'cpu') process.send({ cpu: process.cpuUsage() })
  else if (message === 'stop') {
    server.closeAllConnections?.()
    server.close()
    redis?.disconnect()
    process.exit(0)
  }
})
process.send({ ready: server.address().port })
