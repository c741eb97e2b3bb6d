// HTTP overhead: autocannon (50 connections) against hello-world Fastify and Express servers, each in
// its own child process on 127.0.0.1: no limiter, Sluice (memory; Redis when a redis-server and the
// Redis store are available), @fastify/rate-limit and express-rate-limit (memory and Redis).
// Reports requests/s as a share of the no-limiter server and server CPU microseconds per request.
//
//   node --import tsx bench/cases/http.ts [--quick]      (the child role: `... http.ts serve <variant>`)
import { type ChildProcess, execFileSync, fork } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

export interface BenchRow {
  subject: string
  metric: string
  value: number
  unit: string
  ratio?: number
  note?: string
}

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const REDIS_STORE = join(ROOT, 'src/stores/redis/index.ts')
const FRAMEWORKS = ['fastify', 'express'] as const
type Framework = (typeof FRAMEWORKS)[number]
const LIMITERS = ['none', 'sluice-memory', 'sluice-redis', 'peer-memory', 'peer-redis'] as const
type LimiterVariant = (typeof LIMITERS)[number]
/** Never reached during a run: the limiters decide on every request but never refuse. */
const LIMIT = 1_000_000_000

// ---------------------------------------------------------------- child: one server
async function serve(framework: Framework, variant: LimiterVariant, redisPort: number): Promise<void> {
  const { Redis } = variant.endsWith('redis') ? await import('ioredis') : { Redis: undefined }
  const redis =
    Redis === undefined ? undefined : new Redis(redisPort, '127.0.0.1', { maxRetriesPerRequest: 1 })
  let sluiceCore: import('../../src/http/index.js').HttpLimiter | undefined
  if (variant.startsWith('sluice')) {
    const { createLimiter } = await import('../../src/limiter.js')
    const { createHttpLimiter } = await import('../../src/http/index.js')
    let store: import('../../src/store.js').Store | undefined
    if (variant === 'sluice-redis') {
      const mod = (await import(pathToFileURL(REDIS_STORE).href)) as {
        redisStore(client: unknown): import('../../src/store.js').Store
      }
      store = mod.redisStore(redis)
    }
    const limiter = createLimiter({
      ...(store === undefined ? {} : { store }),
      policies: { perIp: { algorithm: 'fixed-window', limit: LIMIT, window: '1m' } },
    })
    sluiceCore = createHttpLimiter({ limiter, rules: [{ policy: 'perIp', key: 'ip' }] })
  }
  let port: number
  if (framework === 'fastify') {
    const Fastify = (await import('fastify')).default
    const app = Fastify()
    if (sluiceCore !== undefined) {
      const { sluice } = await import('../../src/adapters/fastify.js')
      await app.register(sluice, { http: sluiceCore })
    } else if (variant.startsWith('peer')) {
      const rateLimit = (await import('@fastify/rate-limit')).default
      await app.register(rateLimit, { max: LIMIT, timeWindow: 60_000, ...(redis ? { redis } : {}) })
    }
    app.get('/', async () => ({ hello: 'world' }))
    await app.listen({ port: 0, host: '127.0.0.1' })
    const address = app.server.address()
    port = typeof address === 'object' && address !== null ? address.port : 0
  } else {
    const express = (await import('express')).default
    const app = express()
    const handlers: import('express').RequestHandler[] = []
    if (sluiceCore !== undefined) {
      const { sluice } = await import('../../src/adapters/express.js')
      handlers.push(sluice(sluiceCore) as unknown as import('express').RequestHandler)
    } else if (variant.startsWith('peer')) {
      const { rateLimit } = await import('express-rate-limit')
      let store: import('express-rate-limit').Store | undefined
      if (redis !== undefined) {
        const { RedisStore } = await import('rate-limit-redis')
        store = new RedisStore({
          sendCommand: (command: string, ...args: string[]) =>
            redis.call(command, ...args) as Promise<import('rate-limit-redis').RedisReply>,
        })
      }
      handlers.push(rateLimit({ windowMs: 60_000, limit: LIMIT, ...(store ? { store } : {}) }))
    }
    app.get('/', ...handlers, (_req, res) => {
      res.json({ hello: 'world' })
    })
    port = await new Promise<number>((resolve) => {
      const server = app.listen(0, '127.0.0.1', () => {
        const address = server.address()
        resolve(typeof address === 'object' && address !== null ? address.port : 0)
      })
    })
  }
  process.on('message', (message) => {
    if (message === 'cpu') process.send?.({ cpu: process.cpuUsage() })
  })
  process.send?.({ ready: port })
}

// ---------------------------------------------------------------- parent: load and measure
/** The part of autocannon's API used here (it ships no types). */
type Autocannon = (options: { url: string; connections: number; duration: number }) => Promise<{
  requests: { total: number }
  errors: number
  non2xx: number
}>
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon

interface Measured {
  requestsPerSecond: number
  cpuMicrosPerRequest: number
  errors: number
}

function waitFor<T>(
  child: ChildProcess,
  pick: (message: unknown) => T | undefined,
  timeoutMs = 15_000,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('child did not answer')), timeoutMs)
    const onMessage = (message: unknown) => {
      const value = pick(message)
      if (value === undefined) return
      clearTimeout(timer)
      child.off('message', onMessage)
      resolve(value)
    }
    child.on('message', onMessage)
    child.once('exit', (code) => reject(new Error(`server exited with ${code}`)))
  })
}

async function measure(
  framework: Framework,
  variant: LimiterVariant,
  redisPort: number,
  seconds: number,
): Promise<Measured> {
  const child = fork(fileURLToPath(import.meta.url), ['serve', framework, variant, String(redisPort)], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  })
  try {
    const port = await waitFor(child, (m) => (m as { ready?: number }).ready)
    const url = `http://127.0.0.1:${port}/`
    await autocannon({ url, connections: 50, duration: 1 }) // warm-up (JIT, connections)
    const cpuUsage = () => waitFor(child, (m) => (m as { cpu?: NodeJS.CpuUsage }).cpu, 5_000)
    const pending = cpuUsage()
    child.send('cpu')
    const before = await pending
    const result = await autocannon({ url, connections: 50, duration: seconds })
    const pendingAfter = cpuUsage()
    child.send('cpu')
    const after = await pendingAfter
    const cpuMicros = after.user - before.user + (after.system - before.system)
    const total = result.requests.total
    return {
      requestsPerSecond: total / seconds,
      cpuMicrosPerRequest: total > 0 ? cpuMicros / total : Number.NaN,
      errors: result.errors + result.non2xx,
    }
  } finally {
    child.kill('SIGTERM')
  }
}

async function freePort(): Promise<number> {
  // Below the ephemeral range (see ENV-NOTES), checked free by binding it.
  for (let attempt = 0; attempt < 20; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 9_000)
    const ok = await new Promise<boolean>((resolve) => {
      const probe = createServer()
      probe.once('error', () => resolve(false))
      probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)))
    })
    if (ok) return port
  }
  throw new Error('no free port for redis-server')
}

function hasRedisServer(): boolean {
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

async function startRedis(): Promise<{ port: number; stop(): void } | undefined> {
  if (!hasRedisServer()) return undefined
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-redis-'))
  execFileSync('redis-server', [
    ...[
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--daemonize',
      'yes',
    ],
    ...['--pidfile', join(dir, 'redis.pid'), '--logfile', join(dir, 'redis.log'), '--dir', dir],
  ])
  for (let i = 0; i < 50; i++) {
    try {
      execFileSync('redis-cli', ['-p', String(port), 'ping'], { stdio: 'ignore' })
      break
    } catch {
      await new Promise((r) => setTimeout(r, 100))
    }
  }
  return {
    port,
    stop() {
      try {
        execFileSync('redis-cli', ['-p', String(port), 'shutdown', 'nosave'], { stdio: 'ignore' })
      } catch {
        // Already gone.
      }
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

const PEER: Record<Framework, string> = { fastify: '@fastify/rate-limit', express: 'express-rate-limit' }

export const benchCase = {
  name: 'http',
  /**
   * Each variant runs `rounds` times, interleaved with the others so a burst of load elsewhere on
   * the machine hits every variant alike; the best round of each counts (highest req/s, least CPU).
   */
  async run({ quick }: { quick: boolean }): Promise<BenchRow[]> {
    const seconds = quick ? 2 : 5
    const rounds = quick ? 1 : 3
    const redis = await startRedis()
    const rows: BenchRow[] = []
    try {
      for (const framework of FRAMEWORKS) {
        const best = new Map<LimiterVariant, Measured>()
        const skipped = new Map<LimiterVariant, string>()
        for (const variant of LIMITERS) {
          if (variant.endsWith('redis') && redis === undefined)
            skipped.set(variant, 'no redis-server on PATH')
          else if (variant === 'sluice-redis' && !existsSync(REDIS_STORE))
            skipped.set(variant, 'Redis store not on this branch')
        }
        for (let round = 0; round < rounds; round++) {
          for (const variant of LIMITERS) {
            if (skipped.has(variant)) continue
            const m = await measure(framework, variant, redis?.port ?? 0, seconds)
            const previous = best.get(variant)
            best.set(variant, {
              requestsPerSecond: Math.max(m.requestsPerSecond, previous?.requestsPerSecond ?? 0),
              cpuMicrosPerRequest: Math.min(m.cpuMicrosPerRequest, previous?.cpuMicrosPerRequest ?? Infinity),
              errors: m.errors + (previous?.errors ?? 0),
            })
          }
        }
        const baseline = best.get('none')
        for (const variant of LIMITERS) {
          const subject = `${framework} + ${variant === 'none' ? 'no limiter' : variant.startsWith('peer') ? `${PEER[framework]} (${variant.slice(5)})` : `Sluice (${variant.slice(7)})`}`
          const m = best.get(variant)
          if (m === undefined) {
            const note = `skipped: ${skipped.get(variant) ?? 'not run'}`
            rows.push({ subject, metric: 'req/s', value: Number.NaN, unit: 'req/s', note })
            continue
          }
          const note = m.errors > 0 ? `${m.errors} errors or non-2xx` : undefined
          rows.push({
            subject,
            metric: 'req/s',
            value: Math.round(m.requestsPerSecond),
            unit: 'req/s',
            ...(baseline === undefined ? {} : { ratio: m.requestsPerSecond / baseline.requestsPerSecond }),
            ...(note === undefined ? {} : { note }),
          })
          rows.push({
            subject,
            metric: 'server CPU per request',
            value: Math.round(m.cpuMicrosPerRequest * 10) / 10,
            unit: 'µs',
            ...(baseline === undefined
              ? {}
              : { ratio: m.cpuMicrosPerRequest / baseline.cpuMicrosPerRequest }),
          })
        }
      }
    } finally {
      redis?.stop()
    }
    return rows
  },
}

const isMain = process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]
if (isMain && process.argv[2] === 'serve') {
  await serve(process.argv[3] as Framework, process.argv[4] as LimiterVariant, Number(process.argv[5]))
} else if (isMain) {
  const rows = await benchCase.run({ quick: process.argv.includes('--quick') })
  for (const r of rows) {
    const ratio = r.ratio === undefined ? '' : ` (${r.ratio.toFixed(2)}x no limiter)`
    console.log(
      `${r.subject.padEnd(44)} ${r.metric.padEnd(24)} ${String(r.value).padStart(8)} ${r.unit}${ratio}${r.note ? `  ${r.note}` : ''}`,
    )
  }
}
