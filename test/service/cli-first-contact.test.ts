// The CLI as a new user meets it: --version, a mistyped flag, `sluice init`, and which store
// `serve` and `check` choose (and say they chose) when the flags, SLUICE_STORE, REDIS_URL and the
// config disagree.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import { afterEach, beforeEach, describe, expect, inject, it } from 'vitest'
import { servingUrl, startCli } from '../helpers/cli-process.js'
import { post } from '../helpers/service.js'

const CLI = fileURLToPath(new URL('../../packages/sluice-server/dist/cli.js', import.meta.url))
const ROOT = fileURLToPath(new URL('../..', import.meta.url))

function sluice(args: string[], env: Record<string, string> = {}, cwd = ROOT) {
  return spawnSync(process.execPath, [CLI, ...args], {
    cwd,
    env: { ...process.env, SLUICE_STORE: '', REDIS_URL: '', SLUICE_CONFIG: '', ...env },
    encoding: 'utf8',
    timeout: 15_000,
  })
}

describe('sluice, first contact', () => {
  let dir: string
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'sluice-first-'))
  })
  afterEach(() => rmSync(dir, { recursive: true, force: true }))

  it('--version prints the package version', () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }
    const r = sluice(['--version'])
    expect(r.status).toBe(0)
    expect(r.stdout).toBe(`${version}\n`)
  })

  it('an unknown flag prints what was wrong and the usage line, not a stack trace', () => {
    for (const command of ['serve', 'check', 'init']) {
      const r = sluice([command, '--prot', '8080'])
      expect(r.status, command).toBe(2)
      const lines = r.stderr.trim().split('\n')
      expect(lines, r.stderr).toHaveLength(2)
      expect(lines[0]).toMatch(new RegExp(`^sluice ${command}: .*'--prot'`))
      expect(lines[1]).toMatch(new RegExp(`^Usage: sluice ${command} `))
      expect(r.stderr).not.toMatch(/\n\s+at /)
    }
  })

  it("a misspelled flag gets a did-you-mean naming the command's own flag", () => {
    const meant = { serve: ['--prot', '--port'], check: ['--stroe', '--store'], init: ['--forse', '--force'] }
    for (const [command, [typed, flag]] of Object.entries(meant)) {
      const r = sluice([command, typed!, 'x'])
      expect(r.status, command).toBe(2)
      expect(r.stderr.split('\n')[0]).toBe(
        `sluice ${command}: Unknown option '${typed}'; did you mean '${flag}'?`,
      )
    }
    // Nothing close: the plain message, no guess.
    expect(sluice(['serve', '--verbose']).stderr.split('\n')[0]).toBe(
      "sluice serve: Unknown option '--verbose'",
    )
  })

  it('serve --help names every store URL scheme', () => {
    const r = sluice(['serve', '--help'])
    for (const scheme of [
      'memory',
      'redis://',
      'rediss://',
      'redis+cluster://',
      'redis+sentinel://',
      'memcached://',
      'postgres://',
    ])
      expect(r.stdout, scheme).toContain(scheme)
  })

  it('init writes a commented starter that check accepts, and will not overwrite it', () => {
    const r = sluice(['init'], {}, dir)
    expect(r.status, r.stderr).toBe(0)
    const text = readFileSync(join(dir, 'sluice.yaml'), 'utf8')
    expect(text).toMatch(/^# /)
    expect(text).toMatch(/policies:/)
    const checked = sluice(['check', '--config', join(dir, 'sluice.yaml')])
    expect(checked.status, checked.stderr).toBe(0)
    expect(checked.stdout).toMatch(/api: token-bucket/)
    const again = sluice(['init'], {}, dir)
    expect(again.status).toBe(1)
    expect(again.stderr).toBe(`sluice: sluice.yaml exists; pass --force to overwrite it\n`)
    expect(sluice(['init', '--force'], {}, dir).status).toBe(0)
  })

  it("REDIS_URL beats the config's store: line, and check says so loudly; the flag and SLUICE_STORE beat both", () => {
    const written = join(dir, 'written.yaml')
    const unwritten = join(dir, 'unwritten.yaml')
    const policies = 'policies:\n  api: { algorithm: fixed-window, limit: 3, window: 1m }\n'
    writeFileSync(written, `store: memory\n${policies}`)
    writeFileSync(unwritten, policies)
    const redisUrl = { REDIS_URL: 'redis://127.0.0.1:1/0' }
    const storeLines = (out: string) =>
      out.split('\n').filter((l) => l.includes('sluice serve would use') || l.includes('WARNING'))
    expect(storeLines(sluice(['check', '--config', written], redisUrl).stdout)).toEqual([
      '  sluice serve would use: redis://127.0.0.1:1/0 (from REDIS_URL)',
      `  WARNING: the store is redis://127.0.0.1:1/0 (from REDIS_URL), not memory (from ${written} store:)`,
    ])
    expect(storeLines(sluice(['check', '--config', unwritten], redisUrl).stdout)).toEqual([
      '  sluice serve would use: redis://127.0.0.1:1/0 (from REDIS_URL)',
    ])
    expect(storeLines(sluice(['check', '--config', written]).stdout)).toEqual([
      `  sluice serve would use: memory (from ${written} store:)`,
    ])
    expect(storeLines(sluice(['check', '--config', unwritten]).stdout)).toEqual([
      '  sluice serve would use: memory (from default)',
    ])
    expect(
      storeLines(
        sluice(['check', '--config', written, '--store', 'redis://u:secret@h:1'], {
          SLUICE_STORE: 'memory?maxKeys=10',
          ...redisUrl,
        }).stdout,
      ),
    ).toEqual([
      '  sluice serve would use: redis://u:***@h:1 (from --store)',
      '  WARNING: the store is redis://u:***@h:1 (from --store), not memory?maxKeys=10 (from SLUICE_STORE)' +
        ` or redis://127.0.0.1:1/0 (from REDIS_URL) or memory (from ${written} store:)`,
    ])
    // The flag over the config alone is the user's own choice, stated by the `from`, no warning.
    expect(storeLines(sluice(['check', '--config', written, '--store', 'redis://h:1']).stdout)).toEqual([
      '  sluice serve would use: redis://h:1 (from --store)',
    ])
    // The same store given twice is no conflict.
    expect(storeLines(sluice(['check', '--config', written], { SLUICE_STORE: 'memory' }).stdout)).toEqual([
      '  sluice serve would use: memory (from SLUICE_STORE)',
    ])
  })

  it('serve counts on the Redis of REDIS_URL despite store: memory, and says so in its banner and log', async () => {
    const config = join(dir, 'sluice.yaml')
    writeFileSync(
      config,
      `store: memory\nprefix: paas-${process.pid}\npolicies:\n  api: { algorithm: fixed-window, limit: 3, window: 1m }\n`,
    )
    const redisUrl = inject('redis').url
    const cli = startCli(['serve', '--config', config, '--port', '0'], { REDIS_URL: redisUrl })
    const redis = new Redis(inject('redis').port, '127.0.0.1')
    try {
      const url = await servingUrl(cli)
      const key = `paas-${Date.now()}`
      expect((await post(`${url}/v1/check`, { policy: 'api', key })).body).toMatchObject({ allowed: true })
      expect(await redis.keys(`paas-${process.pid}:*${key}*`)).toHaveLength(1)
      const out = cli.output()
      expect(out).toContain(`(store: ${redisUrl}, config: ${config})`)
      expect(out).toContain(
        `  WARNING: the store is ${redisUrl} (from REDIS_URL), not memory (from ${config} store:)\n`,
      )
      const warned = out.split('\n').filter((line) => line.includes('"level":40'))
      expect(warned).toHaveLength(1)
      expect(JSON.parse(warned[0]!)).toMatchObject({ store: redisUrl, from: 'REDIS_URL' })
    } finally {
      redis.disconnect()
      cli.child.kill('SIGTERM')
      await cli.exited
    }
  })
})
