// The library imports nothing of the service's stack: from src/index.ts and every public subpath
// entry of tsup.config.ts except `server`, the import graph of the sources (type imports and
// dynamic imports included) reaches no schema library, YAML parser, logger or gRPC package, and no
// module of src/server, src/envoy or src/cli.ts.
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

const ROOT = join(import.meta.dirname, '..', '..')
const SERVICE_ONLY = /^(zod|yaml|pino|@grpc\/.*)$/
const SERVICE_MODULES = /^src\/(server\/|envoy\/|cli\.ts$)/

/** The public entries tsup builds: `name: 'src/...'` lines of its `publicEntries`. */
function publicEntries(): Record<string, string> {
  const config = readFileSync(join(ROOT, 'tsup.config.ts'), 'utf8')
  const block = /const publicEntries = \{([^}]*)\}/.exec(config)?.[1] ?? ''
  return Object.fromEntries([...block.matchAll(/(\w+): '(src\/[^']+)'/g)].map((m) => [m[1]!, m[2]!]))
}

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
        if (!specifier.startsWith('node:')) packages.push({ from: file, name: specifier })
        continue
      }
      const target = relative(ROOT, join(ROOT, dirname(file), specifier.replace(/\.js$/, '.ts')))
      if (target.endsWith('.ts') && existsSync(join(ROOT, target))) pending.push(target)
      else if (!existsSync(join(ROOT, target))) throw new Error(`${file}: cannot resolve ${specifier}`)
    }
  }
  return { modules, packages }
}

const serviceImports = (graph: ReturnType<typeof importGraph>) =>
  graph.packages.filter(({ name }) => SERVICE_ONLY.test(name))

describe("the library's import graph", () => {
  const entries = publicEntries()
  const library = Object.entries(entries)
    .filter(([name]) => name !== 'server')
    .map(([, file]) => file)

  it('starts at src/index.ts and every public subpath but the service', () => {
    expect(entries.index).toBe('src/index.ts')
    expect(entries.server).toBe('src/server/index.ts')
    expect(library).toEqual(expect.arrayContaining(['src/index.ts', 'src/stores/redis/index.ts']))
    expect(library.length).toBeGreaterThanOrEqual(8)
  })

  it('imports no zod, yaml, pino or @grpc package', () => {
    const graph = importGraph(library)
    // The modules that validate options are in the graph: the check looks where the imports were.
    for (const file of [
      'src/policy.ts',
      'src/failover/options.ts',
      'src/http/core.ts',
      'src/stores/redis/index.ts',
      'src/stores/postgres/index.ts',
    ])
      expect(graph.modules).toContain(file)
    expect(serviceImports(graph)).toEqual([])
  })

  it('reaches no module of the service', () => {
    const { modules } = importGraph(library)
    expect([...modules].filter((file) => SERVICE_MODULES.test(file))).toEqual([])
  })

  it("finds the service's own imports when walked from the service (the walk sees them)", () => {
    const names = new Set(
      serviceImports(importGraph([entries.server!, 'src/cli.ts'])).map(({ name }) => name),
    )
    for (const wanted of [/^zod$/, /^yaml$/, /^pino$/, /^@grpc\//])
      expect(
        [...names].some((name) => wanted.test(name)),
        String(wanted),
      ).toBe(true)
  })
})
