// Where a gRPC call's CPU goes, beside a `POST /v1/check` decision and a bare node:http2 handler's
// call: the Envoy case's three loads (bench/cases/envoy.ts), each on a server of its own. Linux
// `perf` samples every thread of the server, native code included (nghttp2, Node.js's and V8's C++,
// the C library, the kernel), which V8's own profiler cannot: it counts native work done outside
// JavaScript, such as nghttp2 parsing frames in libuv's poll phase, as idle. The server runs with
// `--perf-basic-prof` so that compiled JavaScript is named by its function and file.
// Per call: calls/s and the process's CPU over a window without perf, then the profiled window's
// CPU split by each sample's call chain: garbage collection; else the innermost JavaScript
// function's owner (the builtins, runtime and C++ it calls are its cost); else native work with no
// JavaScript on the stack.
// Needs `perf` (Debian: linux-perf) allowed to watch the server's process (root, or
// kernel.perf_event_paranoid <= 2).
//   node --import tsx bench/envoy-perf.ts [--seconds 6] [--warmup 2] [--repeat 2]
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { CLI, checkPosted, fixtures, h2load, measured, PEERS, ROOT, serveArgs } from './cases/envoy.js'
import { freePort, spawnServer, stopChild } from './load.js'
import {
  GC_FRAME,
  type ProfiledRun,
  perfAvailable,
  profiled,
  removePerfMap,
  report,
  type TableShape,
} from './perf.js'

const LOADS = ['gRPC', '/v1/check', 'bare handler'] as const
type Load = (typeof LOADS)[number]

/** The table's rows below the totals, in order. */
const PARTS = [
  "the server's own JavaScript (Sluice's, or the bare handler's), with what it calls",
  "node:http2's and node:http's JavaScript, with what it calls",
  "Node.js's other JavaScript (streams, events, timers, ticks), with what it calls",
  'garbage collection (V8, every thread)',
  "nghttp2 and Node.js's HTTP/2 C++, no JavaScript on the stack",
  'no JavaScript or nghttp2 on the stack: the event loop, the kernel, malloc and free (whose callers perf cannot unwind)',
] as const
type Part = (typeof PARTS)[number]

/**
 * Where a sample belongs, by its call chain (innermost frame first, as `perf script` prints it):
 * garbage collection wherever it runs; else the innermost JavaScript frame's owner, which answers
 * for the builtins, runtime and C++ it calls; else native work with no JavaScript on the stack.
 */
export function partOf(frames: readonly string[]): Part {
  if (frames.some((f) => GC_FRAME.test(f))) return 'garbage collection (V8, every thread)'
  for (const frame of frames) {
    if (!frame.startsWith('JS:')) continue
    if (/\/packages\/sluice(-server)?\//.test(frame) || frame.includes('/bench/envoy-peers.mjs'))
      return "the server's own JavaScript (Sluice's, or the bare handler's), with what it calls"
    if (/ node:(internal\/)?(http2|_http|http\b|internal\/http)/.test(frame))
      return "node:http2's and node:http's JavaScript, with what it calls"
    return "Node.js's other JavaScript (streams, events, timers, ticks), with what it calls"
  }
  if (frames.some((f) => f.startsWith('nghttp2_') || f.startsWith('node::http2::')))
    return "nghttp2 and Node.js's HTTP/2 C++, no JavaScript on the stack"
  return 'no JavaScript or nghttp2 on the stack: the event loop, the kernel, malloc and free (whose callers perf cannot unwind)'
}

type Run = ProfiledRun<Part>

async function measure(
  load: Load,
  files: ReturnType<typeof fixtures>,
  dataFile: string,
  warmup: number,
  seconds: number,
): Promise<Run> {
  const [port, grpcPort] = [await freePort(), await freePort()]
  const child =
    load === 'bare handler'
      ? await spawnServer(
          ['--perf-basic-prof', PEERS, 'bare-http2', String(port), files.response.toString('hex')],
          { cwd: ROOT, ready: 'ready' },
        )
      : await spawnServer(
          ['--perf-basic-prof', ...serveArgs(CLI, files.config, files.rules, port, grpcPort)],
          {
            cwd: ROOT,
            ready: 'gRPC ',
          },
        )
  const pid = child.pid!
  try {
    const target = load === 'gRPC' ? grpcPort : port
    const posted = load === '/v1/check' ? checkPosted(files.checkFile) : { bodyFile: files.bodyFile }
    await h2load(target, posted, warmup)
    const run = await profiled(
      pid,
      dataFile,
      seconds,
      () => measured(child, () => h2load(target, posted, seconds)),
      partOf,
    )
    const failed = run.plain.failed + run.profiled.failed
    if (failed > 0) throw new Error(`${load}: ${failed} calls failed`)
    return run
  } finally {
    await stopChild(child)
    removePerfMap(pid)
  }
}

const SHAPE: TableShape<Load, Part> = {
  columns: LOADS,
  parts: PARTS,
  column: 'load',
  unit: 'call',
  rate: 'calls/s (h2load, each run)',
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string', default: '6' },
      warmup: { type: 'string', default: '2' },
      repeat: { type: 'string', default: '2' },
    },
  })
  if (!perfAvailable()) {
    console.error('bench/envoy-perf.ts needs perf: install linux-perf (Debian) or linux-tools (Ubuntu)')
    process.exit(1)
  }
  const files = fixtures()
  const results = new Map<Load, Run[]>(LOADS.map((load) => [load, []]))
  try {
    for (let i = 0; i < Number(values.repeat); i++)
      for (const load of LOADS) {
        const data = join(files.dir, `${i}-${load.replace(/\W/g, '')}.perf.data`)
        results
          .get(load)!
          .push(await measure(load, files, data, Number(values.warmup), Number(values.seconds)))
      }
  } finally {
    rmSync(files.dir, { recursive: true, force: true })
  }
  for (const line of report(SHAPE, results)) console.log(line)
}
