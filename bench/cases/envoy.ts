// Envoy's rate limit call under load: h2load (Debian's nghttp2-client, a C load generator) keeps
// 4 connections x 16 streams of ShouldRateLimit against
//   sluice-grpc      `sluice serve --grpc-port` (dist CLI, memory store, every call allowed),
//   bare-http2       a node:http2 server answering the same path with a fixed frame (bench/envoy-peers.mjs),
//   grpc-js-empty    @grpc/grpc-js whose ShouldRateLimit answers OK at once (bench/envoy-peers.mjs),
//   h2-framing       HTTP/2 spoken by hand over node:net with the same fixed frame (bench/h2-framing.mjs):
//                    what the protocol's own work costs without node:http2,
// and POST /v1/check of the same sluice server (sluice-v1-check): the service's HTTP listener speaks
// HTTP/1.1 only, so that load is h2load over HTTP/1.1 (--h1), 64 connections, one request in flight
// each. Server CPU per call is the server process's utime + stime (/proc/<pid>/stat) over the load
// divided by the calls h2load completed; calls/s is h2load's. Every server starts once and is warmed up; the
// rounds alternate the subjects (the order rotates each round) and every figure is the median over rounds.
//   npm run bench -- --only envoy [--quick] [--profile DIR]
// With SLUICE_BENCH_BASELINE_CLI=<a sluice-server dist/cli.js of another build>, that server runs too
// (sluice-grpc-baseline): before and after in one run.
import type { ChildProcess } from 'node:child_process'
import { execFile, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { loadSync } from '@grpc/proto-loader'
import { PROTO_OPTIONS, RLS_PATH, rlsProtoPath } from '../../packages/sluice-server/src/envoy/grpc.js'
import { rlsClient } from '../../test/helpers/envoy.js'
import {
  freePort,
  median,
  peakRssMb,
  processCpuMicros,
  serverFlags,
  spawnServer,
  stopChild,
} from '../load.js'
import type { BenchCase, BenchOptions, BenchRow } from '../types.js'

export const ROOT = fileURLToPath(new URL('../..', import.meta.url))
export const CLI = join(ROOT, 'packages', 'sluice-server', 'dist', 'cli.js')
export const PEERS = join(ROOT, 'bench', 'envoy-peers.mjs')
const CONNECTIONS = 4
const STREAMS = 16
// Every call allowed, so each one does the full work of a decision.
const CONFIG = 'policies:\n  api: { algorithm: token-bucket, limit: 1000000000, window: 1s }\n'
const RULES =
  'domain: bench\ndescriptors:\n  - key: user\n    rate_limit: { algorithm: token-bucket, requests_per_unit: 1000000000, unit: second }\n'
const REQUEST = { domain: 'bench', descriptors: [{ entries: [{ key: 'user', value: 'user-42' }] }] }
// What sluice answers REQUEST with (limit_remaining and the reset vary; their sizes hardly do).
const RESPONSE = {
  overall_code: 'OK',
  statuses: [
    {
      code: 'OK',
      current_limit: { name: 'user', requests_per_unit: 1_000_000_000, unit: 'SECOND' },
      limit_remaining: 999_999_999,
      duration_until_reset: { seconds: 0, nanos: 1_000_000 },
    },
  ],
  response_headers_to_add: [],
}
const CHECK_BODY = JSON.stringify({ policy: 'api', key: 'user-42' })

/** h2load, or a clear failure naming the package that brings it. */
function requireH2load(): void {
  const probe = spawnSync('h2load', ['--version'])
  if (probe.error !== undefined || probe.status !== 0)
    throw new Error(
      'the envoy bench case needs h2load: install nghttp2-client (Debian/Ubuntu: apt-get install nghttp2-client)',
    )
}

/** One length-prefixed gRPC message, not compressed. */
function grpcFrame(message: Uint8Array): Buffer {
  const prefix = Buffer.alloc(5)
  prefix.writeUInt32BE(message.length, 1)
  return Buffer.concat([prefix, message])
}

/** REQUEST and RESPONSE as gRPC frames, coded by protobufjs from rls.proto (not by the server's codec). */
function frames(): { request: Buffer; response: Buffer } {
  const method = (
    loadSync(rlsProtoPath(), PROTO_OPTIONS)['envoy.service.ratelimit.v3.RateLimitService'] as Record<
      string,
      { requestSerialize(v: unknown): Buffer; responseSerialize(v: unknown): Buffer }
    >
  ).ShouldRateLimit!
  return {
    request: grpcFrame(method.requestSerialize(REQUEST)),
    response: grpcFrame(method.responseSerialize(RESPONSE)),
  }
}

export interface Measured {
  /** Calls completed. */
  done: number
  perSecond: number
  cpuMicrosPerCall: number
  failed: number
}

/** What one h2load load posts, and how: ShouldRateLimit over HTTP/2 unless said otherwise. */
export interface Posted {
  bodyFile: string
  path?: string
  headers?: readonly string[]
  /** HTTP/1.1, one request in flight per connection, CONNECTIONS x STREAMS connections. */
  http1?: boolean
}

/** `POST /v1/check` with the case's body: HTTP/1.1, as the service's HTTP listener speaks. */
export function checkPosted(checkFile: string): Posted {
  return { bodyFile: checkFile, path: '/v1/check', headers: ['content-type: application/json'], http1: true }
}

/** h2load's run: completed calls, calls/s and failures (non-2xx, errors, timeouts). */
export async function h2load(
  port: number,
  posted: Posted,
  seconds: number,
): Promise<{ done: number; perSecond: number; failed: number }> {
  const { bodyFile, path = RLS_PATH, headers = ['content-type: application/grpc', 'te: trailers'] } = posted
  const args = posted.http1
    ? ['--h1', '-c', String(CONNECTIONS * STREAMS), '-m', '1']
    : ['-c', String(CONNECTIONS), '-m', String(STREAMS)]
  args.push('-D', String(seconds), '-d', bodyFile)
  for (const h of headers) args.push('-H', h)
  args.push(`http://127.0.0.1:${port}${path}`)
  const out = await new Promise<string>((resolve, reject) =>
    execFile('h2load', args, { maxBuffer: 1 << 20 }, (error, stdout) =>
      error === null ? resolve(stdout) : reject(new Error(`h2load failed: ${error.message}\n${stdout}`)),
    ),
  )
  return h2loadResult(out)
}

/**
 * What h2load's output says of a run. Its `failed` count already holds the requests `errored` and
 * `timeout` count, and those answered with 4xx or 5xx; it calls 3xx a success, which no answer here
 * may be. Status codes are counted as headers arrive, so a request still in flight when the run
 * ends has its code counted but is not done: the codes are no measure of the failures.
 */
export function h2loadResult(out: string): { done: number; perSecond: number; failed: number } {
  const rate = /finished in [\d.]+\w*, ([\d.]+) req\/s/.exec(out)
  const counts = /requests: \d+ total, \d+ started, (\d+) done, \d+ succeeded, (\d+) failed/.exec(out)
  const codes = /status codes: \d+ 2xx, (\d+) 3xx/.exec(out)
  if (rate === null || counts === null || codes === null) throw new Error(`unexpected h2load output:\n${out}`)
  return { done: Number(counts[1]), perSecond: Number(rate[1]), failed: Number(counts[2]) + Number(codes[1]) }
}

interface Subject {
  id: string
  subject: string
  child: ChildProcess
  run(seconds: number): Promise<Measured>
}

/** The case's files, in a new temporary folder: the service's config and Envoy rules, the request frame and `/v1/check`'s body. */
export function fixtures(): {
  dir: string
  config: string
  rules: string
  bodyFile: string
  checkFile: string
  response: Buffer
} {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-envoy-'))
  const config = join(dir, 'sluice.yaml')
  const rules = join(dir, 'rules.yaml')
  const bodyFile = join(dir, 'request.bin')
  const checkFile = join(dir, 'check.json')
  writeFileSync(config, CONFIG)
  writeFileSync(rules, RULES)
  const { request, response } = frames()
  writeFileSync(bodyFile, request)
  writeFileSync(checkFile, CHECK_BODY)
  return { dir, config, rules, bodyFile, checkFile, response }
}

/** `sluice serve` (the CLI at `cli`) on the memory store, with the gRPC listener and these files. */
export function serveArgs(
  cli: string,
  config: string,
  rules: string,
  port: number,
  grpcPort: number,
): string[] {
  return [
    cli,
    'serve',
    '--config',
    config,
    '--port',
    String(port),
    '--store',
    'memory',
    '--grpc-port',
    String(grpcPort),
    '--envoy-config',
    rules,
  ]
}

/** CPU of `child` around `work`, per call it reports. */
export async function measured(
  child: ChildProcess,
  work: () => Promise<{ done: number; perSecond: number; failed: number }>,
): Promise<Measured> {
  const before = processCpuMicros(child.pid!) ?? Number.NaN
  const r = await work()
  const used = (processCpuMicros(child.pid!) ?? Number.NaN) - before
  return {
    done: r.done,
    perSecond: r.perSecond,
    cpuMicrosPerCall: used / Math.max(1, r.done),
    failed: r.failed,
  }
}

export const benchCase: BenchCase = {
  name: 'envoy',
  async run(opts: BenchOptions): Promise<BenchRow[]> {
    requireH2load()
    // Many short rounds rather than a few long ones: on a shared machine the subjects of one round
    // then meet the same load, and the median drops the round a burst elsewhere hit.
    const seconds = opts.quick ? 2 : 3
    const rounds = opts.quick ? 1 : 5
    const flags = serverFlags(process.env.SLUICE_BENCH_SERVER_FLAGS)
    const { dir, config, rules, bodyFile, checkFile, response } = fixtures()
    const nodeFlags = (name: string) => [
      ...flags,
      ...(opts.profileDir === undefined
        ? []
        : ['--cpu-prof', '--cpu-prof-dir', opts.profileDir, '--cpu-prof-name', `envoy-${name}.cpuprofile`]),
    ]
    const children: ChildProcess[] = []
    const subjects: Subject[] = []

    async function sluice(id: string, subject: string, cli: string): Promise<void> {
      const [port, grpcPort] = [await freePort(), await freePort()]
      const child = await spawnServer([...nodeFlags(id), ...serveArgs(cli, config, rules, port, grpcPort)], {
        cwd: ROOT,
        ready: 'gRPC ',
      })
      children.push(child)
      // Every measured call must be the allowed decision, not an error answered cheaply.
      const client = rlsClient(`127.0.0.1:${grpcPort}`)
      const answer = await client.shouldRateLimit(REQUEST)
      client.close()
      if (answer.overall_code !== 'OK') throw new Error(`${id} answered ${JSON.stringify(answer)}`)
      subjects.push({
        id: `${id} rate`,
        subject,
        child,
        run: (s) => measured(child, () => h2load(grpcPort, { bodyFile }, s)),
      })
      if (id !== 'sluice-grpc') return
      subjects.push({
        id: 'sluice-v1-check rate',
        subject: `sluice POST /v1/check, same server (h2load over HTTP/1.1, ${CONNECTIONS * STREAMS} connections)`,
        child,
        run: (s) => measured(child, () => h2load(port, checkPosted(checkFile), s)),
      })
    }

    async function peer(id: string, subject: string, args: string[]): Promise<void> {
      const port = await freePort()
      const child = await spawnServer([...nodeFlags(id), PEERS, id, String(port), ...args], {
        cwd: ROOT,
        ready: 'ready',
      })
      children.push(child)
      subjects.push({
        id: `${id} rate`,
        subject,
        child,
        run: (s) => measured(child, () => h2load(port, { bodyFile }, s)),
      })
    }

    try {
      await sluice('sluice-grpc', 'sluice gRPC ShouldRateLimit (memory store)', CLI)
      const baseline = process.env.SLUICE_BENCH_BASELINE_CLI
      if (baseline !== undefined)
        await sluice(
          'sluice-grpc-baseline',
          `sluice gRPC ShouldRateLimit, baseline build ${baseline}`,
          baseline,
        )
      await peer('bare-http2', 'node:http2 answering a fixed frame (no decoding)', [response.toString('hex')])
      await peer('h2-framing', 'HTTP/2 by hand over node:net answering a fixed frame (no node:http2)', [
        response.toString('hex'),
      ])
      await peer('grpc-js-empty', '@grpc/grpc-js, ShouldRateLimit answering OK at once', [])

      for (const s of subjects) await s.run(1) // warm-up: JIT, connections, the memory store's key
      const results = new Map<Subject, Measured[]>(subjects.map((s) => [s, []]))
      for (let round = 0; round < rounds; round++) {
        const order = subjects.map((_, i) => subjects[(i + round) % subjects.length]!)
        for (const s of order) results.get(s)!.push(await s.run(seconds))
      }

      const rows: BenchRow[] = []
      const medianOf = (s: Subject, pick: (m: Measured) => number) => median(results.get(s)!.map(pick))
      const bare = subjects.find((s) => s.id === 'bare-http2 rate')!
      const bareCpu = medianOf(bare, (m) => m.cpuMicrosPerCall)
      const check = subjects.find((s) => s.id === 'sluice-v1-check rate')!
      const checkRate = medianOf(check, (m) => m.perSecond)
      const note = `${seconds}s x ${rounds} rounds, median${flags.length > 0 ? `; every server run with ${flags.join(' ')}` : ''}`
      for (const s of subjects) {
        const name = s.id.slice(0, -' rate'.length)
        const failed = results.get(s)!.reduce((sum, m) => sum + m.failed, 0)
        const failures = failed > 0 ? `; ${failed} failed calls` : ''
        // Read before the servers stop; /v1/check's server is gRPC's, so both rows show the same.
        const rss = peakRssMb(s.child.pid!)
        const peak = rss === undefined ? '' : `; the server's peak RSS ${rss.toFixed(0)} MB`
        const load =
          s === check
            ? `h2load --h1 -c ${CONNECTIONS * STREAMS} -m 1`
            : `h2load -c ${CONNECTIONS} -m ${STREAMS}`
        rows.push({
          id: `envoy/${name} cpu`,
          subject: s.subject,
          metric: 'server CPU per call',
          value: medianOf(s, (m) => m.cpuMicrosPerCall),
          unit: 'µs',
          ratio: medianOf(s, (m) => m.cpuMicrosPerCall) / bareCpu,
          note: `${load}, ${note}; ratio vs bare-http2${failures}${peak}`,
        })
        rows.push({
          id: `envoy/${name} rate`,
          subject: s.subject,
          metric: 'calls/s',
          value: medianOf(s, (m) => m.perSecond),
          unit: 'ops/s',
          ratio: medianOf(s, (m) => m.perSecond) / checkRate,
          note: `${load}, ${note}; ratio vs sluice-v1-check`,
        })
      }
      return rows
    } finally {
      for (const child of children) await stopChild(child)
      rmSync(dir, { recursive: true, force: true })
    }
  },
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const rows = await benchCase.run({ quick: process.argv.includes('--quick') })
  for (const r of rows)
    console.log(
      `${(r.id ?? r.subject).padEnd(36)} ${r.value.toFixed(1).padStart(10)} ${r.unit.padEnd(6)} ${r.ratio?.toFixed(2) ?? ''}`,
    )
}
