// Where a request's CPU goes in the HTTP case's memory-store servers (bench/cases/http.ts): no
// limiter, Sluice with its default headers, Sluice with the peer's header set, and the peer, each a
// server of its own under the case's own load (autocannon, 50 connections). Linux `perf` samples
// every thread of the server, native code included (bench/perf.ts); each sample goes to garbage
// collection, else to the owner of the innermost JavaScript function on its stack (the builtins,
// runtime and C++ it calls are its cost), else to native work with no JavaScript on the stack.
// Per request: req/s and the process's CPU over a window without perf, then the profiled window's
// CPU split by part, and the largest innermost functions of each part.
// Needs `perf` (Debian: linux-perf) allowed to watch the server's process (root, or
// kernel.perf_event_paranoid <= 2).
//   node --import tsx bench/http-perf.ts [--framework fastify|express] [--seconds 5] [--warmup 2] [--repeat 2]
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import {
  BASE_VARIANTS,
  CONNECTIONS,
  type Framework,
  measure,
  type Server,
  startServer,
  stopServer,
} from './cases/http.js'
import { load } from './load.js'
import {
  GC_FRAME,
  type ProfiledRun,
  perfAvailable,
  profiled,
  removePerfMap,
  report,
  type TableShape,
  type Window,
} from './perf.js'

/** The parts, in the table's order. */
const PARTS = [
  "the limiter's own JavaScript (Sluice's, or the peer's), with what it calls",
  "the framework's JavaScript (Fastify or Express, their dependencies, the hello-world handler), with what it calls",
  "node:http's JavaScript, with what it calls",
  "Node.js's other JavaScript (net, streams, events, timers, ticks), with what it calls",
  'garbage collection (V8, every thread)',
  "no JavaScript on the stack: the event loop, the kernel's socket work, malloc and free",
] as const
type Part = (typeof PARTS)[number]

/** The peers' own code: the plugin or middleware and the cache or store it brings. */
const PEER_CODE = /\/node_modules\/(@fastify\/rate-limit|toad-cache|express-rate-limit)\//

/**
 * Where a sample belongs, by its call chain (innermost frame first, as `perf script` prints it):
 * garbage collection wherever it runs; else the innermost JavaScript frame's owner; else native.
 */
export function partOf(frames: readonly string[]): Part {
  if (frames.some((f) => GC_FRAME.test(f))) return 'garbage collection (V8, every thread)'
  for (const frame of frames) {
    if (!frame.startsWith('JS:')) continue
    if (frame.includes('/packages/sluice/dist/') || PEER_CODE.test(frame))
      return "the limiter's own JavaScript (Sluice's, or the peer's), with what it calls"
    if (frame.includes('/node_modules/') || frame.includes('/bench/cases/http-server.mjs'))
      return "the framework's JavaScript (Fastify or Express, their dependencies, the hello-world handler), with what it calls"
    if (/ node:(_http|http\b|internal\/http)/.test(frame)) return "node:http's JavaScript, with what it calls"
    return "Node.js's other JavaScript (net, streams, events, timers, ticks), with what it calls"
  }
  return "no JavaScript on the stack: the event loop, the kernel's socket work, malloc and free"
}

/** The framework's servers on the memory store (those writing header lines alone too): the no-limiter one first. */
export function memoryVariants(framework: Framework): { variant: string; subject: string }[] {
  return BASE_VARIANTS[framework].filter((v) => !v.variant.includes('redis'))
}

/** One window of the case's load: requests answered, req/s, the server's CPU per request. */
async function window(server: Server, seconds: number): Promise<Window> {
  const round = await measure(server, seconds)
  if (round.errors > 0) throw new Error(`${server.subject}: ${round.errors} errors or non-2xx`)
  return {
    done: round.requests,
    perSecond: round.requestsPerSecond,
    cpuMicrosPerCall: round.cpuMicrosPerRequest,
  }
}

async function profile(
  framework: Framework,
  variant: string,
  subject: string,
  dataFile: string,
  warmup: number,
  seconds: number,
): Promise<ProfiledRun<Part>> {
  // A memory-store server never connects to Redis: the port is not read.
  const server = await startServer(framework, variant, subject, 0, ['--perf-basic-prof'])
  const pid = server.child.pid!
  try {
    await load({ url: server.url, connections: CONNECTIONS, duration: warmup })
    return await profiled(pid, dataFile, seconds, () => window(server, seconds), partOf)
  } finally {
    await stopServer(server)
    removePerfMap(pid)
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      framework: { type: 'string', default: 'fastify' },
      seconds: { type: 'string', default: '5' },
      warmup: { type: 'string', default: '2' },
      repeat: { type: 'string', default: '2' },
    },
  })
  const framework = values.framework
  if (framework !== 'fastify' && framework !== 'express') {
    console.error(`--framework fastify or express, not ${framework}`)
    process.exit(2)
  }
  if (!perfAvailable()) {
    console.error('bench/http-perf.ts needs perf: install linux-perf (Debian) or linux-tools (Ubuntu)')
    process.exit(1)
  }
  const variants = memoryVariants(framework)
  const shape: TableShape<string, Part> = {
    columns: variants.map((v) => v.subject),
    parts: PARTS,
    column: 'server',
    unit: 'request',
    rate: `req/s (autocannon, ${CONNECTIONS} connections, each run)`,
  }
  const dir = mkdtempSync(join(tmpdir(), 'sluice-http-perf-'))
  const results = new Map<string, ProfiledRun<Part>[]>(variants.map((v) => [v.subject, []]))
  try {
    // Runs alternate the servers, so a burst of load elsewhere on the machine hits them alike.
    for (let i = 0; i < Number(values.repeat); i++)
      for (const { variant, subject } of variants) {
        const run = await profile(
          framework,
          variant,
          subject,
          join(dir, `${i}-${variant}.perf.data`),
          Number(values.warmup),
          Number(values.seconds),
        )
        results.get(subject)!.push(run)
      }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  for (const line of report(shape, results)) console.log(line)
}
