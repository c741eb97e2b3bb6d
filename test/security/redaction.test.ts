// Store passwords are never printed. The real CLI (dist/cli.js, `npm run -s build`
// first) against a real redis-server whose ACL users have passwords holding `/`, `@`, `:` and `%`:
// the banner, /readyz, the reload warning, `sluice check` and every error message hide them.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parseStoreUrl, redactStoreUrl } from '../../packages/sluice-server/src/server/store-url.js'
import { type CliProcess, startCli } from '../helpers/cli-process.js'
import type { RedisServer } from '../helpers/redis-harness.js'
import { redisCli, startRedis } from '../helpers/redis-harness.js'
import { freePort } from '../helpers/service.js'

const POLICIES = 'policies:\n  api: { algorithm: fixed-window, limit: 5, window: 1m }\n'

// Every password holds SECRET; no user name does. `written` is the password as it goes in the URL.
const USERS = [
  { user: 'alice', password: 'sec/ret-SECRET', written: 'sec/ret-SECRET' },
  { user: 'bob', password: 'p@ss-SECRET', written: 'p@ss-SECRET' },
  { user: 'carol', password: 'pa:ss-SECRET', written: 'pa:ss-SECRET' },
  { user: 'dave', password: '50%off-SECRET', written: '50%off-SECRET' },
  { user: 'erin', password: 'a/b@c:d%e-SECRET', written: 'a%2Fb%40c%3Ad%25e-SECRET' },
  { user: 'frank', password: 'x@y/z@SECRET', written: 'x@y/z@SECRET' },
] as const

type Proc = CliProcess
const start = (args: string[]): Proc => startCli(args)

async function until(what: string, test: () => boolean, proc: Proc, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!test()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; output:\n${proc.output()}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

describe('store passwords with / @ : % never reach output (real CLI, real Redis)', () => {
  let redis: RedisServer
  let dir: string

  beforeAll(async () => {
    redis = await startRedis()
    for (const { user, password } of USERS)
      expect(
        await redisCli(redis.port, 'ACL', 'SETUSER', user, 'on', `>${password}`, '~*', '&*', '+@all'),
      ).toBe('OK')
    dir = mkdtempSync(join(tmpdir(), 'sluice-redact-'))
  })

  afterAll(async () => {
    await redis?.stop()
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  })

  const urlOf = (u: (typeof USERS)[number]) => `redis://${u.user}:${u.written}@127.0.0.1:${redis.port}/0`

  it('the one parser reads each password whole (last @ before the host, percent-decoded)', () => {
    for (const u of USERS) {
      const spec = parseStoreUrl(urlOf(u))
      expect(spec).toMatchObject({ kind: 'redis', host: '127.0.0.1', port: redis.port, username: u.user })
      expect(spec.kind === 'redis' && spec.password).toBe(u.password)
      expect(redactStoreUrl(urlOf(u))).toBe(`redis://${u.user}:***@127.0.0.1:${redis.port}/0`)
    }
    expect(redactStoreUrl('redis://:sec/ret-SECRET@h:1')).toBe('redis://:***@h:1')
    expect(redactStoreUrl('redis://sec/ret-SECRET@h:1')).toBe('redis://***@h:1')
  })

  it('banner, /readyz and the reload warning of `sluice serve` hide the password', async () => {
    // One process per user, all at once.
    await Promise.all(
      USERS.map(async (u) => {
        const file = join(dir, `${u.user}.yaml`)
        writeFileSync(file, POLICIES)
        const port = await freePort()
        const proc = start(['serve', '--config', file, '--port', String(port), '--store', urlOf(u)])
        try {
          await until('the banner', () => proc.output().includes('sluice serving on'), proc)
          expect(proc.output()).toContain(`store: redis://${u.user}:***@127.0.0.1:${redis.port}/0`)
          const ready = await (await fetch(`http://127.0.0.1:${port}/readyz`)).text()
          expect(JSON.parse(ready)).toMatchObject({ ready: true, reachable: true })
          expect(ready).not.toContain('SECRET')
          // A reload that changes the store: logged as needing a restart, with the URL redacted.
          writeFileSync(file, `store: ${JSON.stringify(urlOf(u).replace('/0', '/1'))}\n${POLICIES}`)
          proc.child.kill('SIGHUP')
          await until('the reload warning', () => proc.output().includes('take effect on restart'), proc)
          expect(proc.output(), u.user).not.toContain('SECRET')
          expect(proc.output()).not.toContain(u.written)
        } finally {
          proc.child.kill('SIGKILL')
          await proc.exited
        }
      }),
    )
  })

  it('`sluice check` prints the config store redacted', async () => {
    await Promise.all(
      USERS.map(async (u) => {
        const file = join(dir, `check-${u.user}.yaml`)
        writeFileSync(file, `store: ${JSON.stringify(urlOf(u))}\n${POLICIES}`)
        const check = start(['check', '--config', file])
        expect(await check.exited, check.output()).toBe(0)
        expect(check.output()).toContain(`store: redis://${u.user}:***@127.0.0.1:${redis.port}/0`)
        expect(check.output()).not.toContain('SECRET')
      }),
    )
  })

  it('error messages (bad URL, unreachable store, bad config store) hide the password', async () => {
    const bad = [
      'redis://bob:p@ss-SECRET@127.0.0.1:99999',
      'redis://alice:sec/ret-SECRET@127.0.0.1:6379/notadb',
      'redis://:sec/ret-SECRET@',
      'redis://carol:pa:ss-SECRET@a,b',
      'nosuch://dave:50%off-SECRET@host',
    ]
    const file = join(dir, 'plain.yaml')
    writeFileSync(file, POLICIES)
    // Each URL through --store and, in a config file, through `sluice check`; the processes in parallel.
    await Promise.all(
      bad.map(async (url, i) => {
        const proc = start(['serve', '--config', file, '--port', '0', '--store', url])
        const checkFile = join(dir, `bad-store-${i}.yaml`)
        writeFileSync(checkFile, `store: ${JSON.stringify(url)}\n${POLICIES}`)
        const check = start(['check', '--config', checkFile])
        expect(await proc.exited).toBe(1)
        expect(proc.output()).toMatch(/sluice: store /)
        expect(proc.output(), url).not.toContain('SECRET')
        expect(await check.exited, `${url}: ${check.output()}`).toBe(1)
        expect(check.output()).toMatch(/bad-store-\d\.yaml:1: store: /)
        expect(check.output(), url).not.toContain('SECRET')
      }),
    )
    // Nothing listens on port 1: the connection error names the store, redacted.
    const unreachable = start([
      'serve',
      '--config',
      file,
      '--port',
      '0',
      '--store',
      'redis://bob:p@ss-SECRET@127.0.0.1:1',
    ])
    expect(await unreachable.exited).toBe(1)
    expect(unreachable.output()).toContain('cannot connect to redis://bob:***@127.0.0.1:1')
    expect(unreachable.output()).not.toContain('SECRET')
  })
})
