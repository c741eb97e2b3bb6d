// A clone with nothing beside it runs its own suite: no test, script or config resolves a path
// outside the repository root (test/repository/outside-paths.ts computes each path from the file's
// own location). Planted snippets show what the scan catches and what it lets through.
import { join, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'
import { ALLOWED, scanRepository, scanSource, TMPDIR } from './outside-paths.js'

const ROOT = join(import.meta.dirname, '..', '..')

/**
 * Snippets and expected paths write `{up}` for the parent folder and `{abs}` for a leading slash,
 * so that the scan of this file itself does not find the paths they plant.
 */
const spelled = (text: string) => text.replaceAll('{up}', '.'.repeat(2)).replaceAll('{abs}', '/')
/** Where a spelled path points from the repository root. */
const outside = (path: string) => resolve(ROOT, spelled(path))

/** The scan's findings for `code` as if it were the file at `path`. */
function plant(path: string, code: string) {
  return scanSource(ROOT, join(ROOT, path), spelled(code)).findings.map(({ where, resolved }) => ({
    where,
    resolved,
  }))
}

describe('the repository', () => {
  const scan = scanRepository(ROOT)

  it('resolves no path outside the repository root, in tests, scripts, bench, .ci, examples or configs', () => {
    expect(scan.findings).toEqual([])
  })

  it('computes the paths the suite uses (the scan sees them, from where each file is)', () => {
    const at = (file: string) =>
      scan.resolved.filter((r) => r.where.startsWith(`${file}:`)).map((r) => r.path)
    expect(at('test/helpers/envoy.ts')).toContain(join(ROOT, 'test', 'fixtures', 'envoy-ratelimit'))
    expect(at('test/envoy/cli.test.ts')).toContain(join(ROOT, 'packages', 'sluice-server', 'dist', 'cli.js'))
    expect(at('test/consumer/exports.test.ts')).toContain(ROOT)
    expect(at('.ci/run')).toContain(ROOT)
    expect(scan.resolved.length).toBeGreaterThan(300)
  })

  it('uses every allowance it lists (an unused one is removed)', () => {
    for (const { prefix } of ALLOWED)
      expect(
        scan.resolved.some((r) => r.path === prefix || r.path.startsWith(`${prefix}/`)),
        prefix,
      ).toBe(true)
  })
})

describe('the scan catches', () => {
  it('a URL three folders up from test/envoy/', () => {
    const code = "export const FIXTURES = new URL('{up}/{up}/{up}/shared/envoy-ratelimit', import.meta.url)\n"
    expect(plant('test/envoy/helpers.ts', code)).toEqual([
      { where: 'test/envoy/helpers.ts:1', resolved: outside('{up}/shared/envoy-ratelimit') },
    ])
  })

  it("resolve(import.meta.dirname, '..', '..', '..', 'x') and the same through fileURLToPath or __dirname", () => {
    const code = [
      "import { resolve, join } from 'node:path'",
      "import { fileURLToPath } from 'node:url'",
      "const a = resolve(import.meta.dirname, '{up}', '{up}', '{up}', 'x')",
      "const b = join(fileURLToPath(new URL('.', import.meta.url)), '{up}/{up}/{up}/x')",
      "const c = join(__dirname, '{up}', '{up}', '{up}', 'x')",
    ].join('\n')
    expect(plant('test/repository/planted.ts', code)).toEqual(
      [3, 4, 5].map((line) => ({ where: `test/repository/planted.ts:${line}`, resolved: outside('{up}/x') })),
    )
  })

  it('a path built on a const, in a template, or from a namespace or require() of node:path', () => {
    const code = [
      "import path from 'node:path'",
      "const { join: to } = require('node:path')",
      "const root = path.resolve(import.meta.dirname, '{up}', '{up}')",
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the planted code holds a template
      'const shared = `${root}/{up}/shared`',
      "const other = to(root, '{up}', 'other')",
    ].join('\n')
    expect(plant('test/repository/planted.ts', code)).toEqual([
      { where: 'test/repository/planted.ts:4', resolved: outside('{up}/shared') },
      { where: 'test/repository/planted.ts:5', resolved: outside('{up}/other') },
    ])
  })

  it('literal paths: relative to the working directory, absolute, a file: URL, in a command line', () => {
    const code = [
      "readFileSync('{up}/shared/envoy-ratelimit/README.md', 'utf8')",
      "readFileSync('{abs}work/shared/envoy-ratelimit/README.md', 'utf8')",
      "readFileSync(new URL('file://{abs}home/ci/secrets.env'))",
      "execSync('cp -r {up}/shared/envoy-ratelimit test/fixtures')",
      "spawn('node', ['x.js'], { cwd: '{up}' })",
      "const allowedThenClimbed = '{abs}usr/bin/{up}/{up}/shared'",
    ].join('\n')
    expect(plant('test/repository/planted.ts', code)).toEqual([
      { where: 'test/repository/planted.ts:1', resolved: outside('{up}/shared/envoy-ratelimit/README.md') },
      {
        where: 'test/repository/planted.ts:2',
        resolved: spelled('{abs}work/shared/envoy-ratelimit/README.md'),
      },
      { where: 'test/repository/planted.ts:3', resolved: spelled('{abs}home/ci/secrets.env') },
      { where: 'test/repository/planted.ts:4', resolved: outside('{up}/shared/envoy-ratelimit') },
      { where: 'test/repository/planted.ts:5', resolved: outside('{up}') },
      { where: 'test/repository/planted.ts:6', resolved: spelled('{abs}shared') },
    ])
  })

  it('import specifiers, static and dynamic, that leave the repository', () => {
    const code = [
      "import data from '{up}/{up}/{up}/shared/data.json'",
      "export * from '{up}/{up}/{up}/shared/index.js'",
      "const later = await import('{up}/{up}/{up}/shared/later.js')",
    ].join('\n')
    expect(plant('test/repository/planted.ts', code).map((f) => f.resolved)).toEqual([
      outside('{up}/shared/data.json'),
      outside('{up}/shared/index.js'),
      outside('{up}/shared/later.js'),
    ])
  })

  it('a climb out of os.tmpdir(), and the home folder', () => {
    const code = [
      "import { homedir, tmpdir } from 'node:os'",
      "import { join } from 'node:path'",
      "const escaped = join(tmpdir(), '{up}', 'shared')",
      "const cache = join(homedir(), '.npm')",
    ].join('\n')
    expect(plant('test/repository/planted.ts', code)).toEqual([
      { where: 'test/repository/planted.ts:3', resolved: spelled('{abs}shared') },
      { where: 'test/repository/planted.ts:4', resolved: expect.stringMatching(/homedir.*\/\.npm$/) },
    ])
  })

  it('npm scripts, shell scripts and tsconfig paths', () => {
    expect(
      plant('package.json', '{\n  "scripts": { "pretest": "cp -r {up}/shared/envoy-ratelimit test/" }\n}\n'),
    ).toEqual([{ where: 'package.json:2', resolved: outside('{up}/shared/envoy-ratelimit') }])
    expect(plant('.ci/run', '#!/usr/bin/env bash\ncd "$(dirname "$0")/{up}/{up}"\n')).toEqual([
      { where: '.ci/run:2', resolved: outside('{up}') },
    ])
    expect(plant('tsconfig.json', '{ "include": ["src", "{up}/shared"] }')).toEqual([
      { where: 'tsconfig.json:1', resolved: outside('{up}/shared') },
    ])
  })

  it('climbs in any other text file, such as a helper in another language', () => {
    expect(plant('test/clients/helper.rb', "CONFIG = File.read('{up}/shared/x.yaml')\n")).toEqual([
      { where: 'test/clients/helper.rb:1', resolved: outside('{up}/shared/x.yaml') },
    ])
  })
})

describe('the scan lets through', () => {
  it('paths inside the repository, os.tmpdir(), the allowed system paths and unknown bases', () => {
    const code = [
      "import { tmpdir } from 'node:os'",
      "import { join } from 'node:path'",
      "import { fileURLToPath } from 'node:url'",
      "const CLI = fileURLToPath(new URL('{up}/{up}/dist/cli.js', import.meta.url))",
      "const scratch = join(tmpdir(), 'sluice-x-')",
      "const binaries = ['{abs}usr/sbin/nginx', '{abs}usr/bin/chromium', '{abs}usr/lib/postgresql']",
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the planted code holds a template
      'const status = (pid: number) => `{abs}proc/${pid}/status`',
      "const sibling = (dir: string) => join(dir, '{up}', 'other')",
      "const api = new URL('{abs}v1/{up}/check', 'http://127.0.0.1:8080')",
      "const route = '{abs}v1/check/{up}/reset'",
      "const lua = 'return a {up} b'",
      "import { x } from '{up}/{up}/src/index.js'",
    ].join('\n')
    expect(plant('test/repository/planted.ts', code)).toEqual([])
    expect(TMPDIR).not.toMatch(/^\/tmp\b/)
  })
})

describe('a clone whose top folder is also a route', () => {
  // The clone sits at /check/sluice (spelled, so that a scan of this file from a clone under /check
  // does not find the paths themselves).
  const root = spelled('{abs}check/sluice')
  const scanAt = (code: string) => [
    ...new Set(
      scanSource(root, join(root, 'test', 'repository', 'planted.ts'), spelled(code)).findings.map(
        (f) => f.resolved,
      ),
    ),
  ]

  it('lets the route through and catches the folder holding the clone and a folder beside it', () => {
    expect(scanAt("const route = '{abs}check'\nconst api = '{abs}v1/check'\n")).toEqual([])
    expect(scanAt("const beside = '{abs}check/shared/x.yaml'\n")).toEqual([
      spelled('{abs}check/shared/x.yaml'),
    ])
    expect(scanAt("const up = join(import.meta.dirname, '{up}', '{up}', '{up}')\n")).toEqual([
      spelled('{abs}check'),
    ])
  })

  it('catches a shell script that climbs out of the clone', () => {
    expect(
      scanSource(root, join(root, '.ci', 'run'), spelled('cd "$(dirname "$0")/{up}/{up}"\n')).findings.map(
        (f) => f.resolved,
      ),
    ).toEqual([spelled('{abs}check')])
  })
})
