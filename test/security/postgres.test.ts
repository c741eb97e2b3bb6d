// The PostgreSQL store through the real service: `sluice serve --store postgres://...` (dist/cli.js,
// `npm run -s build` first) against the real server of the global setup. Hostile keys over HTTP
// (SQL in quotes, NUL, unicode, the longest key allowed and one byte more) are parameters, never SQL:
// each is its own counter, the table survives, and an oversized key is a typed 400 that stores
// nothing. Passwords (in the user part or as ?password=) are never printed.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { postgresKey } from '../../packages/sluice/src/stores/postgres/index.js'
import { parseStoreUrl, redactStoreUrl } from '../../packages/sluice-server/src/server/store-url.js'
import { type CliProcess, startCli } from '../helpers/cli-process.js'
import { freePort, post } from '../helpers/service.js'

const POLICIES = 'policies:\n  api: { algorithm: fixed-window, limit: 1, window: 1m }\n'

async function until(what: string, test: () => boolean, proc: CliProcess, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!test()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; output:\n${proc.output()}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

describe('sluice serve --store postgres:// (real CLI, real PostgreSQL)', () => {
  const { port: pgPort } = inject('postgres')
  // The test server trusts every connection: the password is never checked, only carried.
  const url = `postgres://sluice:p%40ss/w-SECRET@127.0.0.1:${pgPort}/postgres`
  let dir: string
  let pool: pg.Pool
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'sluice-pg-sec-'))
    writeFileSync(join(dir, 'sluice.yaml'), POLICIES)
    pool = new pg.Pool({ connectionString: inject('postgres').url, max: 2 })
  })
  afterAll(async () => {
    await pool.end()
    rmSync(dir, { recursive: true, force: true })
  })

  it('parses and redacts postgres URLs, whatever carries the password', () => {
    expect(parseStoreUrl(url)).toMatchObject({
      kind: 'postgres',
      // Written out again for pg with every part encoded: the password's / can't move the host.
      connectionString: `postgres://sluice:p%40ss%2Fw-SECRET@127.0.0.1:${pgPort}/postgres`,
      redacted: `postgres://sluice:***@127.0.0.1:${pgPort}/postgres`,
    })
    expect(redactStoreUrl('postgresql://h/db?user=u&password=SECRET&sslmode=require')).toBe(
      'postgresql://h/db?user=u&password=***&sslmode=require',
    )
    expect(redactStoreUrl('postgres://sluice@h:5432/db')).toBe('postgres://sluice@h:5432/db')
    expect(() => parseStoreUrl('postgres://u:SECRET@bad host/db')).toThrow(/is not host:port/)
    try {
      parseStoreUrl('postgres://u:SECRET@bad host/db')
    } catch (error) {
      expect((error as Error).message).not.toContain('SECRET')
    }
  })

  it('serves decisions; hostile keys are parameters: each its own counter, the table intact', async () => {
    const port = await freePort()
    const proc = startCli([
      'serve',
      '--config',
      join(dir, 'sluice.yaml'),
      '--port',
      String(port),
      '--store',
      url,
    ])
    try {
      await until('the banner', () => proc.output().includes('sluice serving on'), proc)
      expect(proc.output()).toContain(`store: postgres://sluice:***@127.0.0.1:${pgPort}/postgres`)
      const ready = await (await fetch(`http://127.0.0.1:${port}/readyz`)).text()
      expect(JSON.parse(ready)).toMatchObject({ ready: true, reachable: true })
      expect(ready).not.toContain('SECRET')

      const run = `${process.pid}-${Date.now()}`
      const keys = [
        `${run} '; DROP TABLE sluice_limits; --`,
        `${run} ') OR 1=1; --`,
        `${run} nul \u0000 byte`,
        `${run} ünïcødé 🚦`,
        `${run} $1 %s \\x00`,
        `${run}-${'k'.repeat(1024 - run.length - 1)}`, // exactly 1,024 bytes: the longest allowed
      ]
      for (const key of keys) {
        const first = await post(`http://127.0.0.1:${port}/v1/check`, { policy: 'api', key })
        expect(first.status, JSON.stringify(first.body)).toBe(200)
        expect(first.body.allowed).toBe(true)
      }
      for (const key of keys) {
        const again = await post(`http://127.0.0.1:${port}/v1/check`, { policy: 'api', key })
        expect(again.body.allowed, key.slice(0, 40)).toBe(false)
      }
      // One row per key (the service's internal policy id), and the table is still there.
      const stored = async () =>
        Number(
          (
            await pool.query('SELECT count(*) AS n FROM sluice_limits WHERE key = ANY($1)', [
              keys.map((k) => postgresKey(k)),
            ])
          ).rows[0].n,
        )
      expect(await stored()).toBe(keys.length)
      const before = Number((await pool.query('SELECT count(*) AS n FROM sluice_limits')).rows[0].n)
      const tooLong = await post(`http://127.0.0.1:${port}/v1/check`, {
        policy: 'api',
        key: `${run}-${'k'.repeat(1024 - run.length)}`,
      })
      expect(tooLong.status).toBe(400)
      expect(tooLong.body.error).toBe('key_too_long')
      expect(Number((await pool.query('SELECT count(*) AS n FROM sluice_limits')).rows[0].n)).toBe(before)
      expect(proc.output()).not.toContain('SECRET')
    } finally {
      proc.child.kill('SIGKILL')
      await proc.exited
    }
  })

  it('an unreachable database stops the start with one redacted line', async () => {
    const proc = startCli([
      'serve',
      '--config',
      join(dir, 'sluice.yaml'),
      '--port',
      '0',
      '--store',
      'postgres://u:p@ss-SECRET@127.0.0.1:1/db',
    ])
    expect(await proc.exited).toBe(1)
    expect(proc.output()).toContain('cannot connect to postgres://u:***@127.0.0.1:1/db')
    expect(proc.output()).not.toContain('SECRET')
  })

  it('a YAML store: line works the same, and `sluice check` prints it redacted', async () => {
    const file = join(dir, 'with-store.yaml')
    writeFileSync(file, `store: ${JSON.stringify(url)}\n${POLICIES}`)
    const check = startCli(['check', '--config', file])
    expect(await check.exited, check.output()).toBe(0)
    expect(check.output()).toContain(`postgres://sluice:***@127.0.0.1:${pgPort}/postgres`)
    expect(check.output()).not.toContain('SECRET')
    const port = await freePort()
    const proc = startCli(['serve', '--config', file, '--port', String(port)])
    try {
      await until('the banner', () => proc.output().includes('sluice serving on'), proc)
      expect(proc.output()).toContain(`store: postgres://sluice:***@127.0.0.1:${pgPort}/postgres`)
      const res = await post(`http://127.0.0.1:${port}/v1/check`, {
        policy: 'api',
        key: `yaml-${Date.now()}`,
      })
      expect(res.body.allowed).toBe(true)
    } finally {
      proc.child.kill('SIGKILL')
      await proc.exited
    }
  })
})
