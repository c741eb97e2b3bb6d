// The public surface as a user's compiler sees it: every entry point's built .d.ts in both packages
// (run `npm run -s build` first), loaded with the TypeScript API. One exported name means one thing
// across the packages (the same declaration from every entry that exports it), and each entry's
// export list is pinned below: a change to it is a reviewed change to this file.
import { existsSync, readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

const ROOT = resolve(import.meta.dirname, '..', '..')
/** Every entry point of both packages by its specifier (`sluice`, `sluice/redis`, `sluice-server`). */
const entries = ['packages/sluice', 'packages/sluice-server'].flatMap((dir) => {
  const pkg = JSON.parse(readFileSync(resolve(ROOT, dir, 'package.json'), 'utf8')) as {
    name: string
    exports: Record<string, { import: { types: string } }>
  }
  return Object.entries(pkg.exports)
    .filter(([, target]) => typeof target === 'object' && target.import?.types !== undefined)
    .map(([subpath, target]) => ({
      subpath: subpath === '.' ? pkg.name : `${pkg.name}/${subpath.slice(2)}`,
      file: resolve(ROOT, dir, target.import.types),
    }))
})

interface Exported {
  name: string
  /** Where it is declared: file and offset of every declaration (after following re-exports). */
  where: string
}

function exportsOf(): Map<string, Exported[]> {
  for (const { file } of entries)
    if (!existsSync(file)) throw new Error(`${file} is missing: run npm run -s build first`)
  const program = ts.createProgram(
    entries.map((e) => e.file),
    { strict: true, noEmit: true, skipLibCheck: true, module: ts.ModuleKind.NodeNext },
  )
  const checker = program.getTypeChecker()
  const out = new Map<string, Exported[]>()
  for (const { subpath, file } of entries) {
    const source = program.getSourceFile(file)!
    const moduleSymbol = checker.getSymbolAtLocation(source)!
    const list: Exported[] = []
    for (const symbol of checker.getExportsOfModule(moduleSymbol)) {
      const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol
      const where = (target.declarations ?? [])
        .map((d) => `${d.getSourceFile().fileName.slice(ROOT.length)}:${d.getStart()}`)
        .sort()
        .join(' ')
      list.push({ name: symbol.getName(), where })
    }
    out.set(
      subpath,
      list.sort((a, b) => a.name.localeCompare(b.name)),
    )
  }
  return out
}

const surface = exportsOf()

describe('the exported names of every entry point', () => {
  it('one name, one declaration: no two entries export different things under one name', () => {
    const seen = new Map<string, { subpath: string; where: string }>()
    const clashes: string[] = []
    for (const [subpath, list] of surface) {
      for (const { name, where } of list) {
        // `default` is each adapter's own middleware by design (sluice/fastify's plugin).
        if (name === 'default') continue
        const first = seen.get(name)
        if (first === undefined) seen.set(name, { subpath, where })
        else if (first.where !== where)
          clashes.push(`${name}: ${first.subpath} (${first.where}) vs ${subpath} (${where})`)
      }
    }
    // The adapters' middleware factory is `sluice` in each framework's subpath: one name per
    // framework on purpose (import { sluice } from 'sluice/express').
    const allowed = (c: string) => c.startsWith('sluice: ')
    expect(clashes.filter((c) => !allowed(c))).toEqual([])
  })

  it('pins the export list of each entry (review a change here by hand)', () => {
    const names = Object.fromEntries(
      [...surface].map(([subpath, list]) => [subpath, list.map((e) => e.name)]),
    )
    expect(names).toMatchSnapshot()
  })
})
