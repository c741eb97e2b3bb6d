// The library as a new user meets it: `npm pack` of packages/sluice, installed from the tarball into
// fresh `npm init -y` projects that hold only what that user has (the library alone; one framework,
// store client or prom-client at the lowest version the peer range declares). No symlink to the
// repository: a symlink sees the repo's devDependencies (ioredis, every framework) and hides what a
// user lacks. The service's package: packed-server.test.ts.
// Needs `npm run build` first and the npm registry (one shared npm cache; later runs are mostly offline).
import { readFile, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import {
  bytesUnder,
  dirOf,
  installedPackages,
  installProjects,
  LIBRARY,
  LIBRARY_SPECIFIERS,
  lowest,
  NO_PEER_SPECIFIERS,
  node,
  PEER_LOADED_BY,
  packed,
  removeProjects,
  TYPES_NODE,
  typecheck,
} from './packed-helpers.js'

/**
 * The size budgets for `npm install sluice` alone in a fresh project, and for the tarball: a little
 * above what it measured (377 KB packed, each entry in ESM and CommonJS with run-time overrides, lists,
 * penalties, near-limit signals, calendar windows, hybrid leases and regional shares).
 */
const BUDGET = { packages: 3, nodeModulesBytes: 2_000_000, tarballBytes: 390_000 }
/** What a library user is never handed: gRPC, protobuf, YAML, loggers, schema and metrics packages. */
const SERVICE_ONLY =
  /^(@grpc\/|protobufjs$|@protobufjs\/|yaml$|js-yaml$|pino|winston$|bunyan$|zod$|joi$|yup$|ajv$|valibot$|prom-client$|@opentelemetry\/)/

/** The TypeScript each project's app.ts / app.mts holds (written before the first check). */
const sources = new Map<string, string>()

const limiterSource = `const limiter = createLimiter({ policies: { one: { algorithm: 'fixed-window', limit: 1, window: '1m' } } })`
sources.set(
  'core',
  `import { createLimiter, memoryStore, SluiceError, type Decision, type HybridBackend, type LayeredDecision, type MemoryStore } from 'sluice'
import { withSluice } from 'sluice/node'
import { hybridRedis, redisStore, type RedisClient, type RedisStore } from 'sluice/redis'
import { forwardStore, type Step, type StepResult, type Store } from 'sluice/store'
import { memcachedStore, type MemcachedStore, type MemjsClientLike } from 'sluice/memcached'
import { postgresStore, type PostgresStore } from 'sluice/postgres'

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
  // The PostgreSQL store's declarations need no pg: its client type is structural.
  const pgStore: PostgresStore = postgresStore({ query: async () => ({ rows: [] }) }, { table: 'limits' })
  void [n, by, s, store, wrong, remote, pgStore, SluiceError, withSluice]
}
// sluice/node: each callback's request.raw is the IncomingMessage, no cast; a wrong field refused.
export const handler = withSluice(
  {
    limiter,
    rules: [{ policy: 'api', key: (req) => req.raw.socket.remoteAddress, cost: (req) => (req.raw.method === 'POST' ? 2 : 1) }],
    // @ts-expect-error an IncomingMessage has no notAField
    user: (req) => req.raw.notAField,
  },
  (_req, res) => res.end('ok'),
)
export function memcached(client: MemjsClientLike): MemcachedStore {
  // @ts-expect-error memcached has no server clock
  memcachedStore(client, { clock: 'server' })
  return memcachedStore(client, { prefix: 'app', clock: 'client' })
}
// A store author's side: the contract from sluice/store, handed to createLimiter from the root.
export function named(inner: Store, name: string): Store {
  return forwardStore(inner, {
    name,
    apply: (steps: readonly Step[], mode: 'consume' | 'peek') => inner.apply(steps, mode),
  })
}
export async function authored(): Promise<StepResult[]> {
  const store = named(memoryStore(), 'mine')
  const own = createLimiter({ store, policies: { one: { algorithm: 'gcra', limit: 1, window: '1s' } } })
  await own.consume('one', 'k')
  return store.apply([], 'peek')
}
`,
)
sources.set(
  'express',
  `import express, { type Request } from 'express'
import { createHttpLimiter, createLimiter } from 'sluice'
import { sluice } from 'sluice/express'
${limiterSource}
const app = express()
app.use(sluice({ limiter, rules: [{ policy: 'one', key: 'ip' }] }))
app.post('/reports', sluice({ limiter, rules: [] }).route({ cost: 5 }), (_req, res) => { res.send('ok') })
// Each callback's request.raw is Express's Request: no cast to reach it, a wrong field refused.
const typed = sluice({
  limiter,
  rules: [{ policy: 'one', key: (req) => req.raw.ip, cost: (req) => Number(req.raw.query.n ?? 1) }],
  // @ts-expect-error Express's Request has no notAField
  user: (req) => req.raw.notAField,
  skip: { when: (req) => req.raw.path === '/health' },
})
app.get('/items/:id', typed.route({ cost: (req) => (req.raw.params.id === 'all' ? 5 : 1) }), (_req, res) => { res.send('ok') })
app.use(sluice(createHttpLimiter<Request>({ limiter, rules: [{ policy: 'one', key: (req) => req.raw.ip }] })))
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
// Each callback's request.raw is the FastifyRequest: no cast to reach it, a wrong field refused.
export const typed = app.register(sluice, {
  limiter,
  rules: [{ policy: (req) => (req.raw.hostname === 'internal' ? null : 'one'), key: (req) => req.raw.ip }],
  // @ts-expect-error a FastifyRequest has no notAField
  user: (req) => req.raw.notAField,
})
app.post('/items', { config: { sluice: { cost: (req) => (req.raw.ip === '127.0.0.1' ? 1 : 2) } } }, async () => 'ok')
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
// Each callback's request.raw is the Hono Context: no cast to reach it, a wrong field refused.
app.use(
  '/typed/*',
  sluice({
    limiter,
    rules: [{ policy: 'one', key: (req) => req.raw.req.header('x-user') }],
    // @ts-expect-error a Hono Context has no notAField
    user: (req) => req.raw.notAField,
  }),
)
export { app }
`,
)

sources.set(
  'metrics',
  `import { createLimiter } from 'sluice'
import { createObservability, type Observability } from 'sluice/metrics'
${limiterSource}
export const obs: Observability = createObservability({ limiter })
export const text: Promise<string> = obs.metrics.registry.metrics()
`,
)

beforeAll(
  () =>
    installProjects({
      alone: [LIBRARY],
      core: [LIBRARY, TYPES_NODE],
      express: [LIBRARY, `express@${lowest('express')}`, '@types/express@4.17.21', TYPES_NODE],
      fastify: [LIBRARY, `fastify@${lowest('fastify')}`, TYPES_NODE],
      hono: [LIBRARY, `hono@${lowest('hono')}`, TYPES_NODE],
      metrics: [LIBRARY, `prom-client@${lowest('prom-client')}`, TYPES_NODE],
      redis: [LIBRARY, `ioredis@${lowest('ioredis')}`, `redis@${lowest('redis')}`],
      memcached: [LIBRARY, `memjs@${lowest('memjs')}`],
      postgres: [LIBRARY, `pg@${lowest('pg')}`],
    }),
  240_000,
)
afterAll(removeProjects)

describe('the size budget of `npm install sluice`', () => {
  it(`alone in a fresh project: at most ${BUDGET.packages} packages and ${BUDGET.nodeModulesBytes} bytes of node_modules, none of the service's`, async () => {
    const dir = dirOf('alone')
    const installed = await installedPackages(dir)
    expect(installed).toContain('sluice')
    expect(installed.length, installed.join(' ')).toBeLessThanOrEqual(BUDGET.packages)
    expect(installed.filter((name) => SERVICE_ONLY.test(name))).toEqual([])
    expect(await bytesUnder(join(dir, 'node_modules'))).toBeLessThanOrEqual(BUDGET.nodeModulesBytes)
  })

  it(`the tarball: at most ${BUDGET.tarballBytes} bytes packed, no source maps, examples, bench, sources or docs`, () => {
    const tarball = packed('sluice')
    expect(tarball.size).toBeLessThanOrEqual(BUDGET.tarballBytes)
    expect(tarball.files).toEqual(expect.arrayContaining(['README.md', 'dist/index.js', 'package.json']))
    expect(tarball.files.filter((f) => /\.map$|^(examples|bench|src|test|docs)\//.test(f))).toEqual([])
  })
})

describe('the library, installed alone (no store client, no framework, no prom-client)', () => {
  it('ESM import and CommonJS require of every entry that needs no peer give the same names', async () => {
    const dir = dirOf('core')
    const list = JSON.stringify(NO_PEER_SPECIFIERS)
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
    expect(NO_PEER_SPECIFIERS).toEqual(
      expect.arrayContaining(['sluice', 'sluice/redis', 'sluice/metrics', 'sluice/store', 'sluice/express']),
    )
    // Each entry loads and exports values, but sluice/store: the store contract is types only.
    for (const s of NO_PEER_SPECIFIERS) expect(names[s], s).toBeDefined()
    for (const s of NO_PEER_SPECIFIERS.filter((s) => s !== 'sluice/store'))
      expect(names[s]?.length, s).toBeGreaterThan(0)
    // Redis-specific exports live under sluice/redis only.
    expect(names.sluice).not.toContain('hybridRedis')
    expect(names['sluice/redis']).toEqual(expect.arrayContaining(['redisStore', 'hybridRedis']))
  })

  it('the entries that load their peer fail without it with SLUICE_UNSUPPORTED and the install line (ESM and CommonJS)', async () => {
    const dir = dirOf('core')
    const loaders = Object.keys(PEER_LOADED_BY)
    expect(LIBRARY_SPECIFIERS).toEqual(expect.arrayContaining(loaders))
    const hints: Record<string, string> = {
      'sluice/hono': 'sluice/hono needs hono 4.8 or later (an optional peer): npm install hono',
    }
    expect(Object.keys(hints).sort()).toEqual(loaders.sort())
    const report = 'console.log(JSON.stringify([e instanceof SluiceError, e.code, e.message]))'
    for (const [specifier, peer] of Object.entries(PEER_LOADED_BY)) {
      const esm = await node(dir, [
        '--input-type=module',
        '-e',
        `import { SluiceError } from 'sluice'\ntry { await import('${specifier}'); console.log('loaded') } catch (e) { ${report} }`,
      ])
      const cjs = await node(dir, [
        '-e',
        `const { SluiceError } = require('sluice')\ntry { require('${specifier}'); console.log('loaded') } catch (e) { ${report} }`,
      ])
      for (const [label, out] of [
        ['ESM', esm],
        ['CommonJS', cjs],
      ] as const) {
        expect(out.stderr, `${specifier} (${label})`).toBe('')
        expect(out.stdout, `${specifier} (${label}) loads without ${peer}`).not.toMatch(/loaded/)
        expect(JSON.parse(out.stdout), `${specifier} (${label})`).toEqual([
          true,
          'SLUICE_UNSUPPORTED',
          hints[specifier],
        ])
      }
    }
  })

  it('sluice/metrics without prom-client: making metrics throws SLUICE_UNSUPPORTED with the install line (ESM and CommonJS)', async () => {
    const dir = dirOf('core')
    const body = `
const limiter = createLimiter({ policies: { one: { algorithm: 'gcra', limit: 1, window: '1s' } } })
try {
  createObservability({ limiter })
  console.log('made')
} catch (e) {
  console.log(JSON.stringify([e instanceof SluiceError, e.code, e.message]))
}
`
    await writeFile(
      join(dir, 'metrics.mjs'),
      `import { createLimiter, SluiceError } from 'sluice'\nimport { createObservability } from 'sluice/metrics'\n${body}`,
    )
    await writeFile(
      join(dir, 'metrics.cjs'),
      `const { createLimiter, SluiceError } = require('sluice')\nconst { createObservability } = require('sluice/metrics')\n${body}`,
    )
    for (const file of ['metrics.mjs', 'metrics.cjs']) {
      const out = await node(dir, [file])
      expect(out.code, `${file}: ${out.stderr}`).toBe(0)
      expect(JSON.parse(out.stdout), file).toEqual([
        true,
        'SLUICE_UNSUPPORTED',
        'sluice/metrics needs prom-client (an optional peer): npm install prom-client',
      ])
    }
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

  it('its declarations (sluice, /redis, /store, /node, /memcached, /postgres) compile on TS 5 and 7 under every resolution', async () => {
    const failures = await typecheck(sources, 'core')
    expect(failures).toEqual([])
  }, 280_000)
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

  it(`sluice/express on express ${lowest('express')} keys on req.ip when the app trusts its proxy`, async () => {
    const dir = dirOf('express')
    await writeFile(
      join(dir, 'proxy.cjs'),
      `const express = require('express')
const { createLimiter } = require('sluice')
const { sluice } = require('sluice/express')
const limiter = createLimiter({ policies: { one: { algorithm: 'fixed-window', limit: 1, window: '1m' } } })
const app = express()
app.set('trust proxy', 'loopback')
app.use(sluice({ limiter, rules: [{ policy: 'one', key: 'ip' }] }))
app.get('/hello', (req, res) => res.send('ok'))
const server = app.listen(0, '127.0.0.1', async () => {
  const url = 'http://127.0.0.1:' + server.address().port + '/hello'
  const from = (ip) => fetch(url, { headers: { 'x-forwarded-for': ip } }).then((r) => r.status)
  console.log(JSON.stringify([await from('203.0.113.1'), await from('203.0.113.2'), await from('203.0.113.1')]))
  server.close()
})
`,
    )
    const out = await node(dir, ['proxy.cjs'])
    expect(out.code, out.stderr).toBe(0)
    // Two clients behind the same proxy have their own budgets; the first one's second try is limited.
    expect(JSON.parse(out.stdout)).toEqual([200, 200, 429])
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
    const failures = await typecheck(sources, 'express')
    expect(failures).toEqual([])
  }, 280_000)

  it('sluice/fastify declarations compile with only fastify, on TS 5 and 7 under every resolution', async () => {
    const failures = await typecheck(sources, 'fastify')
    expect(failures).toEqual([])
  }, 280_000)

  it('sluice/hono declarations compile with only hono, on TS 5 and 7 under every resolution', async () => {
    const failures = await typecheck(sources, 'hono')
    expect(failures).toEqual([])
  }, 280_000)
})

describe(`sluice/metrics with prom-client ${lowest('prom-client')}, the lowest version the peer range declares`, () => {
  it('counts decisions into Prometheus text (ESM and CommonJS)', async () => {
    const dir = dirOf('metrics')
    const body = `
const version = JSON.parse(require('fs').readFileSync('node_modules/prom-client/package.json', 'utf8')).version
;(async () => {
  const limiter = createLimiter({ policies: { one: { algorithm: 'fixed-window', limit: 1, window: '1m' } } })
  const obs = createObservability({ limiter })
  await limiter.consume('one', 'k')
  await limiter.consume('one', 'k')
  const text = await obs.metrics.registry.metrics()
  obs.close()
  console.log(JSON.stringify([version, text.match(/^sluice_decisions_total\\{policy="one",outcome="\\w+"\\} \\d+$/gm)]))
})()
`
    await writeFile(
      join(dir, 'metrics.mjs'),
      `import { createRequire } from 'node:module'\nimport { createLimiter } from 'sluice'\nimport { createObservability } from 'sluice/metrics'\nconst require = createRequire(import.meta.url)\n${body}`,
    )
    await writeFile(
      join(dir, 'metrics.cjs'),
      `const { createLimiter } = require('sluice')\nconst { createObservability } = require('sluice/metrics')\n${body}`,
    )
    for (const file of ['metrics.mjs', 'metrics.cjs']) {
      const out = await node(dir, [file])
      expect(out.code, `${file}: ${out.stderr}`).toBe(0)
      expect(JSON.parse(out.stdout), file).toEqual([
        lowest('prom-client'),
        [
          'sluice_decisions_total{policy="one",outcome="allowed"} 1',
          'sluice_decisions_total{policy="one",outcome="denied"} 1',
        ],
      ])
    }
  })

  it('its declarations compile with only prom-client, on TS 5 and 7 under every resolution', async () => {
    const failures = await typecheck(sources, 'metrics')
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
    // storeTimeout: these check that the client works; a first call on a loaded machine may take
    // longer than the default 100 ms, and a degraded (fail-open) answer would read as a wrong one.
    const limiter = createLimiter({ store, policies, storeTimeout: '30s' })
    const a = await limiter.consume('one', 'k')
    const b = await limiter.consume('one', 'k')
    const hybrid = hybridRedis(client, { prefix: 'consumer-h' })
    const key = hybrid.keyOf([name, process.argv[2], process.pid].join('-'), 'k')
    const call = { key, kind: 'w', nowMs: Date.now(), limit: 10, windowMs: 10000, capacity: 10, cost: 2, peek: false, want: 0, leaseMs: 100, returned: 0, returnTag: 0, deniedBefore: 0, divisor: 4, leastGrant: 2 }
    const reply = await hybrid.lease(call)
    out.push([name, version(name), store.client.library, a.allowed, b.allowed, 10 - reply.remaining])
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
})

describe(`memjs ${lowest('memjs')}, the lowest version the peer range declares, against a real memcached`, () => {
  it('memcachedStore decides exactly through it (ESM and CommonJS)', async () => {
    const dir = dirOf('memcached')
    const { address } = inject('memcached')
    const body = `
const policies = { one: { algorithm: 'gcra', limit: 1, window: '1m' } }
const version = JSON.parse(require('fs').readFileSync('node_modules/memjs/package.json', 'utf8')).version
;(async () => {
  const client = memjs.Client.create('${address}', { logger: { log() {} } })
  const store = memcachedStore(client, { prefix: 'consumer-' + process.argv[2] + '-' + process.pid })
  // storeTimeout: a first call on a loaded machine may take longer than the default 100 ms.
  const limiter = createLimiter({ store, policies, storeTimeout: '30s' })
  const a = await limiter.consume('one', 'k')
  const b = await limiter.consume('one', 'k')
  console.log(JSON.stringify([version, store.name, a.allowed, b.allowed, b.remaining]))
  await limiter.close()
  client.close()
})()
`
    await writeFile(
      join(dir, 'store.mjs'),
      `import memjs from 'memjs'\nimport { createRequire } from 'node:module'\nimport { createLimiter } from 'sluice'\nimport { memcachedStore } from 'sluice/memcached'\nconst require = createRequire(import.meta.url)\n${body}`,
    )
    await writeFile(
      join(dir, 'store.cjs'),
      `const memjs = require('memjs')\nconst { createLimiter } = require('sluice')\nconst { memcachedStore } = require('sluice/memcached')\n${body}`,
    )
    for (const file of ['store.mjs', 'store.cjs']) {
      const out = await node(dir, [file, file])
      expect(out.code, `${file}: ${out.stderr}`).toBe(0)
      expect(JSON.parse(out.stdout), file).toEqual([lowest('memjs'), 'memcached', true, false, 0])
    }
  })
})

describe('the PostgreSQL client, at the lowest version the peer range declares, against a real PostgreSQL', () => {
  it(`postgresStore works with pg ${lowest('pg')} (ESM and CommonJS)`, async () => {
    const dir = dirOf('postgres')
    const { url } = inject('postgres')
    const body = `
const version = JSON.parse(require('fs').readFileSync('node_modules/pg/package.json', 'utf8')).version
;(async () => {
  const pool = new pg.Pool({ connectionString: ${JSON.stringify(url)} })
  const table = 'consumer_' + process.argv[2].replace(/\\W/g, '_') + '_' + process.pid
  const store = postgresStore(pool, { table, cleanupIntervalMs: 0 })
  // storeTimeout: a first query on a loaded machine (the pool connecting) may take longer than the
  // default 100 ms, and a degraded (fail-open) answer would read as a wrong one.
  const limiter = createLimiter({
    store,
    storeTimeout: '30s',
    policies: { one: { algorithm: 'gcra', limit: 1, window: '1m' } },
  })
  const a = await limiter.consume('one', 'k')
  const b = await limiter.consume('one', 'k')
  console.log(JSON.stringify([version, store.name, a.allowed, b.allowed]))
  await limiter.close()
  await pool.query('DROP TABLE ' + table + ' CASCADE')
  await pool.end()
})()
`
    await writeFile(
      join(dir, 'store.mjs'),
      `import pg from 'pg'\nimport { createRequire } from 'node:module'\nimport { createLimiter } from 'sluice'\nimport { postgresStore } from 'sluice/postgres'\nconst require = createRequire(import.meta.url)\n${body}`,
    )
    await writeFile(
      join(dir, 'store.cjs'),
      `const pg = require('pg')\nconst { createLimiter } = require('sluice')\nconst { postgresStore } = require('sluice/postgres')\n${body}`,
    )
    for (const file of ['store.mjs', 'store.cjs']) {
      const out = await node(dir, [file, file])
      expect(out.code, `${file}: ${out.stderr}`).toBe(0)
      expect(JSON.parse(out.stdout), file).toEqual([lowest('pg'), 'postgres', true, false])
    }
  })
})
