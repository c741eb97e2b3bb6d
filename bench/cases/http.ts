// HTTP overhead: autocannon (50 connections) against hello-world Fastify and Express servers, each in
// its own child process on 127.0.0.1: no limiter, Sluice (memory; Redis when a redis-server and the
// Redis store are available), @fastify/rate-limit and express-rate-limit (memory and Redis).
// Reports requests/s as a share of the no-limiter server and server CPU microseconds per request.
//
//   npm run build && node --import tsx bench/cases/http.ts [--quick]   (servers: bench/cases/http-server.mjs)
import { type ChildProcess, execFileSync, fork } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startRedis } from '../../test/helpers/redis-harness.js'
import type { BenchRow } from '../types.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const SERVER = fileURLToPath(new URL('./http-server.mjs', import.meta.url))
/** The servers run the built package: `npm run bench` builds first. */
const REDIS_STORE = join(ROOT, 'dist/redis.js')
const FRAMEWORKS = ['fastify', 'express'] as const
type Framework = (typeof FRAMEWORKS)[number]
const LIMITERS = ['none', 'sluice-memory', 'sluice-redis', 'peer-memory', 'peer-redis'] as const
type LimiterVariant = (typeof LIMITERS)[number]

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
  const child = fork(SERVER, [framework, variant, String(redisPort)], {
    execArgv: [],
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

function hasRedisServer(): boolean {
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

/**
 * The core's own cost, in process (no sockets, no framework): check() of one request against one
 * memory layer, next to the bare limiter call it wraps. Best of three runs.
 */
async function coreCost(quick: boolean): Promise<BenchRow[]> {
  const { createLimiter } = await import('../../src/limiter.js')
  const { createHttpLimiter } = await import('../../src/http/index.js')
  const limiter = createLimiter({
    policies: { perIp: { algorithm: 'fixed-window', limit: 2 ** 40, window: '1s' } },
  })
  const http = createHttpLimiter({ limiter, rules: [{ policy: 'perIp', key: 'ip' }] })
  const request = {
    method: 'GET',
    route: '/',
    path: '/',
    remoteAddress: '127.0.0.1',
    header: () => undefined,
    raw: undefined,
  }
  const n = quick ? 50_000 : 300_000
  const time = (fn: () => unknown): number => {
    let best = Number.POSITIVE_INFINITY
    for (let round = 0; round < 3; round++) {
      const started = performance.now()
      for (let i = 0; i < n; i++) fn()
      best = Math.min(best, ((performance.now() - started) * 1000) / n)
    }
    return best
  }
  const bare = time(() => limiter.consumeSync('perIp', 'ip:127.0.0.1'))
  const check = time(() => http.check(request))
  return [
    { subject: 'limiter.consumeSync (memory, 1 policy)', metric: 'time per call', value: bare, unit: 'µs' },
    {
      subject: 'HTTP core check() (memory, 1 layer, headers both)',
      metric: 'time per call',
      value: check,
      unit: 'µs',
      ratio: check / bare,
      note: 'ratio: vs consumeSync',
    },
  ]
}

const PEER: Record<Framework, string> = { fastify: '@fastify/rate-limit', express: 'express-rate-limit' }

export const benchCase = {
  name: 'http',
  /**
   * Each variant runs `rounds` times, interleaved with the others so a burst of load elsewhere on
   * the machine hits every variant alike; the best round of each counts (highest req/s, least CPU).
   */
  async run({ quick }: { quick: boolean }): Promise<BenchRow[]> {
    const seconds = quick ? 1 : 5
    const rounds = quick ? 1 : 3
    const rows: BenchRow[] = await coreCost(quick)
    const redis = hasRedisServer() ? await startRedis() : undefined
    try {
      for (const framework of FRAMEWORKS) {
        const best = new Map<LimiterVariant, Measured>()
        const skipped = new Map<LimiterVariant, string>()
        for (const variant of LIMITERS) {
          if (variant.endsWith('redis') && redis === undefined)
            skipped.set(variant, 'no redis-server on PATH')
          else if (variant === 'sluice-redis' && !existsSync(REDIS_STORE))
            skipped.set(variant, 'no dist/redis.js (the Redis store is not built on this branch)')
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
      await redis?.stop()
    }
    return rows
  },
}

const isMain = process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]
if (isMain) {
  const rows = await benchCase.run({ quick: process.argv.includes('--quick') })
  for (const r of rows) {
    const ratio = r.ratio === undefined ? '' : ` (${r.ratio.toFixed(2)}x)`
    console.log(
      `${r.subject.padEnd(44)} ${r.metric.padEnd(24)} ${String(r.value).padStart(8)} ${r.unit}${ratio}${r.note ? `  ${r.note}` : ''}`,
    )
  }
}
