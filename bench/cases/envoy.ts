// Envoy's rate limit call under load: a gRPC client built from rls.proto keeps 64 ShouldRateLimit
// calls in flight against `sluice serve --grpc-port` (memory store), next to autocannon with 64
// connections on POST /v1/check of the same process, interleaved rounds, best kept.
// Run alone: npm run -s build && node --import tsx bench/cases/envoy.ts [--quick]
import type { ChildProcess } from 'node:child_process'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { rlsClient } from '../../test/helpers/envoy.js'
import { freePort, load, stopChild } from '../load.js'
import type { BenchCase, BenchOptions, BenchRow } from '../types.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const CLI = join(ROOT, 'packages', 'sluice-server', 'dist', 'cli.js')
const IN_FLIGHT = 64
// Every call allowed, so each one does the full work of a decision.
const CONFIG = 'policies:\n  api: { algorithm: token-bucket, limit: 1000000000, window: 1s }\n'
const RULES =
  'domain: bench\ndescriptors:\n  - key: user\n    rate_limit: { algorithm: token-bucket, requests_per_unit: 1000000000, unit: second }\n'

interface Load {
  perSecond: number
  p50Ms: number
  p99Ms: number
  errors: number
}

/** `IN_FLIGHT` closed loops of ShouldRateLimit for `seconds`; latency of every call. */
async function grpcLoad(address: string, seconds: number): Promise<Load> {
  const client = rlsClient(address)
  const request = { domain: 'bench', descriptors: [{ entries: [{ key: 'user', value: 'user-42' }] }] }
  await client.shouldRateLimit(request) // connect before the clock starts
  const latencies: number[] = []
  let errors = 0
  const until = performance.now() + seconds * 1000
  const loop = async () => {
    while (performance.now() < until) {
      const started = performance.now()
      try {
        const res = await client.shouldRateLimit(request)
        if (res.overall_code !== 'OK') errors++
      } catch {
        errors++
      }
      latencies.push(performance.now() - started)
    }
  }
  const began = performance.now()
  await Promise.all(Array.from({ length: IN_FLIGHT }, loop))
  const elapsed = (performance.now() - began) / 1000
  client.close()
  latencies.sort((a, b) => a - b)
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!
  return { perSecond: latencies.length / elapsed, p50Ms: at(0.5), p99Ms: at(0.99), errors }
}

async function httpLoad(url: string, seconds: number): Promise<Load> {
  const r = await load({
    url,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ policy: 'api', key: 'user-42' }),
    connections: IN_FLIGHT,
    duration: seconds,
  })
  return { perSecond: r.requestsPerSecond, p50Ms: r.p50Ms, p99Ms: r.p99Ms, errors: r.errors }
}

export const benchCase: BenchCase = {
  name: 'envoy-grpc',
  extra: true,
  async run(opts: BenchOptions): Promise<BenchRow[]> {
    const seconds = opts.quick ? 2 : 6
    const rounds = opts.quick ? 1 : 2
    const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-envoy-'))
    writeFileSync(join(dir, 'sluice.yaml'), CONFIG)
    writeFileSync(join(dir, 'rules.yaml'), RULES)
    const [port, grpcPort] = [await freePort(), await freePort()]
    const child: ChildProcess = spawn(
      process.execPath,
      [
        CLI,
        'serve',
        '--config',
        join(dir, 'sluice.yaml'),
        '--port',
        String(port),
        '--store',
        'memory',
      ].concat(['--grpc-port', String(grpcPort), '--envoy-config', join(dir, 'rules.yaml')]),
      { cwd: ROOT, env: { ...process.env, SLUICE_LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'inherit'] },
    )
    try {
      await new Promise<void>((resolve, reject) => {
        let out = ''
        child.stdout?.on('data', (chunk: Buffer) => {
          out += chunk.toString()
          if (out.includes('gRPC ')) resolve()
        })
        child.once('exit', (code) => reject(new Error(`sluice exited (${code}): ${out}`)))
      })
      const subjects: [string, () => Promise<Load>][] = [
        [
          'sluice POST /v1/check (memory store)',
          () => httpLoad(`http://127.0.0.1:${port}/v1/check`, seconds),
        ],
        ['sluice gRPC ShouldRateLimit (memory store)', () => grpcLoad(`127.0.0.1:${grpcPort}`, seconds)],
      ]
      const best = new Map<string, Load>()
      for (let round = 0; round < rounds; round++) {
        for (const [name, run] of subjects) {
          const result = await run()
          const previous = best.get(name)
          if (previous === undefined || result.perSecond > previous.perSecond) best.set(name, result)
        }
      }
      const reference = best.get(subjects[0]![0])!.perSecond
      const rows: BenchRow[] = []
      for (const [name] of subjects) {
        const r = best.get(name)!
        rows.push({
          subject: name,
          metric: 'decisions/s',
          value: r.perSecond,
          unit: 'ops/s',
          ratio: r.perSecond / reference,
          note: `${IN_FLIGHT} in flight, ${seconds}s x ${rounds}, best round; ratio vs /v1/check${r.errors > 0 ? `; ${r.errors} errors` : ''}`,
        })
        rows.push({ subject: name, metric: 'p50 latency', value: r.p50Ms, unit: 'ms' })
        rows.push({ subject: name, metric: 'p99 latency', value: r.p99Ms, unit: 'ms' })
      }
      return rows
    } finally {
      await stopChild(child)
      rmSync(dir, { recursive: true, force: true })
    }
  },
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const rows = await benchCase.run({ quick: process.argv.includes('--quick') })
  for (const r of rows)
    console.log(`${r.subject.padEnd(44)} ${r.metric.padEnd(12)} ${r.value.toFixed(1)} ${r.unit}`)
}
