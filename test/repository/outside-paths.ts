// Finds paths that tests, scripts and configs resolve outside the repository. In JavaScript and
// TypeScript every path expression that can be evaluated without running it is computed from the
// file's own location (outside-paths-js.ts); in shell scripts, JSON configs and the examples' other
// files, path-like words are. What may be reached outside is ALLOWED, with a reason.
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { extname, join, posix, relative } from 'node:path'
import type { PathSink } from './outside-paths-js.js'
import { scanJs, TMPDIR } from './outside-paths-js.js'

export { TMPDIR }

/** The parent folder's name, spelled so that this file's own scan does not read it as a path. */
const CLIMB = '.'.repeat(2)

/** What the suite may reach outside the repository, and why. */
export const ALLOWED: readonly { prefix: string; reason: string }[] = [
  { prefix: TMPDIR, reason: 'scratch folders the tests make and remove, and the consumer tests’ npm cache' },
  {
    prefix: '/usr/bin',
    reason: 'system executables the harnesses run (chromium, python3), installed by .ci/run',
  },
  { prefix: '/bin/sh', reason: 'the POSIX shell, to start a child under a lower file limit (ulimit -n)' },
  { prefix: '/usr/sbin', reason: 'nginx, installed by .ci/run (test/helpers/nginx-harness.ts)' },
  {
    prefix: '/usr/lib/postgresql',
    reason: 'Debian’s PostgreSQL binaries (test/helpers/postgres-harness.ts)',
  },
  { prefix: '/proc', reason: 'the kernel’s view of a process the test started (its memory, its CPU time)' },
  { prefix: '/dev/null', reason: 'output thrown away in .ci/run' },
  {
    prefix: '/tmp/perf-',
    reason:
      'the map of compiled JavaScript that V8’s --perf-basic-prof writes where Linux perf reads it (bench/perf.ts removes the one of each server bench/envoy-perf.ts and bench/http-perf.ts start)',
  },
]

/** Top-level folders of a file system: an absolute path in text is only taken as one under these. */
const FS_ROOTS = new Set(
  ['bin', 'boot', 'dev', 'etc', 'home', 'lib', 'lib32', 'lib64', 'media', 'mnt', 'nix', 'opt'].concat(
    ['private', 'proc', 'root', 'run', 'sbin', 'snap', 'srv', 'sys', 'tmp', 'usr', 'var', 'work'],
    ['Users', 'Volumes'],
  ),
)

export interface Finding {
  /** `file:line` relative to the repository root. */
  where: string
  /** The expression or word as written. */
  written: string
  /** Where it points. */
  resolved: string
}

export interface Scan {
  findings: Finding[]
  /** Every path the scan could compute, inside or out (what it evaluated, for a sanity check). */
  resolved: { where: string; path: string }[]
}

const JS = new Set(['.ts', '.mts', '.cts', '.tsx', '.js', '.mjs', '.cjs'])
/** Not scanned, with the reason. Every other file is read as text (see words), or as code. */
const SKIPPED: Readonly<Record<string, string>> = {
  '.md': 'prose',
  '.snap': 'vitest snapshots: recorded output, not code',
  '.gitignore': 'patterns of ignored files',
}

const isInside = (root: string, path: string) => path === root || path.startsWith(`${root}/`)

function allowed(path: string): boolean {
  return ALLOWED.some((a) => isInside(a.prefix, path))
}

class Scanner implements PathSink {
  readonly scan: Scan = { findings: [], resolved: [] }
  constructor(readonly root: string) {}

  rel(file: string): string {
    return relative(this.root, file).split('\\').join('/')
  }

  /** Records a computed path; a finding when it is outside the repository and not allowed. */
  check(file: string, line: number, written: string, path: string): void {
    const normal = posix.normalize(path)
    const where = `${this.rel(file)}:${line}`
    this.scan.resolved.push({ where, path: normal })
    if (isInside(this.root, normal) || allowed(normal)) return
    this.scan.findings.push({ where, written: written.replace(/\s+/g, ' ').slice(0, 160), resolved: normal })
  }

  /**
   * Path-like words of free text: absolute paths under a file system root, and climbs (`../x`),
   * resolved from the working directory (the repository root, where tests and npm scripts run). In
   * a string of code a lone `..` word is Lua's or prose's, not a path, unless it is the whole string.
   */
  words(file: string, line: number, text: string, inCode = false): void {
    const dir = posix.dirname(file)
    const expanded = text
      .replace(/\$\(\s*dirname\s+"?\$(?:0|\{?BASH_SOURCE(?:\[0\])?\}?)"?\s*\)/g, dir)
      .replace(/\b[a-z][a-z0-9+.-]*:\/\/[^\s"'`]*/gi, ' ')
    const rootTop = this.root.split('/')[1]
    for (const word of expanded.split(/[\s"'`;|&<>(){}=,[\]]+|:-/)) {
      if (word === '') continue
      const segments = word.split('/')
      if (word.startsWith('/')) {
        const normal = posix.normalize(word).split('/')
        const top = normal[1] ?? ''
        // Under the root's top folder: a folder beside the clone (`/<top>/x`), or the top itself when
        // climbed to; the bare word `/<top>` is a route such as `/check` (a clone under /check).
        const besideRoot = top === rootTop && (normal.length > 2 || segments.includes(CLIMB))
        if (FS_ROOTS.has(top) || besideRoot || FS_ROOTS.has(segments[1] ?? ''))
          this.check(file, line, word, word)
      } else if (segments.includes(CLIMB) && (!inCode || segments.length > 1 || text.trim() === CLIMB))
        this.check(file, line, word, posix.resolve(this.root, word))
    }
  }

  /** Shell scripts, JSON configs, the examples' other files (any file not code), line by line. */
  scanText(file: string, text: string): void {
    text.split('\n').forEach((content, i) => {
      this.words(file, i + 1, content)
    })
  }
}

/** Scan one file's text as if it were at `file` (an absolute path inside `root`). */
export function scanSource(root: string, file: string, text: string): Scan {
  const scanner = new Scanner(root)
  scanFile(scanner, file, text)
  return scanner.scan
}

function kindOf(file: string, text: string): 'js' | 'text' | 'skip' {
  const name = posix.basename(file)
  const ext = name.startsWith('.') && !name.slice(1).includes('.') ? name : extname(name)
  if (JS.has(ext)) return 'js'
  // A binary file (a NUL byte early on) holds no path anyone wrote.
  if (ext in SKIPPED || text.slice(0, 8000).includes('\u0000')) return 'skip'
  return 'text'
}

function scanFile(scanner: Scanner, file: string, text: string): void {
  const kind = kindOf(file, text)
  if (kind === 'js') scanJs(scanner, file, text)
  else if (kind === 'text') scanner.scanText(file, text)
}

/** The folders and root files whose paths must stay inside the repository. */
const SCANNED_FOLDERS = ['test', 'scripts', 'bench', '.ci', 'examples']
const ROOT_FILES =
  /^(?:[^.].*\.(?:ts|mts|cts|js|mjs|cjs)|package\.json|tsconfig(?:\..+)?\.json|biome\.jsonc?)$/

function walk(dir: string, out: string[]): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name === 'dist') continue
    const path = join(dir, entry.name)
    if (entry.isDirectory()) {
      // Dot folders hold tools' output (test/fault/.results), not code.
      if (!entry.name.startsWith('.')) walk(path, out)
    } else if (entry.isFile()) out.push(path)
  }
}

/** Every file the scan covers under `root`, sorted. */
function scannedFiles(root: string): string[] {
  const files: string[] = []
  for (const folder of SCANNED_FOLDERS) walk(join(root, folder), files)
  const rootFiles = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true }))
      if (entry.isFile() && ROOT_FILES.test(entry.name)) files.push(join(dir, entry.name))
  }
  rootFiles(root)
  // Each package's own configs (package.json, tsup.config.ts) and the examples it ships.
  const packages = join(root, 'packages')
  for (const entry of readdirSync(packages, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue
    rootFiles(join(packages, entry.name))
    const examples = join(packages, entry.name, 'examples')
    if (existsSync(examples)) walk(examples, files)
  }
  return files.sort()
}

/** Scan the repository at `root`. */
export function scanRepository(root: string): Scan {
  const scanner = new Scanner(root)
  for (const file of scannedFiles(root)) scanFile(scanner, file, readFileSync(file, 'utf8'))
  return scanner.scan
}
