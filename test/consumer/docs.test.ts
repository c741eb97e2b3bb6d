// The docs as a reader pastes them: every ts/js code block of README.md, docs/*.md and each package's
// README, type-checked (tsc 5.9.3, strict, skipLibCheck off, nodenext, a "type": "module" project)
// in a fresh project that installed both packed tarballs and what the docs use; blocks marked
// `<!-- check: run -->` also run. Markers and extraction: doc-blocks.ts. The examples are not
// shipped in any tarball: the repository's examples/ is copied into the project, type-checked and run
// there. Needs `npm run build` first and the npm registry (one shared npm cache; later runs are
// mostly offline).
import { spawn } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { copyFile, mkdir, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { expectBasicOutput } from './basic-example.js'
import {
  type Block,
  extractBlocks,
  MarkerError,
  mapDiagnostics,
  type Program,
  toPrograms,
} from './doc-blocks.js'
import {
  COMPILERS,
  dirOf,
  installProjects,
  LIBRARY,
  library,
  node,
  removeProjects,
  root,
  SERVER,
  TYPES_NODE,
} from './packed-helpers.js'

/** Checked blocks per markdown file: a block that stops being found (a changed fence) fails here. */
const EXPECTED_BLOCKS: Record<string, number> = {
  'README.md': 5,
  'docs/architecture.md': 1,
  'docs/benchmark-cases.md': 0,
  'docs/benchmarks.md': 0,
  'docs/clients.md': 0, // Go and Python: test/clients/docs.test.ts builds those
  'docs/envoy.md': 0, // YAML: test/envoy/config.test.ts loads those
  'docs/errors.md': 1,
  'docs/http.md': 10,
  'docs/migrating-from-express-rate-limit.md': 2, // the peer's blocks are text: the side-by-side tests run them
  'docs/migrating-from-fastify-rate-limit.md': 4,
  'docs/migrating-from-rate-limiter-flexible.md': 2,
  'docs/observability.md': 7,
  'docs/policies.md': 7,
  'docs/reliability.md': 2,
  'docs/security.md': 0,
  'docs/scale.md': 2,
  'docs/service.md': 2,
  'docs/stores.md': 5,
  'docs/topologies.md': 2, // the hybrid and multi-region examples; the rest is nginx, YAML and text
  'docs/waiting.md': 4,
  'packages/sluice/README.md': 1,
  'packages/sluice-server/README.md': 0, // sh: the sluice command (packed-server.test.ts runs it)
}

const markdownFiles = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`),
  ...readdirSync(join(root, 'packages'))
    .sort()
    .map((p) => `packages/${p}/README.md`),
]
const blocks = new Map<string, Block[]>(
  markdownFiles.map((f) => [f, extractBlocks(f, readFileSync(join(root, f), 'utf8'))]),
)
const programs = toPrograms([...blocks.values()].flat())

/** A deliberately broken doc, checked in the same compiler run: its errors must come back. */
const BROKEN_MD = [
  '# Broken',
  '',
  '```ts',
  "import { createLimiter } from 'sluice'",
  "const limiter = createLimiter({ policies: { api: { algorithm: 'gcra', limit: 1, window: '1s' } } })",
  '```',
  '',
  '<!-- check: continues run -->',
  '```ts',
  "await limiter.consume('typo', 'k')",
  '```',
  '',
].join('\n')
const broken = toPrograms(extractBlocks('broken.md', BROKEN_MD))

const FOLDER = 'blocks'
/** The examples with a server, under examples/ in the repository and in the project. */
const EXAMPLES = ['express', 'fastify', 'hono', 'node']
/** The files of examples/ that are copied into the project (the servers import shared.ts). */
const EXAMPLE_FILES = ['shared.ts', 'basic.mjs', ...EXAMPLES.map((x) => `${x}/server.ts`)]

let tsc: Promise<string[]> | undefined
/** One tsc run over every program (docs and the broken one) and the copied examples. */
function typecheckAll(): Promise<string[]> {
  tsc ??= (async () => {
    const dir = dirOf('docs')
    await mkdir(join(dir, FOLDER))
    for (const p of [...programs, ...broken]) await writeFile(join(dir, FOLDER, p.name), p.source)
    const config = {
      compilerOptions: {
        module: 'nodenext',
        moduleResolution: 'nodenext',
        target: 'es2022',
        strict: true,
        skipLibCheck: false,
        allowJs: true,
        checkJs: true,
        noEmit: true,
        types: ['node'],
      },
      files: [
        ...[...programs, ...broken].map((p) => `${FOLDER}/${p.name}`),
        ...EXAMPLES.map((x) => `examples/${x}/server.ts`),
      ],
    }
    await writeFile(join(dir, 'tsconfig.json'), JSON.stringify(config, null, 2))
    const out = await node(
      dir,
      [join(dirOf('tools'), 'node_modules/ts5/bin/tsc'), '-p', '.', '--pretty', 'false'],
      150_000,
    )
    return mapDiagnostics(`${out.stdout}${out.stderr}`, [...programs, ...broken], FOLDER)
  })()
  return tsc
}

async function runProgram(p: Program): Promise<{ code: number; output: string }> {
  const out = await node(dirOf('docs'), ['--import', 'tsx', join(FOLDER, p.name)], 30_000)
  return { code: out.code, output: `${out.stdout}${out.stderr}` }
}

beforeAll(async () => {
  await installProjects({
    docs: [
      LIBRARY,
      SERVER,
      TYPES_NODE,
      'express@5.3.0',
      '@types/express@5.0.6',
      'fastify@5.12.8',
      'hono@4.13.19',
      '@hono/node-server@2.1.9',
      'ioredis@5.10.1',
      'pg@8.23.1',
      '@types/pg@8.23.1',
      'redis@5.12.1',
      'memjs@1.3.2',
      '@types/memjs@1.3.3',
      'pino@10.4.0',
      'prom-client@15.1.3',
      '@opentelemetry/api@1.10.0',
      '@opentelemetry/context-async-hooks@3.1.0',
      '@opentelemetry/exporter-metrics-otlp-http@0.301.0',
      '@opentelemetry/exporter-trace-otlp-http@0.301.0',
      '@opentelemetry/sdk-metrics@3.1.0',
      '@opentelemetry/sdk-trace@3.1.0',
      'tsx@4.23.15',
    ],
  })
  const dir = dirOf('docs')
  const pkgJson = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Record<string, unknown>
  await writeFile(join(dir, 'package.json'), JSON.stringify({ ...pkgJson, type: 'module' }, null, 2))
  for (const file of EXAMPLE_FILES) {
    await mkdir(dirname(join(dir, 'examples', file)), { recursive: true })
    await copyFile(join(root, 'examples', file), join(dir, 'examples', file))
  }
}, 240_000)
afterAll(removeProjects)

describe('README', () => {
  it('starts with the install lines: the library, one per optional peer at the minimums its package.json declares, and the service', () => {
    const text = readFileSync(join(root, 'README.md'), 'utf8')
    // The first section after the title is Install, before the repository quick start.
    expect(/^## (.+)$/m.exec(text)?.[1]).toMatch(/^Install\b/)
    const start = text.indexOf('\n## Install')
    const install = text.slice(start, text.indexOf('\n## ', start + 1))
    const lines = install.split('\n').filter((l) => l.startsWith('npm install '))
    expect(lines[0]).toMatch(/^npm install sluice\s/)
    for (const [peer, range] of Object.entries(library.peerDependencies ?? {})) {
      const line = lines.find((l) => l.includes(`${peer} >= `))
      expect(line, `an install line names ${peer}`).toBeDefined()
      expect(line, `${peer}'s minimum`).toContain(`${peer} ${range.replace('>=', '>= ')}`)
    }
    expect(lines).toContainEqual(expect.stringMatching(/^npm install sluice-server\s/))
  })
})

describe('the extractor', () => {
  it('finds the expected number of checked blocks in README.md and every docs/*.md', () => {
    const counts = Object.fromEntries([...blocks].map(([file, found]) => [file, found.length]))
    expect(counts).toEqual(EXPECTED_BLOCKS)
  })

  it('takes ts/typescript/js/javascript/mjs fences (indented ones too), not json, sh, yaml, text or bare ones', () => {
    const md = [
      '```json',
      '{}',
      '```',
      '```sh',
      'ls',
      '```',
      '```yaml',
      'a: 1',
      '```',
      '```text',
      'x',
      '```',
      '```',
      'bare',
      '```',
      '```ts',
      'const a = 1',
      '```',
      '- item',
      '  ```typescript',
      '  const b = 2',
      '  ```',
      '```js',
      'const c = 3',
      '```',
      '```javascript',
      'const d = 4',
      '```',
      '```mjs',
      'const e = 5',
      '```',
    ].join('\n')
    const found = extractBlocks('x.md', md)
    expect(found.map((b) => [b.lang, b.code])).toEqual([
      ['ts', 'const a = 1'],
      ['ts', 'const b = 2'],
      ['js', 'const c = 3'],
      ['js', 'const d = 4'],
      ['js', 'const e = 5'],
    ])
  })

  it('refuses an unknown marker word, an empty marker, a marker before no checked fence, and "continues" on a first block', () => {
    expect(() => extractBlocks('x.md', '<!-- check: skip -->\n```ts\nx\n```\n')).toThrow(MarkerError)
    expect(() => extractBlocks('x.md', '<!-- check: run -->\n```sh\nls\n```\n')).toThrow(MarkerError)
    expect(() => extractBlocks('x.md', '<!-- check: run -->\n\nSome prose.\n')).toThrow(MarkerError)
    expect(() => extractBlocks('x.md', '<!-- check: continues -->\n```ts\nx\n```\n')).toThrow(MarkerError)
    expect(() => extractBlocks('x.md', '<!-- check: -->\n```ts\nx\n```\n')).toThrow(MarkerError)
  })

  it('joins a "continues" block to the previous one of its file and maps lines back to the markdown', () => {
    expect(broken).toHaveLength(1)
    expect(broken[0]?.run).toBe(true)
    expect(broken[0]?.origin).toEqual(['broken.md:4', 'broken.md:5', 'broken.md:10'])
  })
})

describe('every code block of the docs, in a fresh project from the packed tarball', () => {
  it('type-checks as written (tsc 5.9.3 strict, skipLibCheck off, nodenext, "type": "module")', async () => {
    const diagnostics = await typecheckAll()
    expect(
      diagnostics.filter((l) => !l.startsWith('broken.md:')),
      `tsc ${COMPILERS.ts5}`,
    ).toEqual([])
  }, 200_000)

  it('a deliberately broken block fails the check, named by its markdown line', async () => {
    const diagnostics = await typecheckAll()
    expect(diagnostics.filter((l) => l.startsWith('broken.md:'))).toEqual([
      expect.stringMatching(/^broken\.md:10:23: error TS2345: Argument of type '"typo"'/),
    ])
  }, 200_000)

  it('the blocks marked run exit 0 under tsx', async () => {
    await typecheckAll() // writes the programs
    const runnable = programs.filter((p) => p.run)
    // Pinned, so a run marker cannot silently drop out either.
    expect(runnable.map((p) => p.name)).toEqual([
      'README-1.ts',
      'README-2.ts',
      'README-4.ts',
      'docs-errors-1.ts',
      'docs-migrating-from-express-rate-limit-1.ts',
      'docs-migrating-from-express-rate-limit-2.ts',
      'docs-migrating-from-fastify-rate-limit-1.ts',
      'docs-migrating-from-fastify-rate-limit-2.ts',
      'docs-migrating-from-fastify-rate-limit-3.ts',
      'docs-migrating-from-rate-limiter-flexible-1.ts',
      'docs-policies-1.ts',
      'docs-policies-2.ts',
      'docs-policies-3.ts',
      'docs-policies-4.ts',
      'docs-policies-5.ts',
      'docs-policies-6.ts',
      'docs-policies-7.ts',
      'docs-service-2.ts',
      'docs-stores-1.ts',
      'docs-stores-2.ts',
      'docs-waiting-1.ts',
      'docs-waiting-2.ts',
      'docs-waiting-3.ts',
      'packages-sluice-README-1.ts',
    ])
    const failed: string[] = []
    for (const p of runnable) {
      const out = await runProgram(p)
      if (out.code !== 0) failed.push(`${p.name} (${p.origin[0]}) exited ${out.code}:\n${out.output}`)
    }
    expect(failed).toEqual([])
  }, 120_000)

  it('a run block that throws fails the run', async () => {
    await typecheckAll()
    const out = await runProgram(broken[0] as Program)
    expect(out.code).toBe(1)
    expect(out.output).toMatch(/SLUICE_UNKNOWN_POLICY|unknown policy/i)
  }, 60_000)
})

describe("the repository's examples, copied into the project", () => {
  it('examples/basic.mjs runs against the installed library', async () => {
    const out = await node(dirOf('docs'), ['examples/basic.mjs'])
    expect(out.code, out.stderr).toBe(0)
    expectBasicOutput(out.stdout)
  })

  it.each(EXAMPLES)(
    'examples/%s/server.ts serves a limited request on PORT=0 (tsx)',
    async (example) => {
      const dir = dirOf('docs')
      const child = spawn(process.execPath, ['--import', 'tsx', `examples/${example}/server.ts`], {
        cwd: dir,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, PORT: '0' },
      })
      try {
        let printed = ''
        child.stderr.on('data', (chunk: Buffer) => {
          printed += chunk.toString()
        })
        const url = await new Promise<string>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error(`no URL within 15 s: ${printed}`)), 15_000)
          child.stdout.on('data', (chunk: Buffer) => {
            printed += chunk.toString()
            const m = /listening on (http:\/\/127\.0\.0\.1:(\d+))/.exec(printed)
            if (m !== null && m[2] !== '0') {
              clearTimeout(timer)
              resolve(m[1] as string)
            }
          })
          child.once('exit', (code) => {
            clearTimeout(timer)
            reject(new Error(`exited ${code}: ${printed}`))
          })
        })
        const res = await fetch(`${url}/users/1`, { headers: { authorization: 'Bearer alice' } })
        expect(res.status, printed).toBe(200)
        expect(res.headers.get('ratelimit-policy')).toMatch(/"perIp"/)
        expect(res.headers.get('x-ratelimit-limit')).not.toBeNull()
      } finally {
        child.kill('SIGTERM')
      }
    },
    30_000,
  )
})
