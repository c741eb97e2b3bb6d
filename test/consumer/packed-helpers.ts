// The machinery of packed.test.ts: `npm pack` once, fresh `npm init -y` projects installed from the
// tarball (one shared npm cache), node runs in them, and tsc over every project on each compiler and
// module resolution. The tests, and what each project holds, are in packed.test.ts.
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
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
interface Pkg {
  exports: Record<string, unknown>
  peerDependencies: Record<string, string>
}
export const pkg = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as Pkg
/** Subpaths that import their peer when loaded (the others must load with no peer installed). */
const LOADS_A_PEER = new Set(['./hono'])
/** Every subpath of "exports" that loads without any peer installed (a new one is checked unasked). */
export const NO_PEER_SUBPATHS = Object.keys(pkg.exports)
  .filter((k) => k !== './package.json' && !LOADS_A_PEER.has(k))
  .map((k) => (k === '.' ? 'sluice' : `sluice/${k.slice(2)}`))

/** The lowest version a `>=X[.Y[.Z]]` peer range admits: the version the adapter is tested at. */
export function lowest(peer: string): string {
  const range = pkg.peerDependencies[peer] ?? ''
  const m = /^>=(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(range)
  if (m === null) throw new Error(`peer ${peer}: range ${JSON.stringify(range)} is not >=X.Y.Z`)
  return `${m[1]}.${m[2] ?? 0}.${m[3] ?? 0}`
}

/** The temporary folder that holds the tarball and every project. */
let work = ''
let tarball = ''
const projects = new Map<string, string>()

async function npm(cwd: string, args: string[]): Promise<string> {
  const { stdout } = await exec(
    'npm',
    [...args, '--cache', cache, '--no-audit', '--no-fund', '--loglevel=error'],
    {
      cwd,
      timeout: 150_000,
      maxBuffer: 16 << 20,
    },
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

export async function node(cwd: string, args: string[], timeout = 20_000): Promise<Ran> {
  try {
    const { stdout, stderr } = await exec(process.execPath, args, { cwd, timeout })
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
    const jobs: Array<{ label: string; tsc: string; config: string }> = []
    for (const compiler of Object.keys(COMPILERS) as Compiler[]) {
      for (const r of resolutions(compiler)) {
        // In the core project, whose @types/node the `types` option finds (every project has the same one).
        const config = join(dirOf('core'), `tsconfig.${compiler}.${r.name}.json`)
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

/** Stands for the packed tarball in `installProjects`' dependency lists. */
export const TARBALL = '<tarball>'

/** Pack the build and install `projects` (name -> dependencies; `TARBALL` stands for the package). */
export async function installProjects(projects: Record<string, string[]>): Promise<void> {
  if (!existsSync(join(root, 'dist/index.js')))
    throw new Error('dist/ is missing: run `npm run build` (npm test builds first)')
  work = await mkdtemp(join(tmpdir(), 'sluice-packed-'))
  await mkdir(join(work, 'pack'))
  await npm(root, ['pack', '--pack-destination', join(work, 'pack')])
  const [file] = (await readdir(join(work, 'pack'))).filter((f) => f.endsWith('.tgz'))
  if (file === undefined) throw new Error('npm pack wrote no tarball')
  tarball = join(work, 'pack', file)
  // Installs are network-bound: all projects at once. The compilers go into a project of their own.
  const tools = Object.entries(COMPILERS).map(([alias, version]) => `${alias}@npm:typescript@${version}`)
  await Promise.all([
    project('tools', tools),
    ...Object.entries(projects).map(([name, deps]) =>
      project(
        name,
        deps.map((d) => (d === TARBALL ? tarball : d)),
      ),
    ),
  ])
}

/** Remove every project, unless SLUICE_CONSUMER_KEEP is set (to look at what failed). */
export async function removeProjects(): Promise<void> {
  if (work !== '' && process.env.SLUICE_CONSUMER_KEEP === undefined)
    await rm(work, { recursive: true, force: true })
}
