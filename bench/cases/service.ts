// The decision service under load: autocannon against POST /v1/check (memory store, then a local
// Redis) next to a Fastify hello-world, each server in its own process, interleaved rounds, best kept;
// and each server's CPU per request (/proc, user + system), the median over rounds: autocannon takes
// about one of the machine's two cores, so requests/s is partly the load generator's figure.
// Run alone: npm run -s build && node --import tsx bench/cases/service.ts [--quick]
import type { ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { startRedis } from '../../test/helpers/redis-harness.js'
import {
  freePort,
  type Load,
  type LoadOptions,
  load,
  median,
  processCpuMicros,
  spawnServer,
  stopChild,
} from '../load.js'
import type { BenchCase, BenchOptions, BenchRow } from '../types.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const CLI = join(ROOT, 'packages', 'sluice-server', 'dist', 'cli.js')
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

export const benchCase: BenchCase = {
  name: 'service',
  extra: true,
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
      const hello = await spawnServer(['--input-type=module', '-e', HELLO], {
        cwd: ROOT,
        env: { PORT: String(helloPort) },
        ready: 'listening',
      })
      children.push(hello)
      const subjects: {
        name: string
        server: ChildProcess
        options: Omit<LoadOptions, 'duration' | 'connections'>
      }[] = [
        {
          name: 'fastify hello-world GET /',
          server: hello,
          options: { url: `http://127.0.0.1:${helloPort}/` },
        },
      ]
      for (const store of ['memory', redis.url]) {
        const port = await freePort()
        const server = await spawnServer(
          [CLI, 'serve', '--config', config, '--port', String(port), '--store', store],
          { cwd: ROOT, ready: 'sluice serving on' },
        )
        children.push(server)
        subjects.push({
          name: `sluice POST /v1/check (${store === 'memory' ? 'memory' : 'redis'} store)`,
          server,
          options: {
            url: `http://127.0.0.1:${port}/v1/check`,
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: BODY,
          },
        })
      }
      const best = new Map<string, Load>()
      const cpu = new Map<string, number[]>(subjects.map((s) => [s.name, []]))
      for (let round = 0; round < rounds; round++) {
        for (const subject of subjects) {
          const before = processCpuMicros(subject.server.pid!)
          const result = await load({ ...subject.options, connections: CONNECTIONS, duration: seconds })
          const after = processCpuMicros(subject.server.pid!)
          if (before !== undefined && after !== undefined && result.requests > 0)
            cpu.get(subject.name)!.push((after - before) / result.requests)
          const previous = best.get(subject.name)
          if (previous === undefined || result.requestsPerSecond > previous.requestsPerSecond)
            best.set(subject.name, result)
        }
      }
      const reference = best.get(subjects[0]!.name)!.requestsPerSecond
      const cpuReference = median(cpu.get(subjects[0]!.name)!)
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
        const perRequest = cpu.get(subject.name)!
        if (perRequest.length > 0)
          rows.push({
            subject: subject.name,
            metric: 'server CPU per request',
            value: median(perRequest),
            unit: 'µs',
            ratio: median(perRequest) / cpuReference,
            note: `median of ${perRequest.length} rounds; ratio vs fastify hello-world`,
          })
      }
      return rows
    } finally {
      for (const child of children) await stopChild(child)
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
      `${r.subject.padEnd(40)} ${r.metric.padEnd(12)} ${r.value.toFixed(r.unit === 'req/s' ? 0 : 1).padStart(9)} ${r.unit}${ratio}`,
    )
  }
}
