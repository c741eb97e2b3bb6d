// The package as a new user meets it: `npm pack` of the build, installed from the tarball into fresh
// `npm init -y` projects that hold only what that user has (the core alone; one framework at the
// lowest version the peer range declares). No symlink to the repository: a symlink sees the repo's
// devDependencies (ioredis, every framework) and hides what a user lacks.
// Needs `npm run build` first and the npm registry (one shared npm cache; later runs are mostly offline).
import { spawn } from 'node:child_process'
import { readFile, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import {
  dirOf,
  installProjects,
  lowest,
  NO_PEER_SUBPATHS,
  node,
  pkg,
  removeProjects,
  TARBALL,
  TYPES_NODE,
  typecheck,
} from './packed-helpers.js'

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
  void [n, by, s, store, wrong, remote, pgStore, SluiceError, createObservability, withSluice, parseConfig]
}
export function memcached(client: MemjsClientLike): MemcachedStore {
  // @ts-expect-error memcached has no server clock
  memcachedStore(client, { clock: 'server' })
  return memcachedStore(client, { prefix: 'app', clock: 'client' })
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

beforeAll(
  () =>
    installProjects({
      core: [TARBALL, TYPES_NODE],
      express: [TARBALL, `express@${lowest('express')}`, '@types/express@4.17.21', TYPES_NODE],
      fastify: [TARBALL, `fastify@${lowest('fastify')}`, TYPES_NODE],
      hono: [TARBALL, `hono@${lowest('hono')}`, TYPES_NODE],
      redis: [TARBALL, `ioredis@${lowest('ioredis')}`, `redis@${lowest('redis')}`],
      memcached: [TARBALL, `memjs@${lowest('memjs')}`],
      postgres: [TARBALL, `pg@${lowest('pg')}`],
    }),
  240_000,
)
afterAll(removeProjects)

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
    const failures = await typecheck(sources, 'core')
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

  it('`sluice serve --store memcached://...` without memjs prints one line saying what to install and exits 1', async () => {
    const out = await node(dirOf('core'), [
      'node_modules/.bin/sluice',
      'serve',
      '--store',
      'memcached://127.0.0.1:1',
      '--port',
      '0',
    ])
    expect(out.stderr).toBe('sluice: the memcached store needs memjs: npm install memjs\n')
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
  it('the sluice command: --version, a mistyped flag, init then check (as `npx sluice` runs it)', async () => {
    const dir = dirOf('core')
    const bin = join(dir, 'node_modules/sluice/dist/cli.js')
    const version = await node(dir, [bin, '--version'])
    expect(version.stdout).toBe(`${(pkg as unknown as { version: string }).version}\n`)
    const typo = await node(dir, [bin, 'serve', '--prot', '1'])
    expect(typo.code).toBe(2)
    expect(typo.stderr).toMatch(/^sluice serve: .*'--prot'.*\nUsage: sluice serve /)
    expect(typo.stderr).not.toMatch(/\n\s+at /)
    const init = await node(dir, [bin, 'init', '--config', 'starter.yaml'])
    expect(init.code, init.stderr).toBe(0)
    const checked = await node(dir, [bin, 'check', '--config', 'starter.yaml'])
    expect(checked.code, checked.stderr).toBe(0)
    expect(checked.stdout).toMatch(/sluice serve would use: memory \(from starter\.yaml store:\)/)
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
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ policy: 'api', key }),
      })
      expect(res.status).toBe(200)
      expect(((await res.json()) as { allowed?: unknown }).allowed).toBe(true)
    } finally {
      child.kill('SIGTERM')
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
  const limiter = createLimiter({ store, policies })
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
  const limiter = createLimiter({ store, policies: { one: { algorithm: 'gcra', limit: 1, window: '1m' } } })
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
