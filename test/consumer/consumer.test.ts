// The built package as a user gets it: dist/ imported by the package's name from ESM, required from
// CommonJS, type-checked from TypeScript, and an exports map whose every target exists.
// Needs `npm run build` first (`npm test` builds before it runs).
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

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

describe('a TypeScript consumer type-checks against dist types', () => {
  let dir = ''
  beforeAll(async () => {
    // A project outside the package, with sluice installed (as a symlink) in its node_modules.
    dir = await mkdtemp(join(tmpdir(), 'sluice-consumer-'))
    await rm(join(dir, 'node_modules'), { recursive: true, force: true })
    await run('mkdir', ['-p', join(dir, 'node_modules')])
    await symlink(root, join(dir, 'node_modules/sluice'), 'dir')
    await writeFile(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'es2022',
          strict: true,
          exactOptionalPropertyTypes: true,
          noUncheckedIndexedAccess: true,
          noEmit: true,
          types: [],
          skipLibCheck: false,
        },
        files: ['esm.mts', 'cjs.cts'],
      }),
    )
    const body = `
const limiter = createLimiter({
  policies: {
    api: { algorithm: 'token-bucket', limit: 10, window: '1s', burst: 20 },
    jobs: { algorithm: 'concurrency', limit: 2, timeout: '30s' },
  },
})
export async function check(): Promise<void> {
  const d: Decision = await limiter.consume('api', 'k', { cost: 2 })
  const n: number = d.retryAfterMs + d.resetMs + d.remaining + d.limit
  const l: LayeredDecision = await limiter.consume([{ policy: 'api', key: 'k' }])
  const by: string | undefined = l.deniedBy
  const lease = (await limiter.acquire('jobs', 'w')).lease
  await lease?.release()
  const s: Decision = limiter.consumeSync('api', 'k')
  const store: MemoryStore = memoryStore({ maxKeys: 10 })
  // @ts-expect-error 'typo' is not a configured policy
  await limiter.consume('typo', 'k')
  // @ts-expect-error remaining is a number
  const wrong: string = d.remaining
  void [n, by, s, store, wrong, SluiceError]
}
`
    await writeFile(
      join(dir, 'esm.mts'),
      `import { createLimiter, memoryStore, SluiceError, type Decision, type LayeredDecision, type MemoryStore } from 'sluice'\n${body}`,
    )
    await writeFile(
      join(dir, 'cjs.cts'),
      `import sluice = require('sluice')\nimport { createLimiter, memoryStore, SluiceError } from 'sluice'\ntype Decision = sluice.Decision\ntype LayeredDecision = sluice.LayeredDecision\ntype MemoryStore = sluice.MemoryStore\n${body}`,
    )
  })
  afterAll(async () => {
    if (dir !== '') await rm(dir, { recursive: true, force: true })
  })

  it('tsc accepts the consumer, resolving index.d.ts for ESM and index.d.cts for CommonJS', async () => {
    const tsc = join(root, 'node_modules/typescript/bin/tsc')
    const { stdout } = await run(process.execPath, [tsc, '-p', dir, '--listFiles'], {
      cwd: dir,
      timeout: 60_000,
    }).catch((error: { stdout?: string }) => {
      throw new Error(`tsc failed on the consumer:\n${error.stdout ?? String(error)}`)
    })
    const files = stdout.split('\n').map((f) => f.trim())
    expect(files.some((f) => f.endsWith('/dist/index.d.ts'))).toBe(true)
    expect(files.some((f) => f.endsWith('/dist/index.d.cts'))).toBe(true)
  }, 70_000)

  it('and rejects a consumer that misuses the API (the check can fail)', async () => {
    await writeFile(
      join(dir, 'esm.mts'),
      `import { createLimiter } from 'sluice'\nconst l = createLimiter({ policies: { api: { algorithm: 'gcra', limit: 1, window: '1s' } } })\nexport const p = l.consume('typo', 'k')\n`,
    )
    const tsc = join(root, 'node_modules/typescript/bin/tsc')
    const failed = await run(process.execPath, [tsc, '-p', dir], { cwd: dir, timeout: 60_000 }).then(
      () => false,
      (error: { stdout?: string }) => error.stdout ?? '',
    )
    expect(failed).toContain('typo')
  }, 70_000)
})
