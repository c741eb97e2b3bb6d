// bench/load.ts's readings from /proc, which the bench's server rows divide by the decisions
// answered: a process's own CPU, and a server made of a parent and its children (PostgreSQL's
// postmaster and backends), whose children are counted while they run and after they exit; a
// server's peak resident memory; and the Node.js flags a case starts its servers with.
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { describe, expect, it } from 'vitest'
import { peakRssMb, processCpuMicros, processTreeCpuMicros, serverFlags } from '../../bench/load.js'

// The parent starts a child that spins until it has used 210 ms of CPU since it started (measured
// by CPU, not by the clock), says `spun <pid>`, then waits to be told to exit; once the parent has
// reaped it, the parent says `reaped`. The parent itself stays until its stdin ends. /proc counts
// whole clock ticks (10 ms at most), so the child's reading there is at least 200 ms.
const PARENT = `
const { spawn } = require('node:child_process')
const child = spawn(process.execPath, ['-e', \`
  for (;;) { const u = process.cpuUsage(); if (u.user + u.system >= 210000) break }
  process.stdout.write('spun ' + process.pid + '\\\\n')
  process.stdin.once('data', () => process.exit(0))
\`], { stdio: ['pipe', 'pipe', 'inherit'] })
child.stdout.on('data', (d) => process.stdout.write(d))
process.stdin.on('data', () => child.stdin.write('exit\\n'))
child.once('exit', () => process.stdout.write('reaped\\n'))
process.stdin.once('end', () => process.exit(0))
`

/** What `stream` has written, and a wait for the first text of it that matches a pattern. */
function output(stream: NodeJS.ReadableStream): (pattern: RegExp) => Promise<RegExpExecArray> {
  let text = ''
  stream.on('data', (chunk) => {
    text += String(chunk)
  })
  return async (pattern) => {
    for (;;) {
      const match = pattern.exec(text)
      if (match !== null) return match
      if (!stream.readable) throw new Error(`the stream ended without ${pattern}: ${text}`)
      await once(stream, 'data')
    }
  }
}

describe.runIf(process.platform === 'linux')('bench/load.ts CPU readings', () => {
  it('reads a process CPU, undefined for a process that does not exist', () => {
    expect(processCpuMicros(process.pid)).toBeGreaterThan(0)
    // PIDs are below 2^22 on Linux.
    expect(processCpuMicros(2 ** 23)).toBeUndefined()
    expect(processTreeCpuMicros(2 ** 23)).toBeUndefined()
  })

  it("counts a server's children while they run and, once reaped, in the parent's reaped time", async () => {
    const parent = spawn(process.execPath, ['-e', PARENT], { stdio: ['pipe', 'pipe', 'inherit'] })
    try {
      const pid = parent.pid!
      const said = output(parent.stdout)
      const childPid = Number((await said(/spun (\d+)\n/))[1])
      // CPU only grows: a reading taken after another is at least as large.
      const childRunning = processCpuMicros(childPid)!
      const parentOwn = processCpuMicros(pid, true)!
      expect(childRunning).toBeGreaterThanOrEqual(200_000)
      expect(processTreeCpuMicros(pid)!).toBeGreaterThanOrEqual(parentOwn + childRunning)

      parent.stdin.write('go\n')
      await said(/reaped\n/)
      expect(processCpuMicros(childPid)).toBeUndefined()
      // Own time first: what it gains before the second reading can only add to the difference.
      const own = processCpuMicros(pid)!
      const reaped = processCpuMicros(pid, true)! - own
      expect(reaped).toBeGreaterThanOrEqual(childRunning)
      expect(processTreeCpuMicros(pid)!).toBeGreaterThanOrEqual(parentOwn + childRunning)
    } finally {
      parent.stdin.end()
      if (parent.exitCode === null) await once(parent, 'exit')
    }
  })
})

// A child that fills 64 MB (filled, so every page is resident), then waits.
const FILLS = `
const block = Buffer.allocUnsafe(64 * 1024 * 1024).fill(1)
process.stdout.write('filled ' + block.length + '\\n')
process.stdin.once('data', () => process.exit(0))
`

describe.runIf(process.platform === 'linux')('bench/load.ts peak memory', () => {
  it('reads the most memory a process has held resident, undefined for a process that does not exist', async () => {
    const child = spawn(process.execPath, ['-e', FILLS], { stdio: ['pipe', 'pipe', 'inherit'] })
    try {
      await output(child.stdout)(/filled \d+\n/)
      expect(peakRssMb(child.pid!)).toBeGreaterThanOrEqual(64)
      expect(peakRssMb(2 ** 23)).toBeUndefined()
    } finally {
      child.stdin.write('exit\n')
      if (child.exitCode === null) await once(child, 'exit')
    }
  })
})

describe('bench/load.ts server flags (SLUICE_BENCH_SERVER_FLAGS)', () => {
  it('are none when unset or blank', () => {
    expect(serverFlags(undefined)).toEqual([])
    expect(serverFlags('  ')).toEqual([])
  })

  it('are the Node.js flags the variable lists, in order', () => {
    expect(serverFlags(' --max-semi-space-size=64  --max_old_space_size=512 ')).toEqual([
      '--max-semi-space-size=64',
      '--max_old_space_size=512',
    ])
  })

  it('refuse anything that is not a flag, naming the variable', () => {
    expect(() => serverFlags('max-semi-space-size=64')).toThrow(
      /SLUICE_BENCH_SERVER_FLAGS .*"max-semi-space-size=64"/,
    )
    expect(() => serverFlags('--inspect script.js')).toThrow(/"script.js"/)
  })
})

describe('bench/load.ts in a process that measures code in itself', () => {
  it('loads no load generator: the memory and Redis cases import it for their figures alone', async () => {
    // A process of its own, as a case's child is (tsx, the module imported for `median`): which
    // modules a process has loaded moved the memory case's ratios by up to a third.
    const script = `
      import { createRequire } from 'node:module'
      const { median } = await import(${JSON.stringify(new URL('../../bench/load.ts', import.meta.url).href)})
      const loaded = Object.keys(createRequire(import.meta.url).cache)
      process.stdout.write(JSON.stringify({ median: median([3, 1, 2]), autocannon: loaded.filter((p) => p.includes('/autocannon/')).length }))
    `
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    let out = ''
    child.stdout.on('data', (d) => {
      out += String(d)
    })
    const [code] = await once(child, 'exit')
    expect(code).toBe(0)
    expect(JSON.parse(out)).toEqual({ median: 2, autocannon: 0 })
  })
})
