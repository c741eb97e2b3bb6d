// The built packages as the repository resolves them: `sluice` through its workspace link
// (node_modules/sluice -> packages/sluice), imported by name from ESM, required from CommonJS, and
// each package's exports map, whose every target exists. The packed tarballs, installed without the
// repo's devDependencies: packed.test.ts and packed-server.test.ts.
// Needs `npm run build` first (`npm test` builds before it runs).
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import { beforeAll, describe, expect, it } from 'vitest'
import { expectBasicOutput } from './basic-example.js'

const run = promisify(execFile)
const root = fileURLToPath(new URL('../..', import.meta.url))
const fixtures = join(root, 'test/consumer/fixtures')

async function node(file: string): Promise<Record<string, unknown>> {
  const { stdout } = await run(process.execPath, [file], { cwd: root, timeout: 20_000 })
  return JSON.parse(stdout) as Record<string, unknown>
}

const libraryDist = join(root, 'packages/sluice/dist')

beforeAll(() => {
  for (const name of ['sluice', 'sluice-server'])
    if (!existsSync(join(root, 'packages', name, 'dist/index.js')))
      throw new Error(`packages/${name}/dist is missing: run \`npm run build\` (npm test builds first)`)
})

describe('the built library', () => {
  it('imports by name from ESM, resolved to packages/sluice/dist/index.js', async () => {
    const out = await node(join(fixtures, 'esm.mjs'))
    expect(out.url).toBe(pathToFileURL(join(libraryDist, 'index.js')).href)
    expect(out.allowed).toEqual([true, true, false])
    expect(out.retryAfterMs).toBeGreaterThan(0)
    expect(out.code).toBe('SLUICE_INVALID_KEY')
    expect(out.exports).toEqual(expect.arrayContaining(['createLimiter', 'memoryStore', 'SluiceError']))
  })

  it('requires by name from CommonJS, resolved to packages/sluice/dist/index.cjs', async () => {
    const out = await node(join(fixtures, 'cjs.cjs'))
    expect(out.path).toBe(join(libraryDist, 'index.cjs'))
    expect(out.allowed).toEqual([true, false])
    expect(out.code).toBe('SLUICE_INVALID_POLICY')
  })

  it('ESM and CommonJS builds export the same names', async () => {
    const esm = await node(join(fixtures, 'esm.mjs'))
    const cjs = await node(join(fixtures, 'cjs.cjs'))
    expect(cjs.exports).toEqual(esm.exports)
  })

  it('runs the README example from the repository (`node examples/basic.mjs`)', async () => {
    const { stdout } = await run(process.execPath, [join(root, 'examples/basic.mjs')], {
      cwd: root,
      timeout: 20_000,
    })
    expectBasicOutput(stdout)
  })
})

describe.each([
  ['sluice', 'packages/sluice'],
  ['sluice-server', 'packages/sluice-server'],
])('every target in %s\'s package.json "exports" exists', (name, dir) => {
  it('walks the whole map (new subpaths are checked without changes here)', async () => {
    const pkg = JSON.parse(await readFile(join(root, dir, 'package.json'), 'utf8')) as {
      name: string
      exports: unknown
      bin?: Record<string, string>
      main?: string
      module?: string
      types?: string
    }
    expect(pkg.name).toBe(name)
    const targets: string[] = []
    const walk = (node: unknown, where: string): void => {
      if (typeof node === 'string') targets.push(node)
      else if (node !== null && typeof node === 'object')
        for (const [k, v] of Object.entries(node)) walk(v, `${where}.${k}`)
      else throw new Error(`exports${where}: unexpected ${String(node)}`)
    }
    walk(pkg.exports, '')
    for (const extra of [pkg.main, pkg.module, pkg.types, ...Object.values(pkg.bin ?? {})])
      if (extra !== undefined) targets.push(extra)
    expect(targets.length).toBeGreaterThanOrEqual(5)
    const missing = targets.filter((t) => !t.startsWith('./') || !existsSync(join(root, dir, t)))
    expect(missing, 'exports targets missing from the build (or not ./-relative)').toEqual([])
    // Every subpath that has an import condition has a require one too, with types for both.
    for (const [subpath, entry] of Object.entries(pkg.exports as Record<string, unknown>)) {
      if (typeof entry !== 'object' || entry === null) continue
      const conditions = entry as Record<string, { types?: string; default?: string } | string>
      if ('import' in conditions) {
        expect(conditions.require, `${subpath} has import but no require`).toBeDefined()
        for (const kind of ['import', 'require'] as const) {
          const c = conditions[kind]
          expect(typeof c === 'object' && c.types, `${subpath}.${kind}.types`).toBeTruthy()
        }
      }
    }
  })
})
