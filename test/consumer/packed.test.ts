// The package as a new user meets it: `npm pack` of the build, installed from the tarball into fresh
// `npm init -y` projects that hold only what that user has (the core alone; one framework at the
// lowest version the peer range declares). No symlink to the repository: a symlink sees the repo's
// devDependencies (ioredis, every framework) and hides what a user lacks.
// Needs `npm run build` first and the npm registry (one shared npm cache; later runs are mostly offline).
import { execFile, spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'

const exec = promisify(execFile)
const root = fileURLToPath(new URL('../..', import.meta.url))
const cache = process.env.SLUICE_CONSUMER_NPM_CACHE ?? join(tmpdir(), 'sluice-consumer-npm-cache')

/** The compilers every declaration is checked with, installed once as aliases in a tools project. */
const COMPILERS = { ts5: '5.9.3', ts7: '7.0.2' } as const
type Compiler = keyof typeof COMPILERS
/** What a TypeScript user of Node has besides the packages under test. */
const TYPES_NODE = '@types/node@20.19.43'
interface Pkg {
  exports: Record<string, unknown>
  peerDependencies: Record<string, string>
}
const pkg = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as Pkg
/** Subpaths that import their peer when loaded (the others must load with no peer installed). */
const LOADS_A_PEER = new Set(['./hono'])
/** Every subpath of "exports" that loads without any peer installed (a new one is checked unasked). */
const NO_PEER_SUBPATHS = Object.keys(pkg.exports)
  .filter((k) => k !== './package.json' && !LOADS_A_PEER.has(k))
  .map((k) => (k === '.' ? 'sluice' : `sluice/${k.slice(2)}`))

/** The lowest version a `>=X[.Y[.Z]]` peer range admits: the version the adapter is tested at. */
function lowest(peer: string): string {
  const range = pkg.peerDependencies[peer] ?? ''
  const m = /^>=(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(range)
  if (m === null) throw new Error(`peer ${peer}: range ${JSON.stringify(range)} is not >=X.Y.Z`)
  return `${m[1]}.${m[2] ?? 0}.${m[3] ?? 0}`
}

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

function dirOf(name: string): string {
  const dir = projects.get(name)
  if (dir === undefined) throw new Error(`project ${name} was not installed`)
  return dir
}

interface Ran {
  code: number
  stdout: string
  stderr: string
}

async function node(cwd: string, args: string[], timeout = 20_000): Promise<Ran> {
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

/** The TypeScript each project's app.ts / app.mts holds (written before the first check). */
const sources = new Map<string, string>()

const limiterSource = `const limiter = createLimiter({ policies: { one: { algorithm: 'fixed-window', limit: 1, window: '1m' } } })`
sources.set(
  'core',
  `import { createLimiter, memoryStore, SluiceError, type Decision, type HybridBackend, type LayeredDecision, type MemoryStore } from 'sluice'
import { createObservability } from 'sluice/metrics'
import { withSluice } from 'sluice/node'
import { hybridRedis, redisStore, type RedisClient, type RedisStore } from 'sluice/redis'
import { parseConfig } from 'sluice/server'

const limiter = createLimiter({
  policies: {
    api: { algorithm: 'token-bucket', limit: 10, window: '1s', burst: 20 },
    jobs: { algorithm: 'concurrency', limit: 2, timeout: '30s' },
  },
})
export async function check(client: RedisClient): Promise<void> {
  const d: Decision = await limiter.consume('api', 'k', { cost: 2 })
  const n: number = d.retryAfterMs + d.resetMs + d.remaining + d.limit
  const l: LayeredDecision = await limiter.consume([{ policy: 'api', key: 'k' }])
  const by: string | undefined = l.deniedBy
  const lease = (await limiter.acquire('jobs', 'w')).lease
  await lease?.release()
  const s: Decision = limiter.consumeSync('api', 'k')
  const store: MemoryStore = memoryStore({ maxKeys: 10 })
  const redis: RedisStore = redisStore(client, { prefix: 'app' })
  const hybrid: HybridBackend = hybridRedis(client)
  const remote = createLimiter({ store: redis, hybrid, policies: { api: { algorithm: 'gcra', limit: 1, window: '1s' } } })
  // @ts-expect-error 'typo' is not a configured policy
  await limiter.consume('typo', 'k')
  // @ts-expect-error remaining is a number
  const wrong: string = d.remaining
  // @ts-expect-error a string is no Redis client
  redisStore('redis://127.0.0.1:6379')
  void [n, by, s, store, wrong, remote, SluiceError, createObservability, withSluice, parseConfig]
}
`,
)
sources.set(
  'express',
  `import express from 'express'
import { createLimiter } from 'sluice'
import { sluice } from 'sluice/express'
${limiterSource}
const app = express()
app.use(sluice({ limiter, rules: [{ policy: 'one', key: 'ip' }] }))
app.post('/reports', sluice({ limiter, rules: [] }).route({ cost: 5 }), (_req, res) => { res.send('ok') })
export { app }
`,
)
sources.set(
  'fastify',
  `import { fastify } from 'fastify'
import { createLimiter } from 'sluice'
import { sluice } from 'sluice/fastify'
${limiterSource}
const app = fastify()
export const ready = app.register(sluice, { limiter, rules: [{ policy: 'one', key: 'ip' }] })
app.post('/reports', { config: { sluice: { cost: 5 } } }, async () => 'ok')
`,
)
sources.set(
  'hono',
  `import { Hono } from 'hono'
import { createLimiter } from 'sluice'
import { sluice } from 'sluice/hono'
${limiterSource}
const app = new Hono()
app.use('*', sluice({ limiter, rules: [{ policy: 'one', key: 'ip' }] }))
export { app }
`,
)

/**
 * `tsc --noEmit --strict` with skipLibCheck off, for every compiler and resolution, over every
 * project's app.ts (and app.mts where the resolution has ESM files). One compiler run covers all
 * projects: each file resolves packages from its own project's node_modules, so an adapter still
 * sees only its framework. Resolves to tsc's output lines per run that failed.
 */
let checked: Promise<Map<string, string[]>> | undefined
function typecheckAll(): Promise<Map<string, string[]>> {
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
async function typecheck(name: string): Promise<string[]> {
  const out: string[] = []
  for (const [label, lines] of await typecheckAll()) {
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

beforeAll(async () => {
  if (!existsSync(join(root, 'dist/index.js')))
    throw new Error('dist/ is missing: run `npm run build` (npm test builds first)')
  work = await mkdtemp(join(tmpdir(), 'sluice-packed-'))
  await mkdir(join(work, 'pack'))
  await npm(root, ['pack', '--pack-destination', join(work, 'pack')])
  const [file] = (await readdir(join(work, 'pack'))).filter((f) => f.endsWith('.tgz'))
  if (file === undefined) throw new Error('npm pack wrote no tarball')
  tarball = join(work, 'pack', file)
  // Installs are network-bound: all projects at once.
  await Promise.all([
    project(
      'tools',
      Object.entries(COMPILERS).map(([alias, version]) => `${alias}@npm:typescript@${version}`),
    ),
    project('core', [tarball, TYPES_NODE]),
    project('express', [tarball, `express@${lowest('express')}`, '@types/express@4.17.21', TYPES_NODE]),
    project('fastify', [tarball, `fastify@${lowest('fastify')}`, TYPES_NODE]),
    project('hono', [tarball, `hono@${lowest('hono')}`, TYPES_NODE]),
    project('redis', [tarball, `ioredis@${lowest('ioredis')}`, `redis@${lowest('redis')}`]),
  ])
}, 240_000)

afterAll(async () => {
  // SLUICE_CONSUMER_KEEP=1 keeps the projects for a look at what failed.
  if (work !== '' && process.env.SLUICE_CONSUMER_KEEP === undefined)
    await rm(work, { recursive: true, force: true })
})

describe('the core, installed alone (no ioredis, no framework)', () => {
  it('ESM import and CommonJS require of every subpath that needs no peer give the same names', async () => {
    const dir = dirOf('core')
    const list = JSON.stringify(NO_PEER_SUBPATHS)
    await writeFile(
      join(dir, 'load.mjs'),
      `const out = {}\nfor (const s of ${list}) out[s] = Object.keys(await import(s)).filter((k) => k !== 'default').sort()\nconsole.log(JSON.stringify(out))\n`,
    )
    await writeFile(
      join(dir, 'load.cjs'),
      `const out = {}\nfor (const s of ${list}) out[s] = Object.keys(require(s)).filter((k) => k !== 'default').sort()\nconsole.log(JSON.stringify(out))\n`,
    )
    const esm = await node(dir, ['load.mjs'])
    const cjs = await node(dir, ['load.cjs'])
    expect(esm.stderr, 'ESM import').toBe('')
    expect(cjs.stderr, 'CommonJS require').toBe('')
    const names = JSON.parse(esm.stdout) as Record<string, string[]>
    expect(JSON.parse(cjs.stdout)).toEqual(names)
    expect(NO_PEER_SUBPATHS).toEqual(
      expect.arrayContaining(['sluice', 'sluice/redis', 'sluice/server', 'sluice/express']),
    )
    for (const s of NO_PEER_SUBPATHS) expect(names[s]?.length, s).toBeGreaterThan(0)
    // Redis-specific exports live under sluice/redis only.
    expect(names.sluice).not.toContain('hybridRedis')
    expect(names['sluice/redis']).toEqual(expect.arrayContaining(['redisStore', 'hybridRedis']))
  })

  it('dist/index.js and dist/index.cjs neither import ioredis nor carry the Redis client code', async () => {
    const dist = join(dirOf('core'), 'node_modules/sluice/dist')
    for (const entry of ['index.js', 'index.cjs']) {
      // Every file the entry loads, following its relative imports.
      const seen = new Set<string>()
      const queue = [entry]
      while (queue.length > 0) {
        const file = queue.pop() as string
        if (seen.has(file)) continue
        seen.add(file)
        const text = await readFile(join(dist, file), 'utf8')
        expect(text, `${entry} loads ${file}, which mentions ioredis`).not.toMatch(/ioredis/)
        expect(text, `${entry} loads ${file}, which holds the write coalescer`).not.toMatch(
          /writeCoalescer|\.cork\(\)/,
        )
        expect(text, `${entry} loads ${file}, which holds the client adapter`).not.toMatch(
          /function adaptClient/,
        )
        for (const m of text.matchAll(/(?:from\s*|require\(|import\()\s*["']\.\/([^"']+)["']/g))
          queue.push(join(dirname(file), m[1] as string))
      }
      expect(seen.size, `${entry} and the chunks it loads`).toBeGreaterThan(1)
    }
  })

  it('its declarations (sluice, /redis, /metrics, /node, /server) compile on TS 5 and 7 under every resolution', async () => {
    const failures = await typecheck('core')
    expect(failures).toEqual([])
  }, 280_000)

  it('`sluice serve --store redis://...` without ioredis prints one line saying what to install and exits 1', async () => {
    const out = await node(dirOf('core'), [
      'node_modules/.bin/sluice',
      'serve',
      '--store',
      'redis://127.0.0.1:1',
      '--port',
      '0',
    ])
    expect(out.stderr).toBe('sluice: the redis store needs ioredis: npm install ioredis\n')
    expect(out.code).toBe(1)
  })

  it('openStore from sluice/server rejects with a StoreError naming what to install (ESM and CommonJS builds)', async () => {
    const dir = dirOf('core')
    const body = `.openStore('redis://127.0.0.1:1', { prefix: 'x' }).then(
  () => console.log('opened'),
  (e) => console.log(JSON.stringify([e.name, e.code, e.message])),
)\n`
    await writeFile(join(dir, 'open.mjs'), `import * as server from 'sluice/server'\nserver${body}`)
    await writeFile(join(dir, 'open.cjs'), `require('sluice/server')${body}`)
    for (const file of ['open.mjs', 'open.cjs']) {
      const out = await node(dir, [file])
      expect(JSON.parse(out.stdout), file).toEqual([
        'StoreError',
        'SLUICE_STORE_ERROR',
        'the redis store needs ioredis: npm install ioredis',
      ])
    }
  })
})

describe('each adapter with only its framework, at the lowest version the peer range declares', () => {
  it(`sluice/express serves requests on express ${lowest('express')} (CommonJS and ESM)`, async () => {
    const dir = dirOf('express')
    const app = (imports: string) => `${imports}
const limiter = createLimiter({ policies: { one: { algorithm: 'fixed-window', limit: 1, window: '1m' } } })
const app = express()
app.use(sluice({ limiter, rules: [{ policy: 'one', key: 'ip' }] }))
app.get('/hello', (req, res) => res.send('ok'))
const server = app.listen(0, '127.0.0.1', async () => {
  const url = 'http://127.0.0.1:' + server.address().port + '/hello'
  const a = await fetch(url)
  const b = await fetch(url)
  console.log(JSON.stringify([JSON.parse(require('fs').readFileSync('node_modules/express/package.json', 'utf8')).version, a.status, await a.text(), b.status, b.headers.get('retry-after')]))
  server.close()
})
`
    await writeFile(
      join(dir, 'serve.cjs'),
      app(
        `const express = require('express')\nconst { createLimiter } = require('sluice')\nconst { sluice } = require('sluice/express')`,
      ),
    )
    await writeFile(
      join(dir, 'serve.mjs'),
      app(
        `import express from 'express'\nimport { createRequire } from 'node:module'\nimport { createLimiter } from 'sluice'\nimport { sluice } from 'sluice/express'\nconst require = createRequire(import.meta.url)`,
      ),
    )
    for (const file of ['serve.cjs', 'serve.mjs']) {
      const out = await node(dir, [file])
      expect(out.code, `${file}: ${out.stderr}`).toBe(0)
      expect(JSON.parse(out.stdout), file).toEqual([lowest('express'), 200, 'ok', 429, '60'])
    }
  })

  it(`sluice/fastify serves requests on fastify ${lowest('fastify')}`, async () => {
    const dir = dirOf('fastify')
    await writeFile(
      join(dir, 'serve.mjs'),
      `import { fastify } from 'fastify'
import { readFileSync } from 'node:fs'
import { createLimiter } from 'sluice'
import { sluice } from 'sluice/fastify'
const limiter = createLimiter({ policies: { one: { algorithm: 'fixed-window', limit: 1, window: '1m' } } })
const app = fastify()
await app.register(sluice, { limiter, rules: [{ policy: 'one', key: 'ip' }] })
app.get('/hello', async () => 'ok')
const url = (await app.listen({ port: 0, host: '127.0.0.1' })) + '/hello'
const a = await fetch(url)
const b = await fetch(url)
const version = JSON.parse(readFileSync('node_modules/fastify/package.json', 'utf8')).version
console.log(JSON.stringify([version, a.status, await a.text(), b.status, b.headers.get('retry-after')]))
await app.close()
`,
    )
    await writeFile(join(dir, 'load.cjs'), `console.log(typeof require('sluice/fastify').sluice)\n`)
    const out = await node(dir, ['serve.mjs'])
    expect(out.code, out.stderr).toBe(0)
    expect(JSON.parse(out.stdout)).toEqual([lowest('fastify'), 200, 'ok', 429, '60'])
    expect((await node(dir, ['load.cjs'])).stdout).toBe('function\n')
  })

  it(`sluice/hono serves requests on hono ${lowest('hono')} (ESM and CommonJS)`, async () => {
    const dir = dirOf('hono')
    const app = (imports: string) => `${imports}
const limiter = createLimiter({ policies: { one: { algorithm: 'fixed-window', limit: 1, window: '1m' } } })
const app = new Hono()
app.use('*', sluice({ limiter, rules: [{ policy: 'one', key: 'ip' }] }, { remoteAddress: () => '192.0.2.1' }))
app.get('/hello', (c) => c.text('ok'))
;(async () => {
  const a = await app.fetch(new Request('http://localhost/hello'))
  const b = await app.fetch(new Request('http://localhost/hello'))
  console.log(JSON.stringify([JSON.parse(require('fs').readFileSync('node_modules/hono/package.json', 'utf8')).version, a.status, await a.text(), b.status, b.headers.get('retry-after')]))
})()
`
    await writeFile(
      join(dir, 'serve.mjs'),
      app(
        `import { Hono } from 'hono'\nimport { createRequire } from 'node:module'\nimport { createLimiter } from 'sluice'\nimport { sluice } from 'sluice/hono'\nconst require = createRequire(import.meta.url)`,
      ),
    )
    await writeFile(
      join(dir, 'serve.cjs'),
      app(
        `const { Hono } = require('hono')\nconst { createLimiter } = require('sluice')\nconst { sluice } = require('sluice/hono')`,
      ),
    )
    for (const file of ['serve.mjs', 'serve.cjs']) {
      const out = await node(dir, [file])
      expect(out.code, `${file}: ${out.stderr}`).toBe(0)
      expect(JSON.parse(out.stdout), file).toEqual([lowest('hono'), 200, 'ok', 429, '60'])
    }
  })

  it('sluice/express declarations compile with express 4 and @types/express, on TS 5 and 7 under every resolution', async () => {
    const failures = await typecheck('express')
    expect(failures).toEqual([])
  }, 280_000)

  it('sluice/fastify declarations compile with only fastify, on TS 5 and 7 under every resolution', async () => {
    const failures = await typecheck('fastify')
    expect(failures).toEqual([])
  }, 280_000)

  it('sluice/hono declarations compile with only hono, on TS 5 and 7 under every resolution', async () => {
    const failures = await typecheck('hono')
    expect(failures).toEqual([])
  }, 280_000)
})

describe('the Redis clients, at the lowest versions the peer ranges declare, against a real redis-server', () => {
  const { port } = inject('redis')

  it(`redisStore and hybridRedis work with ioredis ${lowest('ioredis')} and redis ${lowest('redis')} (ESM and CommonJS)`, async () => {
    const dir = dirOf('redis')
    const body = `
const policies = { one: { algorithm: 'gcra', limit: 1, window: '1m' } }
const version = (name) => JSON.parse(require('fs').readFileSync('node_modules/' + name + '/package.json', 'utf8')).version
;(async () => {
  const io = new Redis(${port}, '127.0.0.1')
  const nr = await createClient({ url: 'redis://127.0.0.1:${port}' }).connect()
  const out = []
  for (const [name, client] of [['ioredis', io], ['redis', nr]]) {
    const store = redisStore(client, { prefix: 'consumer-' + name + '-' + process.argv[2] + '-' + process.pid })
    const limiter = createLimiter({ store, policies })
    const a = await limiter.consume('one', 'k')
    const b = await limiter.consume('one', 'k')
    const total = await hybridRedis(client).add([{ key: ['consumer-h', name, process.argv[2], process.pid].join('-'), count: 2, ttlMs: 10000 }])
    out.push([name, version(name), store.client.library, a.allowed, b.allowed, total[0]])
    await store.close()
  }
  console.log(JSON.stringify(out))
  io.disconnect()
  await nr.quit()
})()
`
    await writeFile(
      join(dir, 'store.mjs'),
      `import { Redis } from 'ioredis'\nimport { createRequire } from 'node:module'\nimport { createClient } from 'redis'\nimport { createLimiter } from 'sluice'\nimport { hybridRedis, redisStore } from 'sluice/redis'\nconst require = createRequire(import.meta.url)\n${body}`,
    )
    await writeFile(
      join(dir, 'store.cjs'),
      `const { Redis } = require('ioredis')\nconst { createClient } = require('redis')\nconst { createLimiter } = require('sluice')\nconst { hybridRedis, redisStore } = require('sluice/redis')\n${body}`,
    )
    for (const file of ['store.mjs', 'store.cjs']) {
      const out = await node(dir, [file, file])
      expect(out.code, `${file}: ${out.stderr}`).toBe(0)
      expect(JSON.parse(out.stdout), file).toEqual([
        ['ioredis', lowest('ioredis'), 'ioredis', true, false, 2],
        ['redis', lowest('redis'), 'node-redis', true, false, 2],
      ])
    }
  })

  it(`sluice serve --store redis://... works once ioredis ${lowest('ioredis')} is installed`, async () => {
    const child = spawn(
      process.execPath,
      ['node_modules/.bin/sluice', 'serve', '--store', `redis://127.0.0.1:${port}`, '--port', '0'],
      {
        cwd: dirOf('redis'),
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, SLUICE_LOG_LEVEL: 'warn' },
      },
    )
    try {
      let printed = ''
      let stderr = ''
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString()
      })
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no URL within 15 s: ${printed}${stderr}`)), 15_000)
        child.stdout.on('data', (chunk: Buffer) => {
          printed += chunk.toString()
          const m = /sluice serving on (http:\/\/\S+) \(store: redis:/.exec(printed)
          if (m !== null) {
            clearTimeout(timer)
            resolve(m[1] as string)
          }
        })
        child.once('exit', (code) => reject(new Error(`exited ${code}: ${printed}${stderr}`)))
      })
      const key = `consumer-${process.pid}-${Date.now()}`
      const res = await fetch(`${url}/v1/check`, {
        method: 'POST',
        body: JSON.stringify({ policy: 'api', key }),
      })
      expect(res.status).toBe(200)
      expect(((await res.json()) as { allowed?: unknown }).allowed).toBe(true)
    } finally {
      child.kill('SIGTERM')
    }
  })
})
