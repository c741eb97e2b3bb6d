// The machinery of the packed tests (packed.test.ts, packed-server.test.ts, docs.test.ts): `npm pack`
// of both packages once per test file, fresh `npm init -y` projects installed from the tarballs (one
// shared npm cache), node and npx runs in them, what an install put in node_modules, and tsc over
// every project on each compiler and module resolution. What each project holds is in the tests.
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { lstat, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const exec = promisify(execFile)
export const root = fileURLToPath(new URL('../..', import.meta.url))
const cache = process.env.SLUICE_CONSUMER_NPM_CACHE ?? join(tmpdir(), 'sluice-consumer-npm-cache')

/** The compilers every declaration is checked with, installed once as aliases in a tools project. */
export const COMPILERS = { ts5: '5.9.3', ts7: '7.0.2' } as const
type Compiler = keyof typeof COMPILERS
/** What a TypeScript user of Node has besides the packages under test. */
export const TYPES_NODE = '@types/node@20.19.43'

export interface PackageJson {
  name: string
  version: string
  exports: Record<string, unknown>
  dependencies?: Record<string, string>
  peerDependencies?: Record<string, string>
  bin?: Record<string, string>
  main?: string
  module?: string
  types?: string
}
/** The folder of each package in the repository, by package name. */
export const PACKAGE_DIRS = { sluice: 'packages/sluice', 'sluice-server': 'packages/sluice-server' } as const
type PackageName = keyof typeof PACKAGE_DIRS
const readPackage = async (name: PackageName) =>
  JSON.parse(await readFile(join(root, PACKAGE_DIRS[name], 'package.json'), 'utf8')) as PackageJson
/** The library's package.json. */
export const library = await readPackage('sluice')
/** The service's package.json. */
export const server = await readPackage('sluice-server')

/** Stand for the packed tarballs in `installProjects`' dependency lists. */
export const LIBRARY = '<sluice tarball>'
export const SERVER = '<sluice-server tarball>'
const TOKENS: Record<string, PackageName> = { [LIBRARY]: 'sluice', [SERVER]: 'sluice-server' }

/** Subpaths of the library that import their peer when loaded (the others load with no peer installed). */
export const PEER_LOADED_BY: Readonly<Record<string, string>> = { 'sluice/hono': 'hono' }
/** Every entry of the library's "exports" as a specifier: `sluice`, `sluice/redis`, ... */
export const LIBRARY_SPECIFIERS = Object.keys(library.exports)
  .filter((k) => k !== './package.json')
  .map((k) => (k === '.' ? 'sluice' : `sluice/${k.slice(2)}`))
/** Every entry that loads without any peer installed (a new one is checked unasked). */
export const NO_PEER_SPECIFIERS = LIBRARY_SPECIFIERS.filter((s) => PEER_LOADED_BY[s] === undefined)

/** The lowest version a `>=X[.Y[.Z]]` peer range of `of` admits: the version the peer is tested at. */
export function lowest(peer: string, of: PackageJson = library): string {
  const range = of.peerDependencies?.[peer] ?? ''
  const m = /^>=(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(range)
  if (m === null) throw new Error(`${of.name}'s peer ${peer}: range ${JSON.stringify(range)} is not >=X.Y.Z`)
  return `${m[1]}.${m[2] ?? 0}.${m[3] ?? 0}`
}

/** The temporary folder that holds the tarballs and every project. */
let work = ''
const projects = new Map<string, string>()

/** What `npm pack --json` says of one tarball. */
export interface Packed {
  /** Absolute path of the .tgz. */
  file: string
  /** Bytes of the .tgz. */
  size: number
  /** Paths inside the package, as npm lists them. */
  files: string[]
}
const tarballs = new Map<PackageName, Packed>()

export function packed(name: PackageName): Packed {
  const tarball = tarballs.get(name)
  if (tarball === undefined) throw new Error(`${name} was not packed`)
  return tarball
}

/**
 * The environment of every npm and npx run: without the `npm_*` variables of an `npm test` that
 * started the tests (its config would reach into the projects), and without the store and admin
 * variables (a developer's REDIS_URL must not change what `sluice serve` uses).
 */
function userEnv(): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)))
  return { ...env, SLUICE_STORE: '', REDIS_URL: '', SLUICE_ADMIN_TOKEN: '' }
}

async function npm(cwd: string, args: string[]): Promise<string> {
  const { stdout } = await exec(
    'npm',
    [...args, '--cache', cache, '--no-audit', '--no-fund', '--loglevel=error'],
    { cwd, env: userEnv(), timeout: 150_000, maxBuffer: 16 << 20 },
  )
  return stdout
}

/** A fresh `npm init -y` project with `deps` installed in one `npm install`. */
async function project(name: string, deps: string[]): Promise<void> {
  const dir = join(work, name)
  await mkdir(dir)
  await npm(dir, ['init', '-y'])
  await npm(dir, ['install', ...deps])
  projects.set(name, dir)
}

export function dirOf(name: string): string {
  const dir = projects.get(name)
  if (dir === undefined) throw new Error(`project ${name} was not installed`)
  return dir
}

export interface Ran {
  code: number
  stdout: string
  stderr: string
}

async function ran(command: string, args: string[], cwd: string, timeout: number): Promise<Ran> {
  try {
    const { stdout, stderr } = await exec(command, args, { cwd, timeout, env: userEnv() })
    return { code: 0, stdout, stderr }
  } catch (error) {
    const e = error as { code?: unknown; stdout?: string; stderr?: string }
    return {
      code: typeof e.code === 'number' ? e.code : -1,
      stdout: e.stdout ?? '',
      stderr: e.stderr ?? String(error),
    }
  }
}

export function node(cwd: string, args: string[], timeout = 20_000): Promise<Ran> {
  return ran(process.execPath, args, cwd, timeout)
}

/** `npx --no <args>` in a project, as its user types it (--no: the command must be installed). */
export function npx(cwd: string, args: string[], timeout = 30_000): Promise<Ran> {
  return ran('npx', ['--no', '--loglevel=error', ...args], cwd, timeout)
}

/** A `sluice serve` started with npx, once it printed its URL. */
export interface Serving {
  url: string
  /** What the command printed on stdout and stderr so far. */
  output: () => string
  stop: () => Promise<void>
}

/**
 * `npx sluice serve <args>` in a project. npx runs the command in a child of its own, which a
 * signal to npx does not reach: the command gets a process group of its own, and `stop` signals the
 * whole group (npx, its shell and the server) and waits for npx to exit.
 */
export async function serve(cwd: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<Serving> {
  const child: ChildProcess = spawn('npx', ['--no', '--loglevel=error', 'sluice', 'serve', ...args], {
    cwd,
    env: { ...userEnv(), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  })
  let printed = ''
  const collect = (chunk: Buffer) => {
    printed += chunk.toString()
  }
  child.stdout?.on('data', collect)
  child.stderr?.on('data', collect)
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const stop = async () => {
    // The group, even when npx has exited: the server may outlive it.
    try {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGTERM')
    } catch {
      // The whole group is gone.
    }
    await exited
  }
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no URL within 20 s: ${printed}`)), 20_000)
      child.stdout?.on('data', () => {
        const m = /sluice serving on (http:\/\/\S+) /.exec(printed)
        if (m !== null) {
          clearTimeout(timer)
          resolve(m[1] as string)
        }
      })
      child.once('exit', (code) => {
        clearTimeout(timer)
        reject(new Error(`exited ${code}: ${printed}`))
      })
    })
    return { url, output: () => printed, stop }
  } catch (error) {
    await stop()
    throw error
  }
}

/** The packages an install put in a project: every entry of its package-lock.json, by name. */
export async function installedPackages(dir: string): Promise<string[]> {
  const lock = JSON.parse(await readFile(join(dir, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, unknown>
  }
  return Object.keys(lock.packages)
    .filter((path) => path !== '')
    .map((path) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length))
    .sort()
}

/** Bytes of the regular files under `dir` (apparent sizes: the same on every file system). */
export async function bytesUnder(dir: string): Promise<number> {
  let total = 0
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) total += await bytesUnder(path)
    else if (entry.isFile()) total += (await lstat(path)).size
  }
  return total
}

/** Each way a consumer resolves modules; every project's TypeScript is checked under all of them. */
interface Resolution {
  name: string
  module: string
  /** Omitted: the compiler's default for `module`. */
  moduleResolution?: string
  /** node16/nodenext check a CommonJS file (.ts in a "type": "commonjs" project) and an ESM one (.mts). */
  esm: boolean
}
function resolutions(compiler: Compiler): Resolution[] {
  return [
    { name: 'node16', module: 'node16', moduleResolution: 'node16', esm: true },
    { name: 'nodenext', module: 'nodenext', moduleResolution: 'nodenext', esm: true },
    { name: 'bundler', module: 'esnext', moduleResolution: 'bundler', esm: false },
    // node10 is what `module: commonjs` means on TypeScript 5; TypeScript 7 removed node10 and resolves
    // `module: commonjs` its own way (with "exports"), so there it is left to the default.
    compiler === 'ts5'
      ? { name: 'commonjs', module: 'commonjs', moduleResolution: 'node10', esm: false }
      : { name: 'commonjs', module: 'commonjs', esm: false },
  ]
}

/**
 * `tsc --noEmit --strict` with skipLibCheck off, for every compiler and resolution, over every
 * project's app.ts (and app.mts where the resolution has ESM files). One compiler run covers all
 * projects: each file resolves packages from its own project's node_modules, so an adapter still
 * sees only its framework. Resolves to tsc's output lines per run that failed. Runs once: every
 * caller passes the same sources.
 */
let checked: Promise<Map<string, string[]>> | undefined
function typecheckAll(sources: ReadonlyMap<string, string>): Promise<Map<string, string[]>> {
  checked ??= (async () => {
    for (const [name, source] of sources) {
      await writeFile(join(dirOf(name), 'app.ts'), source)
      await writeFile(join(dirOf(name), 'app.mts'), source)
    }
    // The configs live in the first project, whose @types/node the `types` option finds (every
    // project that is type-checked installs the same one).
    const [first] = sources.keys()
    if (first === undefined) throw new Error('no sources to type-check')
    const jobs: Array<{ label: string; tsc: string; config: string }> = []
    for (const compiler of Object.keys(COMPILERS) as Compiler[]) {
      for (const r of resolutions(compiler)) {
        const config = join(dirOf(first), `tsconfig.${compiler}.${r.name}.json`)
        const compilerOptions = {
          module: r.module,
          ...(r.moduleResolution === undefined ? {} : { moduleResolution: r.moduleResolution }),
          target: 'es2022',
          strict: true,
          exactOptionalPropertyTypes: true,
          noUncheckedIndexedAccess: true,
          esModuleInterop: true,
          skipLibCheck: false,
          noEmit: true,
          types: ['node'],
        }
        const files = [...sources.keys()].flatMap((name) =>
          (r.esm ? ['app.ts', 'app.mts'] : ['app.ts']).map((f) => join(dirOf(name), f)),
        )
        await writeFile(config, JSON.stringify({ compilerOptions, files }, null, 2))
        jobs.push({
          label: `${compiler} (typescript ${COMPILERS[compiler]}) ${r.name}`,
          tsc: join(dirOf('tools'), 'node_modules', compiler, 'bin', 'tsc'),
          config,
        })
      }
    }
    const failures = new Map<string, string[]>()
    // Two at a time: the machine has two cores.
    for (let i = 0; i < jobs.length; i += 2) {
      await Promise.all(
        jobs.slice(i, i + 2).map(async (job) => {
          const out = await node(work, [job.tsc, '-p', job.config], 120_000)
          if (out.code !== 0)
            failures.set(
              job.label,
              `${out.stdout}${out.stderr}`.split('\n').filter((l) => l !== ''),
            )
        }),
      )
    }
    return failures
  })()
  return checked
}

/** The failures of `typecheckAll` that concern one project (its files and its node_modules). */
export async function typecheck(sources: ReadonlyMap<string, string>, name: string): Promise<string[]> {
  const out: string[] = []
  for (const [label, lines] of await typecheckAll(sources)) {
    // Continuation lines (indented) belong to the error above them.
    let mine = false
    const kept = lines.filter((line) => {
      if (!/^\s/.test(line)) mine = line.startsWith(`${name}/`) || !/^[\w-]+\//.test(line)
      return mine
    })
    if (kept.length > 0) out.push(`${label}:\n${kept.join('\n')}`)
  }
  return out
}

/** `npm pack` of one package into `dest`. */
async function pack(name: PackageName, dest: string): Promise<Packed> {
  const [out] = JSON.parse(
    await npm(join(root, PACKAGE_DIRS[name]), ['pack', '--json', '--pack-destination', dest]),
  ) as Array<{ filename: string; size: number; files: Array<{ path: string }> }>
  if (out === undefined) throw new Error(`npm pack of ${name} wrote no tarball`)
  return { file: join(dest, out.filename), size: out.size, files: out.files.map((f) => f.path).sort() }
}

/**
 * Pack both packages and install `projects` (name -> dependencies; `LIBRARY` and `SERVER` stand
 * for the tarballs), plus a `tools` project with the compilers. A project that needs sluice-server
 * lists both tarballs: installed together, npm takes `sluice` from its tarball (the registry has
 * none at this version).
 */
export async function installProjects(wanted: Record<string, string[]>): Promise<void> {
  for (const dir of Object.values(PACKAGE_DIRS))
    if (!existsSync(join(root, dir, 'dist/index.js')))
      throw new Error(`${dir}/dist is missing: run \`npm run build\` (npm test builds first)`)
  work = await mkdtemp(join(tmpdir(), 'sluice-packed-'))
  await mkdir(join(work, 'pack'))
  for (const name of Object.keys(PACKAGE_DIRS) as PackageName[])
    tarballs.set(name, await pack(name, join(work, 'pack')))
  // Installs are network-bound: all projects at once. The compilers go into a project of their own.
  const tools = Object.entries(COMPILERS).map(([alias, version]) => `${alias}@npm:typescript@${version}`)
  await Promise.all([
    project('tools', tools),
    ...Object.entries(wanted).map(([name, deps]) =>
      project(
        name,
        deps.map((d) => {
          const token = TOKENS[d]
          return token === undefined ? d : packed(token).file
        }),
      ),
    ),
  ])
}

/** Remove every project, unless SLUICE_CONSUMER_KEEP is set (to look at what failed). */
export async function removeProjects(): Promise<void> {
  if (work !== '' && process.env.SLUICE_CONSUMER_KEEP === undefined)
    await rm(work, { recursive: true, force: true })
}
