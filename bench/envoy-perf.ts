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
import { execFile, spawn, spawnSync } from 'node:child_process'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs, promisify } from 'node:util'
import {
  CLI,
  checkPosted,
  fixtures,
  h2load,
  type Measured,
  measured,
  PEERS,
  ROOT,
  serveArgs,
} from './cases/envoy.js'
import { freePort, spawnServer, stopChild } from './load.js'

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

const GC =
  /^v8::internal::(Heap::CollectGarbage|Heap::PerformGarbageCollection|ScavengerCollector|Scavenger|MarkCompactCollector|MinorMarkCompactCollector|ConcurrentMarking|IncrementalMarking|Sweeper|ScavengeJob|MemoryReducer|ArrayBufferSweeper|GlobalHandles::|ExternalStringTable)/

/**
 * Where a sample belongs, by its call chain (innermost frame first, as `perf script` prints it):
 * garbage collection wherever it runs; else the innermost JavaScript frame's owner, which answers
 * for the builtins, runtime and C++ it calls; else native work with no JavaScript on the stack.
 */
export function partOf(frames: readonly string[]): Part {
  if (frames.some((f) => GC.test(f))) return 'garbage collection (V8, every thread)'
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

export interface Stack {
  tid: number
  /** Function names, innermost first (a compiled JavaScript function as `JS:*name url:line:column`). */
  frames: string[]
}

/** `perf script -F tid,ip,sym,dso`: a line with the thread id, then one line per frame. */
export function parseScript(text: string): Stack[] {
  const stacks: Stack[] = []
  let current: Stack | undefined
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue
    if (!/^\s/.test(line)) {
      current = { tid: Number.parseInt(line.trim(), 10), frames: [] }
      stacks.push(current)
      continue
    }
    const frame = /^\s*[0-9a-f]+\s+(.*?)(\s+\([^()]*\))?$/.exec(line)
    if (current !== undefined && frame !== null) current.frames.push(frame[1]!)
  }
  return stacks
}

interface Run {
  /** The window without perf: calls answered, calls/s, the process's CPU per call (µs). */
  plain: Measured
  /** The window perf recorded, and the shares of its samples. */
  profiled: Measured
  parts: Map<Part, number>
  /** By part, the innermost function of each sample: its share. */
  leaves: Map<Part, Map<string, number>>
  mainThread: number
}

const run = promisify(execFile)

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
    const plain = await measured(child, () => h2load(target, posted, seconds))
    const recorder = spawn(
      'perf',
      [
        'record',
        '-q',
        '-g',
        '-e',
        'cpu-clock',
        '-F',
        '999',
        '-p',
        String(pid),
        '-o',
        dataFile,
        '--',
        'sleep',
        String(seconds),
      ],
      { stdio: 'ignore' },
    )
    const recorded = new Promise<number | null>((resolve) => recorder.once('exit', resolve))
    const profiled = await measured(child, () => h2load(target, posted, seconds))
    if ((await recorded) !== 0) throw new Error(`perf record failed for the ${load} server`)
    if (plain.failed + profiled.failed > 0)
      throw new Error(`${load}: ${plain.failed + profiled.failed} calls failed`)
    const { stdout } = await run('perf', ['script', '-i', dataFile, '-F', 'tid,ip,sym,dso'], {
      maxBuffer: 512 * 2 ** 20,
    })
    const stacks = parseScript(stdout)
    const parts = new Map<Part, number>()
    const leaves = new Map<Part, Map<string, number>>()
    let mainThread = 0
    for (const stack of stacks) {
      const part = partOf(stack.frames)
      const share = 1 / stacks.length
      parts.set(part, (parts.get(part) ?? 0) + share)
      const leaf = (stack.frames[0] ?? '(unknown)').replace(/ file:\/\/\S*\/(packages|bench)\//, ' $1/')
      const byLeaf = leaves.get(part) ?? new Map<string, number>()
      byLeaf.set(leaf, (byLeaf.get(leaf) ?? 0) + share)
      leaves.set(part, byLeaf)
      if (stack.tid === pid) mainThread += share
    }
    return { plain, profiled, parts, leaves, mainThread }
  } finally {
    await stopChild(child)
    rmSync(`/tmp/perf-${pid}.map`, { force: true })
  }
}

/** A window's CPU in all, µs. */
const cpuOf = (w: Measured) => w.cpuMicrosPerCall * w.done

/** The table: per call, each load's runs pooled. */
export function table(results: ReadonlyMap<Load, readonly Run[]>): string[] {
  /** Per call over a load's runs: `value` of each summed, over its window's calls summed. */
  const pooled = (load: Load, window: (r: Run) => Measured, value: (r: Run) => number) => {
    const runs = results.get(load) ?? []
    const calls = runs.reduce((sum, r) => sum + window(r).done, 0)
    return calls === 0 ? Number.NaN : runs.reduce((sum, r) => sum + value(r), 0) / calls
  }
  const profiled = (load: Load, share: (r: Run) => number) =>
    pooled(
      load,
      (r) => r.profiled,
      (r) => share(r) * cpuOf(r.profiled),
    )
  const us = (v: number) => `${v.toFixed(2)} µs`
  const lines = [`| per call | ${LOADS.join(' | ')} |`, `| --- |${LOADS.map(() => ' ---: |').join('')}`]
  const row = (name: string, cell: (load: Load) => string) =>
    lines.push(`| ${name} | ${LOADS.map(cell).join(' | ')} |`)
  row('calls/s (h2load, each run)', (load) =>
    (results.get(load) ?? []).map((r) => `${(r.plain.perSecond / 1000).toFixed(1)}k`).join(', '),
  )
  row("the server process's CPU, every thread", (load) =>
    us(
      pooled(
        load,
        (r) => r.plain,
        (r) => cpuOf(r.plain),
      ),
    ),
  )
  row('the same, in the profiled window', (load) => us(profiled(load, () => 1)))
  row('- on the main thread', (load) => us(profiled(load, (r) => r.mainThread)))
  for (const part of PARTS) row(`- ${part}`, (load) => us(profiled(load, (r) => r.parts.get(part) ?? 0)))
  return lines
}

/** For each load and part, the innermost functions that took the most, per call. */
export function leavesTable(results: ReadonlyMap<Load, readonly Run[]>, top = 4): string[] {
  const lines = ['| load | part | innermost functions, µs per call |', '| --- | --- | --- |']
  for (const load of LOADS) {
    const runs = results.get(load) ?? []
    const calls = runs.reduce((sum, r) => sum + r.profiled.done, 0)
    for (const part of PARTS) {
      const byLeaf = new Map<string, number>()
      for (const r of runs)
        for (const [leaf, share] of r.leaves.get(part) ?? [])
          byLeaf.set(leaf, (byLeaf.get(leaf) ?? 0) + share * cpuOf(r.profiled))
      const largest = [...byLeaf]
        .sort((a, b) => b[1] - a[1])
        .slice(0, top)
        .map(([leaf, us]) => `${leaf.replaceAll('|', '\\|')} ${(us / calls).toFixed(2)}`)
      if (largest.length > 0) lines.push(`| ${load} | ${part} | ${largest.join('; ')} |`)
    }
  }
  return lines
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string', default: '6' },
      warmup: { type: 'string', default: '2' },
      repeat: { type: 'string', default: '2' },
    },
  })
  if (spawnSync('perf', ['--version']).status !== 0) {
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
  console.log(`node ${process.version}, ${new Date().toISOString()}\n`)
  for (const line of table(results)) console.log(line)
  console.log('')
  for (const line of leavesTable(results)) console.log(line)
}
