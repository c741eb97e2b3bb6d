// The admin bearer token. One rule for the YAML `admin.token`, the adminToken
// option and SLUICE_ADMIN_TOKEN (at least 16 characters, no surrounding whitespace), refused with
// SLUICE_INVALID_CONFIG and never echoed; failed attempts logged with the peer address; a compare
// of fixed-length digests, so no answer depends on how long the given token is.
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { pino } from 'pino'
import { describe, expect, it } from 'vitest'
import { InvalidConfigError } from '../../packages/sluice/src/errors.js'
import { parseConfig } from '../../packages/sluice-server/src/server/config.js'
import { createService } from '../../packages/sluice-server/src/server/service.js'
import { post, quietLogger, servicesClosedAfterEach } from '../helpers/service.js'

const CLI = fileURLToPath(new URL('../../packages/sluice-server/dist/cli.js', import.meta.url))
const POLICIES = 'policies:\n  api: { algorithm: fixed-window, limit: 5, window: 1m }\n'
const GOOD = 'a-good-admin-token-42'

// Each refused for a stated reason; none of them may appear in the error.
const BAD: [string, string, RegExp][] = [
  ['one character', 'x', /at least 16 characters/],
  ['15 characters', 'fifteen-chars!!', /at least 16 characters/],
  ['8 spaces', '        ', /at least 16 characters|whitespace/],
  ['20 spaces', ' '.repeat(20), /whitespace/],
  ['a leading space', ` ${GOOD}`, /whitespace/],
  ['a trailing tab', `${GOOD}\t`, /whitespace/],
]

const service = servicesClosedAfterEach()

describe('admin token rule: YAML, option and environment alike', () => {
  for (const [name, token, why] of BAD) {
    it(`refuses ${name}`, () => {
      const yaml = `${POLICIES}admin:\n  token: ${JSON.stringify(token)}\n`
      let thrown: unknown
      try {
        parseConfig(yaml, 'admin.yaml')
      } catch (error) {
        thrown = error
      }
      expect(thrown).toBeInstanceOf(InvalidConfigError)
      expect((thrown as InvalidConfigError).code).toBe('SLUICE_INVALID_CONFIG')
      expect((thrown as Error).message).toMatch(/^admin\.yaml:4: admin\.token: /)
      expect((thrown as Error).message).toMatch(why)
      if (token.trim().length > 3) expect((thrown as Error).message).not.toContain(token.trim())

      // The same token as the adminToken option (what SLUICE_ADMIN_TOKEN becomes): the same rule.
      const config = parseConfig(POLICIES, 'plain.yaml')
      expect(() => createService({ config, adminToken: token, logger: quietLogger })).toThrow(
        InvalidConfigError,
      )
      expect(() => createService({ config, adminToken: token, logger: quietLogger })).toThrow(why)
    })
  }

  it('accepts 16 characters and more', () => {
    expect(parseConfig(`${POLICIES}admin:\n  token: sixteen-chars-ok\n`, 'ok.yaml').adminToken).toBe(
      'sixteen-chars-ok',
    )
  })

  it('sluice serve refuses a bad SLUICE_ADMIN_TOKEN before listening, without printing it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-admin-'))
    try {
      const file = join(dir, 'sluice.yaml')
      writeFileSync(file, POLICIES)
      const runs = ['x', '        ', 'short-TOKEN-9'].map(
        (token) =>
          new Promise<{ code: number | null; out: string; token: string }>((resolve) => {
            const child = spawn(process.execPath, [CLI, 'serve', '--config', file, '--port', '0'], {
              env: { ...process.env, SLUICE_STORE: '', REDIS_URL: '', SLUICE_ADMIN_TOKEN: token },
              stdio: ['ignore', 'pipe', 'pipe'],
            })
            let out = ''
            child.stdout.on('data', (chunk: Buffer) => {
              out += chunk.toString()
            })
            child.stderr.on('data', (chunk: Buffer) => {
              out += chunk.toString()
            })
            // A token that is (wrongly) accepted leaves the service running: stop it after 5 s.
            const timer = setTimeout(() => child.kill('SIGKILL'), 5000)
            child.once('exit', (code) => {
              clearTimeout(timer)
              resolve({ code, out, token })
            })
          }),
      )
      for (const { code, out, token } of await Promise.all(runs)) {
        expect(code, out).toBe(1)
        expect(out).toMatch(
          /^sluice: SLUICE_ADMIN_TOKEN: (must be at least 16 characters|must not start or end with whitespace)/,
        )
        expect(out).not.toContain('sluice serving on')
        if (token.trim().length > 3) expect(out).not.toContain(token)
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe('admin endpoints: failed attempts', () => {
  it('are logged with the peer address (and never the token given)', async () => {
    const lines: string[] = []
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(chunk.toString())
        done()
      },
    })
    const r = await service(`${POLICIES}admin:\n  token: ${GOOD}\n`, {
      logger: pino({ level: 'info' }, sink),
    })
    const wrong = 'a-wrong-admin-token-99'
    const res = await post(
      `${r.url}/v1/reset`,
      { policy: 'api', key: 'k' },
      { authorization: `Bearer ${wrong}` },
    )
    expect(res).toMatchObject({ status: 401, body: { error: 'unauthorized' } })
    await post(`${r.url}/v1/block`, { policy: 'api', key: 'k', duration: '1m' })
    const failures = lines
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((l) => l.event === 'admin_auth_failed')
    expect(failures).toHaveLength(2)
    for (const failure of failures) {
      expect(failure.level).toBe(40)
      expect(failure.peer).toMatch(/^(::ffff:)?127\.0\.0\.1$/)
      expect(typeof failure.reqId).toBe('string')
    }
    expect(failures.map((f) => f.path)).toEqual(['/v1/reset', '/v1/block'])
    expect(lines.join('')).not.toContain(wrong)
    expect(lines.join('')).not.toContain(GOOD)
  })

  it('refuses a prefix, an extension or a differently sized token the same way; the token itself passes', async () => {
    const r = await service(`${POLICIES}admin:\n  token: ${GOOD}\n`)
    const attempt = (authorization: string) =>
      post(`${r.url}/v1/reset`, { policy: 'api', key: 'k' }, { authorization })
    for (const given of [
      GOOD.slice(0, -1),
      `${GOOD}x`,
      GOOD.slice(0, 1),
      'x'.repeat(4096),
      GOOD.toUpperCase(),
      `${GOOD.slice(0, -1)}é`,
    ]) {
      expect(await attempt(`Bearer ${given}`), given.slice(0, 24)).toMatchObject({
        status: 401,
        body: { error: 'unauthorized' },
      })
    }
    expect(await attempt(GOOD)).toMatchObject({ status: 401 })
    expect((await attempt(`Bearer ${GOOD}`)).status).toBe(200)
  })
})
