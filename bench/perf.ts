// Linux `perf` over one server process, for the scripts that split a request's CPU by owner
// (bench/envoy-perf.ts, bench/http-perf.ts): record every thread's call chains over a window,
// native code included, read them back, and give each sample to a part. The server runs with
// `--perf-basic-prof`, so compiled JavaScript is named by its function and file, and it writes
// /tmp/perf-<pid>.map, which `removePerfMap` deletes once the server is stopped.
import { execFile, spawn, spawnSync } from 'node:child_process'
import { rmSync } from 'node:fs'
import { promisify } from 'node:util'

const run = promisify(execFile)

/** V8's garbage collection, on whichever thread it runs. */
export const GC_FRAME =
  /^v8::internal::(Heap::CollectGarbage|Heap::PerformGarbageCollection|ScavengerCollector|Scavenger|MarkCompactCollector|MinorMarkCompactCollector|ConcurrentMarking|IncrementalMarking|Sweeper|ScavengeJob|MemoryReducer|ArrayBufferSweeper|GlobalHandles::|ExternalStringTable)/

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

/** Whether `perf` runs here; the scripts say how to get it when it does not. */
export function perfAvailable(): boolean {
  return spawnSync('perf', ['--version']).status === 0
}

/**
 * Records process `pid` for `seconds` (into `dataFile`) while `during` runs (a load of the same
 * length), and returns what `during` returned with the samples' call chains.
 */
async function recordStacks<T>(
  pid: number,
  dataFile: string,
  seconds: number,
  during: () => Promise<T>,
): Promise<{ result: T; stacks: Stack[] }> {
  const recorder = spawn(
    'perf',
    [
      ...['record', '-q', '-g', '-e', 'cpu-clock', '-F', '999', '-p', String(pid), '-o', dataFile],
      ...['--', 'sleep', String(seconds)],
    ],
    { stdio: 'ignore' },
  )
  const recorded = new Promise<number | null>((resolve) => recorder.once('exit', resolve))
  const result = await during()
  if ((await recorded) !== 0) throw new Error(`perf record failed for process ${pid}`)
  const { stdout } = await run('perf', ['script', '-i', dataFile, '-F', 'tid,ip,sym,dso'], {
    maxBuffer: 1024 * 2 ** 20,
  })
  return { result, stacks: parseScript(stdout) }
}

/** Each part's share of the samples, each part's innermost functions' shares, and the main thread's share. */
export interface Shares<Part> {
  parts: Map<Part, number>
  leaves: Map<Part, Map<string, number>>
  mainThread: number
}

/** Splits `stacks` by `partOf`; `pid` is the main thread's id. */
export function sharesOf<Part>(
  stacks: readonly Stack[],
  partOf: (frames: readonly string[]) => Part,
  pid: number,
): Shares<Part> {
  const parts = new Map<Part, number>()
  const leaves = new Map<Part, Map<string, number>>()
  let mainThread = 0
  const share = 1 / stacks.length
  for (const stack of stacks) {
    const part = partOf(stack.frames)
    parts.set(part, (parts.get(part) ?? 0) + share)
    const leaf = (stack.frames[0] ?? '(unknown)')
      .replace(/ file:\/\/\S*\/(packages|bench)\//, ' $1/')
      .replace(/ \S*\/node_modules\//, ' ')
    const byLeaf = leaves.get(part) ?? new Map<string, number>()
    byLeaf.set(leaf, (byLeaf.get(leaf) ?? 0) + share)
    leaves.set(part, byLeaf)
    if (stack.tid === pid) mainThread += share
  }
  return { parts, leaves, mainThread }
}

/** Deletes the map `--perf-basic-prof` wrote for process `pid`. */
export function removePerfMap(pid: number): void {
  rmSync(`/tmp/perf-${pid}.map`, { force: true })
}

/** A measured window: requests (or calls) answered, their rate, and the process's CPU per one (µs). */
export interface Window {
  done: number
  perSecond: number
  cpuMicrosPerCall: number
}

/** One server's run: a window without perf, then a window perf recorded, and its samples' shares. */
export interface ProfiledRun<Part> extends Shares<Part> {
  plain: Window
  profiled: Window
}

/** What the tables are of: their columns (loads, servers), the parts in order, and their words. */
export interface TableShape<Column extends string, Part extends string> {
  columns: readonly Column[]
  parts: readonly Part[]
  /** What a column is, in the leaves table's header ('load', 'server'). */
  column: string
  /** What one is of ('call', 'request'). */
  unit: string
  /** The label of the rate row, e.g. 'calls/s (h2load, each run)'. */
  rate: string
}

/**
 * A window of `window()` without perf, then one that perf records (into `dataFile`, `seconds`
 * long: `window()`'s own length), its samples split by `partOf`; `pid` is the server's.
 */
export async function profiled<W extends Window, Part>(
  pid: number,
  dataFile: string,
  seconds: number,
  window: () => Promise<W>,
  partOf: (frames: readonly string[]) => Part,
): Promise<Shares<Part> & { plain: W; profiled: W }> {
  const plain = await window()
  const { result, stacks } = await recordStacks(pid, dataFile, seconds, window)
  return { plain, profiled: result, ...sharesOf(stacks, partOf, pid) }
}

/** A window's CPU in all, µs. */
const cpuOf = (w: Window) => w.cpuMicrosPerCall * w.done

/** The parts table: per call (or request), each column's runs pooled. */
export function partsTable<Column extends string, Part extends string>(
  shape: TableShape<Column, Part>,
  results: ReadonlyMap<Column, readonly ProfiledRun<Part>[]>,
): string[] {
  type Run = ProfiledRun<Part>
  /** Per call over a column's runs: `value` of each summed, over its window's calls summed. */
  const pooled = (column: Column, window: (r: Run) => Window, value: (r: Run) => number) => {
    const runs = results.get(column) ?? []
    const calls = runs.reduce((sum, r) => sum + window(r).done, 0)
    return calls === 0 ? Number.NaN : runs.reduce((sum, r) => sum + value(r), 0) / calls
  }
  const profiled = (column: Column, share: (r: Run) => number) =>
    pooled(
      column,
      (r) => r.profiled,
      (r) => share(r) * cpuOf(r.profiled),
    )
  const us = (v: number) => `${v.toFixed(2)} µs`
  const { columns } = shape
  const lines = [
    `| per ${shape.unit} | ${columns.join(' | ')} |`,
    `| --- |${columns.map(() => ' ---: |').join('')}`,
  ]
  const row = (name: string, cell: (column: Column) => string) =>
    lines.push(`| ${name} | ${columns.map(cell).join(' | ')} |`)
  row(shape.rate, (column) =>
    (results.get(column) ?? []).map((r) => `${(r.plain.perSecond / 1000).toFixed(1)}k`).join(', '),
  )
  row("the server process's CPU, every thread", (column) =>
    us(
      pooled(
        column,
        (r) => r.plain,
        (r) => cpuOf(r.plain),
      ),
    ),
  )
  row('the same, in the profiled window', (column) => us(profiled(column, () => 1)))
  row('- on the main thread', (column) => us(profiled(column, (r) => r.mainThread)))
  for (const part of shape.parts)
    row(`- ${part}`, (column) => us(profiled(column, (r) => r.parts.get(part) ?? 0)))
  return lines
}

/** For each column and part, the innermost functions that took the most, per call (or request). */
export function leavesTable<Column extends string, Part extends string>(
  shape: TableShape<Column, Part>,
  results: ReadonlyMap<Column, readonly ProfiledRun<Part>[]>,
  top = 4,
): string[] {
  const lines = [
    `| ${shape.column} | part | innermost functions, µs per ${shape.unit} |`,
    '| --- | --- | --- |',
  ]
  for (const column of shape.columns) {
    const runs = results.get(column) ?? []
    const calls = runs.reduce((sum, r) => sum + r.profiled.done, 0)
    for (const part of shape.parts) {
      const byLeaf = new Map<string, number>()
      for (const r of runs)
        for (const [leaf, share] of r.leaves.get(part) ?? [])
          byLeaf.set(leaf, (byLeaf.get(leaf) ?? 0) + share * cpuOf(r.profiled))
      const largest = [...byLeaf]
        .sort((a, b) => b[1] - a[1])
        .slice(0, top)
        .map(([leaf, us]) => `${shortened(leaf).replaceAll('|', '\\|')} ${(us / calls).toFixed(2)}`)
      if (largest.length > 0) lines.push(`| ${column} | ${part} | ${largest.join('; ')} |`)
    }
  }
  return lines
}

/** What a perf script prints: Node.js's version and the time, the parts table, then the leaves table. */
export function report<Column extends string, Part extends string>(
  shape: TableShape<Column, Part>,
  results: ReadonlyMap<Column, readonly ProfiledRun<Part>[]>,
): string[] {
  return [
    `node ${process.version}, ${new Date().toISOString()}`,
    '',
    ...partsTable(shape, results),
    '',
    ...leavesTable(shape, results),
  ]
}

/** A function's name cut to 100 characters (a regular expression's or a C++ template's can run to thousands). */
function shortened(name: string): string {
  return name.length <= 100 ? name : `${name.slice(0, 99)}…`
}
