// HTTP overhead: autocannon (50 connections) against hello-world Fastify and Express servers, each
// server in its own child process on 127.0.0.1 (bench/cases/http-server.mjs, over dist/): no limiter,
// Sluice (memory and Redis) and the peers at their own defaults (@fastify/rate-limit memory and
// ioredis; express-rate-limit memory and rate-limit-redis; rate-limiter-flexible's RateLimiterRedis
// middleware). Reports server CPU per request (the server process's cpuUsage() before and after the
// load / requests), the CPU added over the no-limiter server, and req/s as a share of it.
//
// Rounds alternate the servers (the order rotates each round) so a burst of load elsewhere on the
// machine hits all of them alike, and every figure is the median over rounds of the per-round value
// (ratios and differences are taken within a round, against the no-limiter server of that round).
// Each measurement is a server process of its own, started, warmed up, measured and stopped, so it
// is the only server alive: on the 2-core VM a server first loaded while four others that had been
// loaded were still running used about a quarter more CPU per request (a third more user CPU) for
// the rest of its life, whatever its code (eight identical Sluice servers: 13.2-13.7 µs for the first
// four loaded, 16.6-16.7 for the others), which would make a variant's figure depend on its place in
// the list.
//
//   npm run bench -- --only http-fastify [--quick] [--profile DIR] [--variants sluice-memory,...]
//   (or http-express; http-core)
// With SLUICE_BENCH_BASELINE_DIST=<a copy of dist/ from another commit>, the Sluice servers also run
// over that build (variants `sluice-memory-baseline`, `sluice-redis-baseline`): before/after in one run.
import { type ChildProcess, fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { startRedis } from '../../test/helpers/redis-harness.js'
import { load, median } from '../load.js'
import type { BenchCase, BenchOptions, BenchRow } from '../types.js'

const SERVER = fileURLToPath(new URL('./http-server.mjs', import.meta.url))
export const CONNECTIONS = 50

export type Framework = 'fastify' | 'express'
/** The variants of http-server.mjs per framework, the no-limiter baseline first. */
export const BASE_VARIANTS: Record<Framework, { variant: string; subject: string }[]> = {
  fastify: [
    { variant: 'none', subject: 'fastify, no limiter' },
    { variant: 'sluice-memory', subject: 'fastify + Sluice (memory)' },
    {
      variant: 'sluice-memory-legacy',
      subject: "fastify + Sluice (memory), the peer's header set (X-RateLimit-* only)",
    },
    { variant: 'fastify-rate-limit-memory', subject: 'fastify + @fastify/rate-limit (memory)' },
    {
      variant: 'header-lines-5',
      subject: "fastify, no limiter: a hook writing Sluice's five default header lines",
    },
    {
      variant: 'header-lines-3',
      subject: 'fastify, no limiter: a hook writing the three X-RateLimit-* lines',
    },
    { variant: 'sluice-redis', subject: 'fastify + Sluice (Redis, ioredis)' },
    { variant: 'fastify-rate-limit-redis', subject: 'fastify + @fastify/rate-limit (ioredis)' },
  ],
  express: [
    { variant: 'none', subject: 'express, no limiter' },
    { variant: 'sluice-memory', subject: 'express + Sluice (memory)' },
    { variant: 'express-rate-limit-memory', subject: 'express + express-rate-limit (memory)' },
    { variant: 'sluice-redis', subject: 'express + Sluice (Redis, ioredis)' },
    {
      variant: 'rate-limiter-flexible-redis',
      subject: 'express + rate-limiter-flexible middleware (RateLimiterRedis)',
    },
    { variant: 'express-rate-limit-redis', subject: 'express + express-rate-limit + rate-limit-redis' },
  ],
}

const baselineDist = process.env.SLUICE_BENCH_BASELINE_DIST
const VARIANTS: Record<Framework, { variant: string; subject: string }[]> =
  baselineDist === undefined
    ? BASE_VARIANTS
    : {
        fastify: withBaselines(BASE_VARIANTS.fastify),
        express: withBaselines(BASE_VARIANTS.express),
      }

function withBaselines(
  variants: { variant: string; subject: string }[],
): { variant: string; subject: string }[] {
  return variants.flatMap((v) =>
    v.variant.startsWith('sluice-')
      ? [v, { variant: `${v.variant}-baseline`, subject: `${v.subject}, baseline build` }]
      : [v],
  )
}

function waitFor<T>(
  child: ChildProcess,
  pick: (message: unknown) => T | undefined,
  timeoutMs = 15_000,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => {
      clearTimeout(timer)
      reject(new Error(`server exited with ${code}`))
    }
    const timer = setTimeout(() => {
      child.off('message', onMessage)
      child.off('exit', onExit)
      reject(new Error('server did not answer'))
    }, timeoutMs)
    const onMessage = (message: unknown) => {
      const value = pick(message)
      if (value === undefined) return
      clearTimeout(timer)
      child.off('message', onMessage)
      child.off('exit', onExit)
      resolve(value)
    }
    child.on('message', onMessage)
    child.once('exit', onExit)
  })
}

export interface Server {
  variant: string
  subject: string
  child: ChildProcess
  url: string
}

/** Starts a server of http-server.mjs; `execArgv` goes to its node (`cpuProfile`, `--perf-basic-prof`). */
export async function startServer(
  framework: Framework,
  variant: string,
  subject: string,
  redisPort: number,
  execArgv: readonly string[] = [],
): Promise<Server> {
  const child = fork(SERVER, [framework, variant, String(redisPort)], {
    execArgv: [...execArgv],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  })
  const port = await waitFor(child, (m) => (m as { ready?: number }).ready)
  return { variant, subject, child, url: `http://127.0.0.1:${port}/` }
}

/** Node's options for a server that writes its `--cpu-prof` profile into `profileDir` as it exits. */
function cpuProfile(
  profileDir: string | undefined,
  framework: Framework,
  variant: string,
  round: number,
): string[] {
  if (profileDir === undefined) return []
  const name = `${framework}-${variant}-${round + 1}.cpuprofile`
  return ['--cpu-prof', '--cpu-prof-dir', profileDir, '--cpu-prof-name', name]
}

export async function stopServer(server: Server): Promise<void> {
  const { child } = server
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise((resolve) => child.once('exit', resolve))
  child.send('stop') // a clean exit writes a --cpu-prof profile
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000)
  await exited
  clearTimeout(timer)
}

export async function cpuMicros(child: ChildProcess): Promise<number> {
  const pending = waitFor(child, (m) => (m as { cpu?: NodeJS.CpuUsage }).cpu, 5_000)
  child.send('cpu')
  const cpu = await pending
  return cpu.user + cpu.system
}

export interface Round {
  requests: number
  requestsPerSecond: number
  cpuMicrosPerRequest: number
  errors: number
}

/** One load run against one server: its own CPU time over the run / requests answered. */
export async function measure(server: Server, seconds: number): Promise<Round> {
  const before = await cpuMicros(server.child)
  const result = await load({ url: server.url, connections: CONNECTIONS, duration: seconds })
  const after = await cpuMicros(server.child)
  return {
    requests: result.requests,
    requestsPerSecond: result.requestsPerSecond,
    cpuMicrosPerRequest: result.requests > 0 ? (after - before) / result.requests : Number.NaN,
    errors: result.errors,
  }
}

const round1 = (n: number) => Math.round(n * 10) / 10

async function runFramework(framework: Framework, opts: BenchOptions): Promise<BenchRow[]> {
  const seconds = opts.quick ? 1 : 3
  const rounds = opts.quick ? 3 : 5
  const warmUpSeconds = opts.quick ? 1 : 2
  const redis = await startRedis()
  let server: Server | undefined
  try {
    const wanted = VARIANTS[framework].filter(
      (v) => v.variant === 'none' || opts.variants === undefined || opts.variants.includes(v.variant),
    )
    const unknown = (opts.variants ?? []).filter(
      (v) =>
        !Object.values(VARIANTS)
          .flat()
          .some((w) => w.variant === v),
    )
    if (unknown.length > 0) throw new Error(`no HTTP variant ${unknown.join(', ')}`)
    const perRound = new Map<string, Round[]>(wanted.map((w) => [w.variant, []]))
    for (let round = 0; round < rounds; round++) {
      const order = wanted.map((_, i) => wanted[(i + round) % wanted.length]!)
      for (const { variant, subject } of order) {
        server = await startServer(
          framework,
          variant,
          subject,
          redis.port,
          cpuProfile(opts.profileDir, framework, variant, round),
        )
        // JIT, connection pools, the Redis scripts loaded: nothing of it in the measured round.
        await load({ url: server.url, connections: CONNECTIONS, duration: warmUpSeconds })
        perRound.get(variant)!.push(await measure(server, seconds))
        await stopServer(server)
        server = undefined
      }
    }
    const baseline = perRound.get(wanted[0]!.variant)!
    const rows: BenchRow[] = []
    const how = `${CONNECTIONS} connections, median of ${rounds} rounds x ${seconds} s`
    for (const { variant, subject } of wanted) {
      const runs = perRound.get(variant)!
      const id = `http-${framework}/${variant}`
      const errors = runs.reduce((sum, r) => sum + r.errors, 0)
      const ratio = median(runs.map((r, i) => r.requestsPerSecond / baseline[i]!.requestsPerSecond))
      const cpu = median(runs.map((r) => r.cpuMicrosPerRequest))
      const added = median(runs.map((r, i) => r.cpuMicrosPerRequest - baseline[i]!.cpuMicrosPerRequest))
      const spread = `rounds ${round1(Math.min(...runs.map((r) => r.cpuMicrosPerRequest)))}-${round1(Math.max(...runs.map((r) => r.cpuMicrosPerRequest)))} µs`
      rows.push({
        id: `${id} req/s`,
        subject,
        metric: 'req/s',
        value: Math.round(median(runs.map((r) => r.requestsPerSecond))),
        unit: 'req/s',
        ratio,
        note: `ratio vs no limiter; ${how}${errors > 0 ? `; ${errors} errors or non-2xx` : ''}`,
      })
      rows.push({
        id: `${id} cpu`,
        subject,
        metric: 'server CPU per request',
        value: round1(cpu),
        unit: 'µs',
        note: spread,
      })
      if (variant !== wanted[0]!.variant)
        rows.push({
          id: `${id} cpu-added`,
          subject,
          metric: 'server CPU added per request',
          value: round1(added),
          unit: 'µs',
          note: 'over no limiter, same round',
        })
      if (errors > 0) rows.push({ id: `${id} errors`, subject, metric: 'errors', value: errors, unit: '' })
    }
    return rows
  } finally {
    if (server !== undefined) await stopServer(server)
    await redis.stop()
  }
}

/**
 * The core's own cost, in process (no sockets, no framework): check() of one request against one
 * memory layer, next to the bare limiter call it wraps. Best of three runs. From src/ under tsx (its
 * keepNames makes Sluice look about 1 µs slower than the build; see docs/benchmark-cases.md, "Extra cases").
 */
async function coreCost(quick: boolean): Promise<BenchRow[]> {
  const { createLimiter } = await import('../../packages/sluice/src/limiter.js')
  const { createHttpLimiter } = await import('../../packages/sluice/src/http/index.js')
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

export const benchCases: BenchCase[] = [
  { name: 'http-fastify', run: (opts) => runFramework('fastify', opts) },
  { name: 'http-express', run: (opts) => runFramework('express', opts) },
  { name: 'http-core', extra: true, run: ({ quick }) => coreCost(quick) },
]
