// Where a CPU profile's busy time goes, by owner: Sluice's own code, each npm package, Node.js's own
// JavaScript, V8 (garbage collection, the microtask queue, code without a JavaScript frame), native
// functions by name (a socket write's system call is `writeUtf8String` or `writev`) and the bench's
// load loop. Idle samples are left out. Several profiles of one subject add up.
//   node --import tsx bench/profile-shares.ts <file.cpuprofile>...
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

/** The parts of a `.cpuprofile` (V8's Profiler.Profile) read here. */
export interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[]
  samples: number[]
  timeDeltas: number[]
}

export interface Share {
  name: string
  /** Milliseconds of busy samples. */
  ms: number
  /** Of all busy samples, 0 to 1. */
  share: number
}

export interface Shares {
  busyMs: number
  owners: Share[]
  functions: Share[]
}

/** Who a frame belongs to. */
export function ownerOf(functionName: string, url: string): string {
  if (url === '') {
    if (functionName === '(garbage collector)') return 'V8: garbage collection'
    if (functionName === '(program)') return 'V8: (program), no JavaScript frame'
    if (functionName === 'runMicrotasks') return 'V8: microtask queue'
    if (functionName.startsWith('RegExp: ')) return 'V8: regular expressions'
    return `native: ${functionName || '(anonymous)'}`
  }
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)
  if (pkg !== null) return `package: ${pkg[1]}`
  if (url.startsWith('node:')) return 'Node.js (node:*)'
  if (/\/packages\/sluice-server\//.test(url)) return 'Sluice: sluice-server'
  if (/\/packages\/sluice\//.test(url)) return 'Sluice: sluice'
  if (/\/bench\//.test(url)) return 'the bench (load loop, harness)'
  return `other: ${url}`
}

/** Busy time by owner and by function, largest first. */
export function profileShares(profiles: readonly CpuProfile[]): Shares {
  const owners = new Map<string, number>()
  const functions = new Map<string, number>()
  let busy = 0
  for (const profile of profiles) {
    const nodes = new Map(profile.nodes.map((n) => [n.id, n.callFrame]))
    for (let i = 0; i < profile.samples.length; i++) {
      const frame = nodes.get(profile.samples[i]!)
      if (frame === undefined || frame.functionName === '(idle)') continue
      const us = profile.timeDeltas[i] ?? 0
      busy += us
      const owner = ownerOf(frame.functionName, frame.url)
      owners.set(owner, (owners.get(owner) ?? 0) + us)
      const where =
        frame.url === ''
          ? ''
          : ` ${frame.url.replace(/^.*\/(node_modules|packages|bench)\//, '$1/')}:${frame.lineNumber + 1}`
      const fn = `${frame.functionName || '(anonymous)'}${where}`
      functions.set(fn, (functions.get(fn) ?? 0) + us)
    }
  }
  const sorted = (m: Map<string, number>): Share[] =>
    [...m]
      .map(([name, us]) => ({ name, ms: us / 1000, share: busy === 0 ? 0 : us / busy }))
      .sort((a, b) => b.ms - a.ms)
  return { busyMs: busy / 1000, owners: sorted(owners), functions: sorted(functions) }
}

/** A Markdown table of the owners (and the top `topFunctions` functions). */
export function sharesTable(shares: Shares, topFunctions = 15): string[] {
  const pct = (s: Share) => `${(s.share * 100).toFixed(1)}%`
  // A regular expression's source may hold a `|`, which would split the Markdown cell.
  const cell = (text: string) => text.replaceAll('|', '\\|')
  const lines = [`busy samples: ${shares.busyMs.toFixed(0)} ms`, '', '| owner | share |', '| --- | ---: |']
  for (const s of shares.owners) if (s.share >= 0.005) lines.push(`| ${cell(s.name)} | ${pct(s)} |`)
  lines.push('', '| function | share |', '| --- | ---: |')
  for (const s of shares.functions.slice(0, topFunctions)) lines.push(`| ${cell(s.name)} | ${pct(s)} |`)
  return lines
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const files = process.argv.slice(2)
  if (files.length === 0) {
    console.error('usage: node --import tsx bench/profile-shares.ts <file.cpuprofile>...')
    process.exit(1)
  }
  const profiles = files.map((f) => JSON.parse(readFileSync(f, 'utf8')) as CpuProfile)
  for (const line of sharesTable(profileShares(profiles))) console.log(line)
}
