// Shared by the bench cases: autocannon with the types used here, free ports, server child
// processes, a server's CPU from /proc, medians. Everything talks to 127.0.0.1 only.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { freePort } from '../test/helpers/ports.js'

export { freePort }

/** The part of autocannon's options used here (the package ships no types). */
export interface LoadOptions {
  url: string
  method?: 'GET' | 'POST'
  headers?: Record<string, string>
  body?: string
  connections: number
  duration: number
}

export interface Load {
  requests: number
  requestsPerSecond: number
  p50Ms: number
  p99Ms: number
  /** Connection errors, timeouts and non-2xx answers. */
  errors: number
}

interface AutocannonResult {
  requests: { total: number }
  latency: { p50: number; p99: number }
  duration: number
  errors: number
  non2xx: number
  timeouts: number
}
type Autocannon = (options: LoadOptions & { pipelining: number }) => Promise<AutocannonResult>

/**
 * Loaded by the first `load`, not with this module: the processes that measure code in themselves
 * (the memory and Redis cases' children) import this module for its figures, and autocannon loaded
 * there (through tsx) moved the subjects' rates by up to a third, by which of them ran first
 * (docs/benchmark-cases.md, Memory store).
 */
let autocannon: Autocannon | undefined

/** Closed-loop load: `connections` keep one request each in flight for `duration` seconds. */
export async function load(options: LoadOptions): Promise<Load> {
  autocannon ??= createRequire(import.meta.url)('autocannon') as Autocannon
  const r = await autocannon({ pipelining: 1, ...options })
  return {
    requests: r.requests.total,
    requestsPerSecond: r.requests.total / r.duration,
    p50Ms: r.latency.p50,
    p99Ms: r.latency.p99,
    errors: r.errors + r.non2xx + r.timeouts,
  }
}

/** Spawn `node args...` and wait until its stdout contains `ready`. */
export async function spawnServer(
  args: string[],
  options: { cwd: string; env?: Record<string, string>; ready: string },
): Promise<ChildProcess> {
  const child = spawn(process.execPath, args, {
    cwd: options.cwd,
    env: { ...process.env, SLUICE_LOG_LEVEL: 'warn', ...options.env },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  await new Promise<void>((resolve, reject) => {
    let out = ''
    const onData = (chunk: Buffer) => {
      out += chunk.toString()
      if (out.includes(options.ready)) {
        child.stdout?.off('data', onData)
        child.stdout?.resume()
        resolve()
      }
    }
    child.stdout?.on('data', onData)
    child.once('exit', (code) => reject(new Error(`server exited (${code}) before it was ready: ${out}`)))
  })
  return child
}

/** SIGTERM a child and wait for it to exit. */
export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise((resolve) => child.once('exit', resolve))
  child.kill('SIGTERM')
  await exited
}

/** Clock ticks per second of the CPU times in /proc/<pid>/stat. */
const TICKS_PER_SECOND = Number(spawnSync('getconf', ['CLK_TCK']).stdout?.toString().trim()) || 100

/** The fields of /proc/<pid>/stat after the command name (which may hold spaces): the state first. */
function statFields(pid: number): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')
}

/** The CPU (µs) in a stat line's fields: utime and stime, and with `reaped` cutime and cstime. */
function cpuOfFields(f: readonly string[], reaped: boolean): number {
  // utime, stime, cutime, cstime: the 14th to 17th fields of the line, 12th to 15th here.
  const ticks = Number(f[11]) + Number(f[12]) + (reaped ? Number(f[13]) + Number(f[14]) : 0)
  return (ticks * 1e6) / TICKS_PER_SECOND
}

/**
 * The user + system CPU (µs) process `pid` has used; with `reaped`, that of the children it has
 * waited for too. Undefined where there is no /proc (or no such process).
 */
export function processCpuMicros(pid: number, reaped = false): number | undefined {
  try {
    return cpuOfFields(statFields(pid), reaped)
  } catch {
    return undefined
  }
}

/** The most memory process `pid` has held resident (VmHWM), in MB. Undefined where there is no /proc. */
export function peakRssMb(pid: number): number | undefined {
  try {
    const m = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
    return m === null ? undefined : Number(m[1]) / 1024
  } catch {
    return undefined
  }
}

/**
 * Node.js flags for the servers a case starts, from SLUICE_BENCH_SERVER_FLAGS (for example
 * `--max-semi-space-size=64`): what an operator may run `sluice serve` with. A case gives them to
 * every server it starts alike, so its ratios stay like for like.
 */
export function serverFlags(value: string | undefined): string[] {
  if (value === undefined || value.trim() === '') return []
  const flags = value.trim().split(/\s+/)
  const bad = flags.find((flag) => !/^--[a-z0-9_-]+(=\S+)?$/.test(flag))
  if (bad !== undefined)
    throw new Error(
      `SLUICE_BENCH_SERVER_FLAGS holds Node.js flags (--name or --name=value), not ${JSON.stringify(bad)}`,
    )
  return flags
}

/**
 * The CPU (µs) of a server made of processes, as PostgreSQL's postmaster and its backends: `pid`'s
 * own, its children's that have exited (once it has waited for them), and its live children's. A
 * backend that exits between two readings moves from the last part to the second, so a difference
 * of two readings counts it once. Undefined where there is no /proc.
 */
export function processTreeCpuMicros(pid: number): number | undefined {
  const own = processCpuMicros(pid, true)
  if (own === undefined) return undefined
  let children = 0
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    let f: string[]
    try {
      f = statFields(Number(name))
    } catch {
      continue // exited while the list was read
    }
    // The 4th field of the line, the parent's pid.
    if (Number(f[1]) === pid) children += cpuOfFields(f, false)
  }
  return own + children
}

/** The median (the upper one of an even count). */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN
  return [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
}
