// The CLI as a new user meets it: --version, a mistyped flag, `sluice init`, and which store
// `serve` and `check` choose when the flags, SLUICE_STORE, the config and REDIS_URL disagree.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'

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

  it('an explicit store: line beats REDIS_URL; check reports the store serve would use and why', () => {
    const written = join(dir, 'written.yaml')
    const unwritten = join(dir, 'unwritten.yaml')
    const policies = 'policies:\n  api: { algorithm: fixed-window, limit: 3, window: 1m }\n'
    writeFileSync(written, `store: memory\n${policies}`)
    writeFileSync(unwritten, policies)
    const redisUrl = { REDIS_URL: 'redis://127.0.0.1:1/0' }
    const lineOf = (out: string) => out.split('\n').find((l) => l.includes('sluice serve would use'))
    expect(lineOf(sluice(['check', '--config', written], redisUrl).stdout)).toBe(
      `  sluice serve would use: memory (from ${written} store:)`,
    )
    expect(lineOf(sluice(['check', '--config', unwritten], redisUrl).stdout)).toBe(
      '  sluice serve would use: redis://127.0.0.1:1/0 (from REDIS_URL)',
    )
    expect(lineOf(sluice(['check', '--config', unwritten]).stdout)).toBe(
      '  sluice serve would use: memory (from default)',
    )
    expect(
      lineOf(sluice(['check', '--config', written, '--store', 'redis://h:1'], { SLUICE_STORE: 'x' }).stdout),
    ).toBe('  sluice serve would use: redis://h:1 (from --store)')
    // serve follows the same rule: with the written config it starts on memory despite REDIS_URL
    // (a dead Redis at port 1 would stop the start).
    const served = spawnSync(
      process.execPath,
      [
        '-e',
        `const { spawn } = require('node:child_process');
         const c = spawn(process.execPath, [${JSON.stringify(CLI)}, 'serve', '--config', ${JSON.stringify(written)}, '--port', '0'], { env: { ...process.env, REDIS_URL: 'redis://127.0.0.1:1/0', SLUICE_STORE: '' } });
         let out = ''; c.stdout.on('data', (d) => { out += d; if (out.includes('serving on')) { c.kill('SIGTERM') } });
         c.stderr.on('data', (d) => { out += d });
         c.on('exit', () => { process.stdout.write(out) })`,
      ],
      { encoding: 'utf8', timeout: 15_000 },
    )
    expect(served.stdout).toMatch(/sluice serving on http:\/\/127\.0\.0\.1:\d+ \(store: memory,/)
  })
})
