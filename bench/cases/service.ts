// The decision service under load: autocannon against POST /v1/check (memory store, then a local
// Redis) next to a Fastify hello-world, each server in its own process, interleaved rounds, best kept.
// Run alone: npm run -s build && node --import tsx bench/cases/service.ts [--quick]
import type { ChildProcess } from 'node:child_process'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { startRedis } from '../../test/helpers/redis-harness.js'
import type { BenchCase, BenchOptions, BenchRow } from '../types.js'

/** The part of autocannon's API used here (the package ships no types). */
interface LoadOptions {
  url: string
  method?: 'GET' | 'POST'
  headers?: Record<string, string>
  body?: string
  connections?: number
  pipelining?: number
  duration?: number
}
interface LoadResult {
  requests: { average: number }
  latency: { p99: number }
  errors: number
  non2xx: number
  timeouts: number
}
const autocannon = createRequire(import.meta.url)('autocannon') as (
  options: LoadOptions,
) => Promise<LoadResult>

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const CLI = join(ROOT, 'dist', 'cli.js')
const CONNECTIONS = 50
const BODY = JSON.stringify({ policy: 'api', key: 'user-42' })
// Every request allowed, so each one does the full work of a decision.
const CONFIG = 'policies:\n  api: { algorithm: token-bucket, limit: 1000000000, window: 1s }\n'

const HELLO = `
import Fastify from 'fastify'
const app = Fastify({ logger: false })
app.get('/', async () => ({ hello: 'world' }))
await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' })
process.stdout.write('listening\\n')
`

async function freePort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_000)
    const free = await new Promise<boolean>((resolve) => {
      const probe = createServer()
      probe.once('error', () => resolve(false))
      probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)))
    })
    if (free) return port
  }
}

async function spawnServer(
  args: string[],
  env: Record<string, string>,
  ready: string,
): Promise<ChildProcess> {
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env: { ...process.env, SLUICE_LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  await new Promise<void>((resolve, reject) => {
    let out = ''
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      if (out.includes(ready)) resolve()
    })
    child.once('exit', (code) => reject(new Error(`server exited (${code}) before it was ready: ${out}`)))
  })
  return child
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return
  const exited = new Promise((resolve) => child.once('exit', resolve))
  child.kill('SIGTERM')
  await exited
}

interface Load {
  requestsPerSecond: number
  p99Ms: number
  errors: number
}

async function load(options: LoadOptions): Promise<Load> {
  const result = await autocannon({ connections: CONNECTIONS, pipelining: 1, ...options })
  return {
    requestsPerSecond: result.requests.average,
    p99Ms: result.latency.p99,
    errors: result.errors + result.non2xx + result.timeouts,
  }
}

export const benchCase: BenchCase = {
  name: 'service',
  async run(opts: BenchOptions): Promise<BenchRow[]> {
    const seconds = opts.quick ? 2 : 8
    const rounds = opts.quick ? 1 : 2
    const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-'))
    const config = join(dir, 'sluice.yaml')
    writeFileSync(config, CONFIG)
    const redis = await startRedis()
    const children: ChildProcess[] = []
    try {
      const helloPort = await freePort()
      children.push(
        await spawnServer(['--input-type=module', '-e', HELLO], { PORT: String(helloPort) }, 'listening'),
      )
      const subjects: { name: string; options: LoadOptions }[] = [
        { name: 'fastify hello-world GET /', options: { url: `http://127.0.0.1:${helloPort}/` } },
      ]
      for (const store of ['memory', redis.url]) {
        const port = await freePort()
        children.push(
          await spawnServer(
            [CLI, 'serve', '--config', config, '--port', String(port), '--store', store],
            {},
            'sluice serving on',
          ),
        )
        subjects.push({
          name: `sluice POST /v1/check (${store === 'memory' ? 'memory' : 'redis'} store)`,
          options: {
            url: `http://127.0.0.1:${port}/v1/check`,
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: BODY,
          },
        })
      }
      const best = new Map<string, Load>()
      for (let round = 0; round < rounds; round++) {
        for (const subject of subjects) {
          const result = await load({ ...subject.options, duration: seconds })
          const previous = best.get(subject.name)
          if (previous === undefined || result.requestsPerSecond > previous.requestsPerSecond)
            best.set(subject.name, result)
        }
      }
      const reference = best.get(subjects[0]!.name)!.requestsPerSecond
      const rows: BenchRow[] = []
      for (const subject of subjects) {
        const r = best.get(subject.name)!
        const note = `${CONNECTIONS} connections, ${seconds}s x ${rounds}, best round${r.errors > 0 ? `, ${r.errors} errors` : ''}`
        rows.push({
          subject: subject.name,
          metric: 'requests/s',
          value: r.requestsPerSecond,
          unit: 'req/s',
          ratio: r.requestsPerSecond / reference,
          note: `${note}; ratio vs fastify hello-world`,
        })
        rows.push({ subject: subject.name, metric: 'p99 latency', value: r.p99Ms, unit: 'ms' })
      }
      return rows
    } finally {
      for (const child of children) await stop(child)
      await redis.stop()
      rmSync(dir, { recursive: true, force: true })
    }
  },
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const rows = await benchCase.run({ quick: process.argv.includes('--quick') })
  for (const r of rows) {
    const ratio = r.ratio === undefined ? '' : `  ${r.ratio.toFixed(2)}x`
    console.log(
      `${r.subject.padEnd(40)} ${r.metric.padEnd(12)} ${r.value.toFixed(r.unit === 'ms' ? 1 : 0).padStart(9)} ${r.unit}${ratio}`,
    )
  }
}
