// The library (packages/sluice) carries no runtime dependency: from every entry of its entries.json,
// the import graph of its sources (type imports and dynamic imports included) stays inside
// packages/sluice/src and imports no package but Node's own and the optional peers its package.json
// declares (Redis and PostgreSQL clients, memjs, the frameworks, prom-client). The service
// (packages/sluice-server) reaches the library only through the entries `sluice` publishes.
import { existsSync, readFileSync } from 'node:fs'
import { builtinModules } from 'node:module'
import { dirname, join, relative } from 'node:path'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

const ROOT = join(import.meta.dirname, '..', '..')
const LIBRARY = 'packages/sluice'
const SERVER = 'packages/sluice-server'

const readJson = (file: string) =>
  JSON.parse(readFileSync(join(ROOT, file), 'utf8')) as Record<string, unknown>

/** `ioredis`, `@grpc/grpc-js`, `hono/route` -> the package's name. */
const packageName = (specifier: string) =>
  specifier
    .split('/')
    .slice(0, specifier.startsWith('@') ? 2 : 1)
    .join('/')

/** Every module reached from `entries`, and every package each one imports (comments ignored). */
function importGraph(entries: readonly string[]) {
  const modules = new Set<string>()
  const packages: { from: string; name: string }[] = []
  const pending = [...entries]
  while (pending.length > 0) {
    const file = pending.pop()!
    if (modules.has(file)) continue
    modules.add(file)
    const { importedFiles } = ts.preProcessFile(readFileSync(join(ROOT, file), 'utf8'), true, true)
    for (const { fileName: specifier } of importedFiles) {
      if (!specifier.startsWith('.')) {
        if (!specifier.startsWith('node:') && !builtinModules.includes(specifier))
          packages.push({ from: file, name: specifier })
        continue
      }
      const target = relative(ROOT, join(ROOT, dirname(file), specifier.replace(/\.js$/, '.ts')))
      if (target.endsWith('.ts') && existsSync(join(ROOT, target))) pending.push(target)
      else if (!existsSync(join(ROOT, target))) throw new Error(`${file}: cannot resolve ${specifier}`)
    }
  }
  return { modules, packages }
}

const libraryEntries = () =>
  Object.values(readJson(`${LIBRARY}/entries.json`) as Record<string, string>).map(
    (file) => `${LIBRARY}/${file}`,
  )

describe("the library's dependencies", () => {
  const manifest = readJson(`${LIBRARY}/package.json`) as {
    dependencies?: object
    peerDependencies: Record<string, string>
    peerDependenciesMeta: Record<string, { optional?: boolean }>
  }

  it('declares no dependency, and every peer is optional', () => {
    expect(manifest.dependencies).toBeUndefined()
    for (const peer of Object.keys(manifest.peerDependencies))
      expect(manifest.peerDependenciesMeta[peer]?.optional, peer).toBe(true)
  })

  it('imports only Node and its optional peers, from every entry', () => {
    const graph = importGraph(libraryEntries())
    // The modules that validate options and talk to stores are in the graph: the walk looks where imports are.
    for (const file of [
      'src/policy.ts',
      'src/http/core.ts',
      'src/stores/redis/index.ts',
      'src/metrics/prometheus.ts',
    ])
      expect(graph.modules).toContain(`${LIBRARY}/${file}`)
    const undeclared = graph.packages.filter(({ name }) => !(packageName(name) in manifest.peerDependencies))
    expect(undeclared).toEqual([])
  })

  it('stays inside packages/sluice/src', () => {
    const { modules } = importGraph(libraryEntries())
    expect([...modules].filter((file) => !file.startsWith(`${LIBRARY}/src/`))).toEqual([])
  })
})

describe("the service's use of the library", () => {
  const published = new Set(
    Object.keys(readJson(`${LIBRARY}/entries.json`)).map((name) =>
      name === 'index' ? 'sluice' : `sluice/${name}`,
    ),
  )
  const graph = importGraph([`${SERVER}/src/index.ts`, `${SERVER}/src/cli.ts`])

  it('goes through the entries sluice publishes, never into its files', () => {
    expect([...graph.modules].filter((file) => !file.startsWith(`${SERVER}/src/`))).toEqual([])
    const fromLibrary = graph.packages.filter(({ name }) => packageName(name) === 'sluice')
    expect(fromLibrary.length).toBeGreaterThan(0)
    expect(fromLibrary.filter(({ name }) => !published.has(name))).toEqual([])
  })

  it('depends on everything it imports, and on sluice by its exact version', () => {
    const manifest = readJson(`${SERVER}/package.json`) as {
      dependencies: Record<string, string>
      peerDependencies: Record<string, string>
    }
    const library = readJson(`${LIBRARY}/package.json`) as { version: string }
    expect(manifest.dependencies.sluice).toBe(library.version)
    const undeclared = graph.packages.filter(
      ({ name }) =>
        !(packageName(name) in manifest.dependencies) && !(packageName(name) in manifest.peerDependencies),
    )
    expect(undeclared).toEqual([])
  })
})
