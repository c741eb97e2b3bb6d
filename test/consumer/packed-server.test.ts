// The service as an operator meets it: `npm pack` of packages/sluice-server and packages/sluice,
// both tarballs installed together into fresh `npm init -y` projects (sluice-server depends on
// `sluice` at its exact version, which npm then takes from the local tarball), and the `sluice`
// command run through npx as its README says. The library's own tests: packed.test.ts.
// Needs `npm run build` first and the npm registry (one shared npm cache; later runs are mostly offline).
import { readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import {
  bytesUnder,
  dirOf,
  installedPackages,
  installProjects,
  LIBRARY,
  library,
  lowest,
  node,
  npx,
  packed,
  removeProjects,
  SERVER,
  serve,
  server,
  TYPES_NODE,
  typecheck,
} from './packed-helpers.js'

/**
 * sluice-server's own budget, a little above what it measured (a 135.6 KB tarball, which carries the
 * service twice, ESM and CommonJS, with TLS to the stores,
 * Sentinel, regions, TLS listeners, OpenTelemetry's loader, and the admin routes for overrides,
 * lists and outcome tickets): a service carries its YAML parser,
 * logger, schema library and metrics client, and this keeps that from growing
 * unnoticed.
 */
const BUDGET = { packages: 56, nodeModulesBytes: 22_000_000, tarballBytes: 140_000 }

/** The TypeScript each project's app.ts / app.mts holds (written before the first check). */
const sources = new Map<string, string>()
sources.set(
  'server',
  `import { createLimiter, type Limiter } from 'sluice'
import { createService, loadConfig, openStore, parseConfig, parseStoreUrl, type Service, type ServiceConfig, type StoreHandle } from 'sluice-server'

export async function start(file: string | undefined): Promise<string> {
  const config: ServiceConfig =
    file === undefined ? parseConfig('policies:\\n  api: { algorithm: gcra, limit: 1, window: 1s }\\n', 'inline.yaml') : await loadConfig(file)
  const service: Service = createService({ config })
  // The service's limiter is the application's Limiter: one sluice, the same types.
  const limiter: Limiter = service.limiter
  const { url } = await service.listen(0)
  // @ts-expect-error the port is a number
  await service.listen('8080')
  const store: StoreHandle = await openStore('redis://127.0.0.1:6379', { prefix: 'app' })
  void [limiter, store, parseStoreUrl('memcached://127.0.0.1:11211'), createLimiter]
  await service.close()
  return url
}
`,
)

beforeAll(
  () =>
    installProjects({
      alone: [LIBRARY, SERVER],
      server: [LIBRARY, SERVER, TYPES_NODE],
      redis: [LIBRARY, SERVER, `ioredis@${lowest('ioredis', server)}`],
    }),
  240_000,
)
afterAll(removeProjects)

describe('sluice-server, installed with its sluice tarball', () => {
  it('depends on sluice at its exact version, and npm took that sluice from the tarball, once', async () => {
    expect(server.dependencies?.sluice).toBe(library.version)
    const lock = JSON.parse(await readFile(join(dirOf('alone'), 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { version?: string; resolved?: string }>
    }
    const copies = Object.entries(lock.packages).filter(([path]) => /(^|\/)node_modules\/sluice$/.test(path))
    expect(copies.map(([path, entry]) => [path, entry.version, entry.resolved])).toEqual([
      ['node_modules/sluice', library.version, `file:../pack/sluice-${library.version}.tgz`],
    ])
  })

  it(`the size budget: at most ${BUDGET.packages} packages, ${BUDGET.nodeModulesBytes} bytes of node_modules and a ${BUDGET.tarballBytes}-byte tarball`, async () => {
    const dir = dirOf('alone')
    const installed = await installedPackages(dir)
    expect(installed).toEqual(expect.arrayContaining(['sluice', 'sluice-server']))
    expect(installed.length, installed.join(' ')).toBeLessThanOrEqual(BUDGET.packages)
    expect(await bytesUnder(join(dir, 'node_modules'))).toBeLessThanOrEqual(BUDGET.nodeModulesBytes)
    const tarball = packed('sluice-server')
    expect(tarball.size).toBeLessThanOrEqual(BUDGET.tarballBytes)
    // Its default config ships; source maps, sources and tests do not.
    expect(tarball.files).toEqual(
      expect.arrayContaining(['README.md', 'dist/cli.js', 'dist/rls.proto', 'examples/sluice.yaml']),
    )
    expect(tarball.files.filter((f) => /\.map$|^(bench|src|test|docs)\//.test(f))).toEqual([])
  })

  it('`npx sluice --version`, a mistyped flag, `npx sluice init` then `npx sluice check`', async () => {
    const dir = dirOf('alone')
    const version = await npx(dir, ['sluice', '--version'])
    expect(version.stdout).toBe(`${server.version}\n`)
    const typo = await npx(dir, ['sluice', 'serve', '--prot', '1'])
    expect(typo.code).toBe(2)
    expect(typo.stderr).toMatch(/^sluice serve: .*'--prot'.*\nUsage: sluice serve /)
    expect(typo.stderr).not.toMatch(/\n\s+at /)
    const init = await npx(dir, ['sluice', 'init', '--config', 'starter.yaml'])
    expect(init.code, init.stderr).toBe(0)
    const checked = await npx(dir, ['sluice', 'check', '--config', 'starter.yaml'])
    expect(checked.code, checked.stderr).toBe(0)
    expect(checked.stdout).toMatch(/sluice serve would use: memory \(from starter\.yaml store:\)/)
  })

  it('`npx sluice serve` runs the shipped config on the memory store: /healthz and a decision', async () => {
    const dir = dirOf('alone')
    const service = await serve(dir, ['--port', '0'], { SLUICE_LOG_LEVEL: 'warn' })
    try {
      expect(service.output()).toContain(
        `(store: memory, config: ${join(dir, 'node_modules/sluice-server/examples/sluice.yaml')})`,
      )
      const health = await fetch(`${service.url}/healthz`)
      expect(health.status).toBe(200)
      const check = async () => {
        const res = await fetch(`${service.url}/v1/check`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ policy: 'api', key: 'user-42' }),
        })
        return [res.status, ((await res.json()) as { allowed?: unknown; remaining?: unknown }).remaining]
      }
      // The shipped `api` policy: a token bucket of capacity 20.
      expect([await check(), await check()]).toEqual([
        [200, 19],
        [200, 18],
      ])
    } finally {
      await service.stop()
    }
  })

  it('`sluice serve --store redis://...` without ioredis prints one line saying what to install and exits 1', async () => {
    const out = await npx(dirOf('alone'), [
      'sluice',
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
    const out = await npx(dirOf('alone'), [
      'sluice',
      'serve',
      '--store',
      'memcached://127.0.0.1:1',
      '--port',
      '0',
    ])
    expect(out.stderr).toBe('sluice: the memcached store needs memjs: npm install memjs\n')
    expect(out.code).toBe(1)
  })

  it('`sluice serve` with telemetry but without the OpenTelemetry SDK prints the npm install line and exits 1', async () => {
    const dir = dirOf('alone')
    await writeFile(
      join(dir, 'telemetry.yaml'),
      'policies:\n  api: { algorithm: gcra, limit: 1, window: 1s }\ntelemetry:\n  otlp: { endpoint: http://127.0.0.1:1 }\n',
    )
    const out = await npx(dir, ['sluice', 'serve', '--config', 'telemetry.yaml', '--port', '0'])
    expect(out.stderr).toMatch(
      /^sluice: telemetry: needs the OpenTelemetry SDK \(@opentelemetry\/[a-z-]+ is missing\): npm install @opentelemetry\/api@1 @opentelemetry\/sdk-metrics@3 @opentelemetry\/exporter-metrics-otlp-http@0\.301 @opentelemetry\/resources@3\n$/,
    )
    expect(out.code).toBe(1)
  })

  it('openStore from sluice-server rejects with a StoreError naming what to install (ESM and CommonJS builds)', async () => {
    const dir = dirOf('alone')
    const body = `.openStore('redis://127.0.0.1:1', { prefix: 'x' }).then(
  () => console.log('opened'),
  (e) => console.log(JSON.stringify([e.name, e.code, e.message])),
)\n`
    await writeFile(join(dir, 'open.mjs'), `import * as server from 'sluice-server'\nserver${body}`)
    await writeFile(join(dir, 'open.cjs'), `require('sluice-server')${body}`)
    for (const file of ['open.mjs', 'open.cjs']) {
      const out = await node(dir, [file])
      expect(JSON.parse(out.stdout), file).toEqual([
        'StoreError',
        'SLUICE_STORE_ERROR',
        'the redis store needs ioredis: npm install ioredis',
      ])
    }
  })

  it('its declarations compile beside sluice, on TS 5 and 7 under every resolution', async () => {
    const failures = await typecheck(sources, 'server')
    expect(failures).toEqual([])
  }, 280_000)
})

describe(`sluice-server with ioredis ${lowest('ioredis', server)}, the lowest version its peer range declares`, () => {
  const { port } = inject('redis')

  it('`npx sluice serve --store redis://...` decides through a real redis-server', async () => {
    const service = await serve(dirOf('redis'), ['--store', `redis://127.0.0.1:${port}`, '--port', '0'], {
      SLUICE_LOG_LEVEL: 'warn',
    })
    try {
      expect(service.output()).toMatch(/sluice serving on \S+ \(store: redis:/)
      const key = `consumer-${process.pid}-${Date.now()}`
      const res = await fetch(`${service.url}/v1/check`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ policy: 'api', key }),
      })
      expect(res.status).toBe(200)
      expect(((await res.json()) as { allowed?: unknown }).allowed).toBe(true)
    } finally {
      await service.stop()
    }
  })
})
