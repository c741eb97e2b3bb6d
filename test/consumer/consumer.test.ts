// The built package as a user gets it: dist/ imported by the package's name from ESM, required from
// CommonJS, and an exports map whose every target exists. TypeScript consumers are checked against
// the packed tarball, installed without the repo's devDependencies: packed.test.ts.
// Needs `npm run build` first (`npm test` builds before it runs).
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { beforeAll, describe, expect, it } from 'vitest'

const run = promisify(execFile)
const root = fileURLToPath(new URL('../..', import.meta.url))
const fixtures = join(root, 'test/consumer/fixtures')

async function node(file: string): Promise<Record<string, unknown>> {
  const { stdout } = await run(process.execPath, [file], { cwd: root, timeout: 20_000 })
  return JSON.parse(stdout) as Record<string, unknown>
}

beforeAll(() => {
  if (!existsSync(join(root, 'dist/index.js')))
    throw new Error('dist/ is missing: run `npm run build` (npm test builds first)')
})

describe('the built package', () => {
  it('imports by name from ESM, resolved to dist/index.js', async () => {
    const out = await node(join(fixtures, 'esm.mjs'))
    expect(out.url).toBe(new URL('dist/index.js', `file://${root}`).href)
    expect(out.allowed).toEqual([true, true, false])
    expect(out.retryAfterMs).toBeGreaterThan(0)
    expect(out.code).toBe('SLUICE_INVALID_KEY')
    expect(out.exports).toEqual(expect.arrayContaining(['createLimiter', 'memoryStore', 'SluiceError']))
  })

  it('requires by name from CommonJS, resolved to dist/index.cjs', async () => {
    const out = await node(join(fixtures, 'cjs.cjs'))
    expect(out.path).toBe(join(root, 'dist/index.cjs'))
    expect(out.allowed).toEqual([true, false])
    expect(out.code).toBe('SLUICE_INVALID_POLICY')
  })

  it('ESM and CommonJS builds export the same names', async () => {
    const esm = await node(join(fixtures, 'esm.mjs'))
    const cjs = await node(join(fixtures, 'cjs.cjs'))
    expect(cjs.exports).toEqual(esm.exports)
  })

  it('runs the README example (examples/basic.mjs)', async () => {
    const { stdout } = await run(process.execPath, [join(root, 'examples/basic.mjs')], {
      cwd: root,
      timeout: 20_000,
    })
    expect(stdout).toContain('api user-42: allowed=true remaining=19/20')
    expect(stdout).toContain('after cost 5: remaining=14')
    expect(stdout).toContain('layered: allowed=true tightest=perUser remaining=99')
    // The example runs on the real clock: the wait is at most one token's 100 ms, less what passed.
    const wait = Number(/denied: allowed=false reason=limit retryAfterMs=(\d+)\n/.exec(stdout)?.[1])
    expect(wait).toBeGreaterThan(0)
    expect(wait).toBeLessThanOrEqual(100)
    const [, before, after] = /refund: remaining (\d+) -> (\d+)\n/.exec(stdout) ?? []
    expect(Number(after)).toBeGreaterThanOrEqual(Number(before) + 1)
    expect(stdout).toContain('reset: remaining=20')
    expect(stdout).toContain('error: SLUICE_INVALID_COST')
  })
})

describe('every target in package.json "exports" exists', () => {
  it('walks the whole map (new subpaths are checked without changes here)', async () => {
    const pkg = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as {
      name: string
      exports: unknown
      bin?: Record<string, string>
      main?: string
      module?: string
      types?: string
    }
    expect(pkg.name).toBe('sluice')
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
    const missing = targets.filter((t) => !t.startsWith('./') || !existsSync(join(root, t)))
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
