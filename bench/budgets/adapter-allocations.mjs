// Heap bytes per request that an adapter's own code allocates on a real server over real sockets
// (the built package, memory store, one `ip` layer, headers both): V8's sampling heap profiler,
// counting what is allocated inside the adapter's hook or middleware and what it calls (the
// framework's getters and header setters included), but not inside the core's `check()` (that is
// bench/budgets/http-core.mjs) nor the framework's continuation (`next`) after the limiter.
//   node --no-turbo-inlining bench/budgets/adapter-allocations.mjs <fastify|express> [dist dir]
// Run it with --no-turbo-inlining, so every frame shows (inlined hooks would hide their allocations).
// Prints one JSON line: { bytes, requests, headers, byFunction }.
import { Agent, request as httpRequest } from 'node:http'
import { Session } from 'node:inspector/promises'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'

const [framework, distDir = 'packages/sluice/dist'] = process.argv.slice(2)
const dist = pathToFileURL(`${resolve(distDir)}/`).href
const { createLimiter, createHttpLimiter } = await import(new URL('index.js', dist).href)
const limiter = createLimiter({
  policies: { perIp: { algorithm: 'fixed-window', limit: 1_000_000_000, window: '1m' } },
})
const http = createHttpLimiter({ limiter, rules: [{ policy: 'perIp', key: 'ip' }] })

let server
if (framework === 'fastify') {
  const Fastify = (await import('fastify')).default
  const { sluice } = await import(new URL('fastify.js', dist).href)
  const app = Fastify()
  await app.register(sluice, { http })
  app.get('/items/:id', async () => ({ hello: 'world' }))
  await app.listen({ port: 0, host: '127.0.0.1' })
  server = app.server
} else {
  const express = (await import('express')).default
  const { sluice } = await import(new URL('express.js', dist).href)
  const app = express()
  app.get('/items/:id', sluice(http), (_req, res) => res.json({ hello: 'world' }))
  server = await new Promise((done) => {
    const s = app.listen(0, '127.0.0.1', () => done(s))
  })
}
const { port } = server.address()
const agent = new Agent({ keepAlive: true, maxSockets: 8 })
let lastHeaders
function get() {
  return new Promise((done, fail) => {
    httpRequest({ host: '127.0.0.1', port, path: '/items/1', agent }, (res) => {
      lastHeaders = res.headers
      res.resume()
      res.on('end', done)
    })
      .on('error', fail)
      .end()
  })
}
async function run(n) {
  let left = n
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (left-- > 0) await get()
    }),
  )
}
await run(2_000)

const session = new Session()
session.connect()
await session.post('HeapProfiler.startSampling', {
  samplingInterval: 64,
  includeObjectsCollectedByMinorGC: true,
  includeObjectsCollectedByMajorGC: true,
})
const requests = 3_000
await run(requests)
const { profile } = await session.post('HeapProfiler.stopSampling')

const adapterFile = `${framework}.js`
const isAdapter = (f) => f.url.startsWith(dist) && f.url.endsWith(`/${adapterFile}`)
// The core's entry points: `check`, and `deliver` (its delivery, what the adapters call).
const isCore = (f) => f.url.startsWith(dist) && /^(check|deliver)\d*$/.test(f.functionName)
// The framework going on after the limiter said "continue": Fastify's hook runner, Express's router.
const isContinuation = (f) => f.functionName === 'next' && !f.url.startsWith(dist)
let bytes = 0
const byFunction = {}
function walk(node, inside) {
  const f = node.callFrame
  // Leaving the adapter for the core or the continuation stops the count; the adapter's own frames
  // start it again wherever they run (its outcome sink runs inside the core's continuation).
  const here = isAdapter(f) || (inside && !isCore(f) && !isContinuation(f))
  if (here && node.selfSize > 0) {
    bytes += node.selfSize
    const name = `${f.functionName || '(anonymous)'} ${f.url.replace(/.*\//, '')}`
    byFunction[name] = Math.round((byFunction[name] ?? 0) + node.selfSize / requests)
  }
  for (const child of node.children) walk(child, here)
}
walk(profile.head, false)
agent.destroy()
server.close()
const names = Object.keys(lastHeaders).filter((n) => n.includes('ratelimit'))
console.log(JSON.stringify({ bytes: Math.round(bytes / requests), requests, headers: names, byFunction }))
process.exit(0)
