// A flood of new keys must not erase another key's lockout. The memory store
// evicts keys that would admit before keys that deny or are blocked, and a policy's own `maxKeys`
// caps its share, so a flood of one policy evicts only that policy's keys. Attacked through the
// library and through the real `sluice serve` process (dist/cli.js, built by `npm test`).
import { type ChildProcess, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { CLI, startCli } from '../helpers/cli-process.js'
import { freePort, post } from '../helpers/service.js'

const login = { algorithm: 'sliding-window-log', limit: 5, window: '15m' } as const
const api = { algorithm: 'token-bucket', limit: 1_000_000, window: '1s' } as const

/** Five failed logins and a sixth attempt: alice is locked out for 15 minutes. */
function lockOut(consume: (key: string) => { allowed: boolean }, key = 'alice'): void {
  for (let i = 0; i < 5; i++) expect(consume(key).allowed).toBe(true)
  expect(consume(key).allowed).toBe(false)
}

describe('memory store: eviction never resets a lockout (library)', () => {
  it('110,000 distinct keys of another policy leave alice locked out (store maxKeys 10,000)', () => {
    let clock = 1_700_000_000_000
    const store = memoryStore({ maxKeys: 10_000, now: () => clock })
    const limiter = createLimiter({ store, policies: { login, api } })
    lockOut((k) => limiter.consumeSync('login', k))
    for (let i = 0; i < 110_000; i++) {
      limiter.consumeSync('api', `flood-${i}`)
      if (i % 10_000 === 0) clock += 1
    }
    expect(store.size).toBeLessThanOrEqual(10_000)
    expect(limiter.consumeSync('login', 'alice')).toMatchObject({ allowed: false, remaining: 0 })
  })

  it('a flood of keys of the same policy that would admit evicts them, not the locked-out key', () => {
    const store = memoryStore({ maxKeys: 1_000, now: () => 1_700_000_000_000 })
    const limiter = createLimiter({ store, policies: { login } })
    lockOut((k) => limiter.consumeSync('login', k))
    // One attempt per guessed user name: each key still admits, so each is worth less than alice's.
    for (let i = 0; i < 11_000; i++) limiter.consumeSync('login', `guess-${i}`)
    expect(store.size).toBeLessThanOrEqual(1_000)
    expect(limiter.consumeSync('login', 'alice').allowed).toBe(false)
  })

  it('a lockout reached through layered checks outlives the flood too', async () => {
    const store = memoryStore({ maxKeys: 1_000, now: () => 1_700_000_000_000 })
    const limiter = createLimiter({ store, policies: { login, api } })
    const attempt = () =>
      limiter.consume([
        { policy: 'login', key: 'alice' },
        { policy: 'api', key: 'alice' },
      ])
    for (let i = 0; i < 5; i++) expect((await attempt()).allowed).toBe(true)
    expect(await attempt()).toMatchObject({ allowed: false, deniedBy: 'login' })
    for (let i = 0; i < 11_000; i++) limiter.consumeSync('api', `flood-${i}`)
    expect(await attempt()).toMatchObject({ allowed: false, deniedBy: 'login' })
  })

  it('a blocked key outlives a flood of open keys', async () => {
    const store = memoryStore({ maxKeys: 1_000, now: () => 1_700_000_000_000 })
    const limiter = createLimiter({ store, policies: { login, api } })
    await limiter.block('login', 'mallory', '1h')
    for (let i = 0; i < 11_000; i++) limiter.consumeSync('api', `flood-${i}`)
    expect(await limiter.consume('login', 'mallory')).toMatchObject({ allowed: false, reason: 'blocked' })
  })

  it("per-policy maxKeys: a flood of one policy evicts only that policy's keys", () => {
    const store = memoryStore({ maxKeys: 1_000_000, now: () => 1_700_000_000_000 })
    const limiter = createLimiter({
      store,
      policies: { login: { ...login, maxKeys: 2_000 }, api: { ...api, maxKeys: 5_000 } },
    })
    lockOut((k) => limiter.consumeSync('login', k))
    // 500 users with a failed attempt or two: partial counts, which a flood must not wipe either.
    for (let i = 0; i < 500; i++) limiter.consumeSync('login', `user-${i}`)
    for (let i = 0; i < 55_000; i++) limiter.consumeSync('api', `flood-${i}`)
    expect(store.size).toBeLessThanOrEqual(5_000 + 501)
    expect(limiter.consumeSync('login', 'alice').allowed).toBe(false)
    for (let i = 0; i < 500; i++) {
      // Still remembered: the second attempt leaves 3, not the 4 of a fresh key.
      expect(limiter.consumeSync('login', `user-${i}`).remaining, `user-${i}`).toBe(3)
    }
  })

  it("per-policy maxKeys holds a flood of keys that all deny to the policy's own share", () => {
    const store = memoryStore({ maxKeys: 1_000_000, now: () => 1_700_000_000_000 })
    const once = { algorithm: 'fixed-window', limit: 1, window: '1h', maxKeys: 1_000 } as const
    const limiter = createLimiter({ store, policies: { login, once } })
    lockOut((k) => limiter.consumeSync('login', k))
    // Every flood key is at its limit after one request: as "held" as alice, but of another policy.
    for (let i = 0; i < 11_000; i++) limiter.consumeSync('once', `flood-${i}`)
    expect(store.size).toBeLessThanOrEqual(1_001)
    expect(limiter.consumeSync('login', 'alice').allowed).toBe(false)
  })

  it('the documented bound: only maxKeys lockouts of the same policy displace one', () => {
    const store = memoryStore({ now: () => 1_700_000_000_000 })
    const limiter = createLimiter({ store, policies: { login: { ...login, maxKeys: 100 } } })
    lockOut((k) => limiter.consumeSync('login', k))
    // 99 more lockouts fill the policy's share (alice + 99): nothing needs to go yet.
    for (let i = 0; i < 99; i++) lockOut((k) => limiter.consumeSync('login', k), `victim-${i}`)
    expect(limiter.consumeSync('login', 'alice').allowed).toBe(false)
    // The attacker paid 99 x 6 requests; the next new key must evict a held one: the oldest.
    limiter.consumeSync('login', 'one-more')
    expect(limiter.consumeSync('login', 'alice').allowed).toBe(true)
  })

  it('maxKeys of a policy must be a positive whole number', () => {
    const limiter = createLimiter({ policies: { login: { ...login, maxKeys: 10 } } })
    expect(limiter.policies.login.maxKeys).toBe(10)
    for (const maxKeys of [0, -1, 1.5, '10', Number.POSITIVE_INFINITY]) {
      expect(
        () => createLimiter({ policies: { login: { ...login, maxKeys } as never } }),
        String(maxKeys),
      ).toThrow(
        expect.objectContaining({
          code: 'SLUICE_INVALID_POLICY',
          message: expect.stringMatching(
            /^policies\.login\.maxKeys: .*(positive whole number|must be a number)/,
          ),
        }),
      )
    }
  })
})

// The real service process, the way an operator runs it.

interface Proc {
  child: ChildProcess
  output: () => string
  exited: Promise<number | null>
}

const running: Proc[] = []
const dirs: string[] = []

afterEach(async () => {
  for (const proc of running.splice(0)) {
    if (proc.child.exitCode === null) {
      proc.child.kill('SIGKILL')
      await proc.exited
    }
  }
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

async function serve(yaml: string, args: string[] = []): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-evict-'))
  dirs.push(dir)
  const file = join(dir, 'sluice.yaml')
  writeFileSync(file, yaml)
  const port = await freePort()
  const proc = startCli(['serve', '--config', file, '--port', String(port), ...args])
  running.push(proc)
  const { child, output } = proc
  const url = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 10_000
  while (!output().includes(`sluice serving on ${url}`)) {
    if (child.exitCode !== null || Date.now() > deadline)
      throw new Error(`sluice serve did not start:\n${output()}`)
    await new Promise((r) => setTimeout(r, 50))
  }
  return url
}

const check = async (url: string, policy: string, key: string) =>
  (await post(`${url}/v1/check`, { policy, key })).body as { allowed: boolean; remaining: number }

/** `count` distinct keys of `policy` through POST /v1/check, 32 per layered request, 8 requests at a time. */
async function flood(url: string, policy: string, count: number): Promise<void> {
  const bodies: unknown[] = []
  for (let i = 0; i < count; i += 32) {
    const checks = []
    for (let j = i; j < Math.min(count, i + 32); j++) checks.push({ policy, key: `flood-${j}` })
    bodies.push({ checks })
  }
  for (let i = 0; i < bodies.length; i += 8) {
    const answers = await Promise.all(bodies.slice(i, i + 8).map((b) => post(`${url}/v1/check`, b)))
    for (const a of answers) expect(a.status).toBeLessThan(500)
  }
}

async function lockOutOver(url: string, key = 'alice'): Promise<void> {
  for (let i = 0; i < 5; i++) expect((await check(url, 'login', key)).allowed).toBe(true)
  expect((await check(url, 'login', key)).allowed).toBe(false)
}

describe('sluice serve: eviction never resets a lockout (real process)', () => {
  it('YAML store: memory?maxKeys=1000, a flood of 11,000 keys of another policy over HTTP', async () => {
    const url = await serve(
      [
        'store: memory?maxKeys=1000',
        'policies:',
        '  login: { algorithm: sliding-window-log, limit: 5, window: 15m }',
        '  api: { algorithm: token-bucket, limit: 1000000, window: 1s }',
        '',
      ].join('\n'),
    )
    await lockOutOver(url)
    await flood(url, 'api', 11_000)
    expect(await check(url, 'login', 'alice')).toMatchObject({ allowed: false, remaining: 0 })
  })

  it('--store memory?maxKeys=N and per-policy maxKeys in YAML: the flood stays in its own share', async () => {
    const url = await serve(
      [
        'policies:',
        '  login: { algorithm: sliding-window-log, limit: 5, window: 15m, maxKeys: 100 }',
        '  api: { algorithm: fixed-window, limit: 1, window: 1h, maxKeys: 500 }',
        '',
      ].join('\n'),
      ['--store', 'memory?maxKeys=100000'],
    )
    await lockOutOver(url)
    expect((await check(url, 'login', 'bob')).remaining).toBe(4)
    // Every flood key is at its limit after one request (limit 1): held, like alice, but api's.
    await flood(url, 'api', 5_500)
    expect(await check(url, 'login', 'alice')).toMatchObject({ allowed: false, remaining: 0 })
    expect((await check(url, 'login', 'bob')).remaining).toBe(3)
  })

  it('a bad maxKeys in the store URL or a policy stops the service with a message', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-evict-'))
    dirs.push(dir)
    const file = join(dir, 'sluice.yaml')
    writeFileSync(
      file,
      'policies:\n  login: { algorithm: fixed-window, limit: 5, window: 1m, maxKeys: 50 }\n',
    )
    const good = spawnSync(process.execPath, [CLI, 'check', '--config', file], { encoding: 'utf8' })
    expect(good.status, good.stderr).toBe(0)
    writeFileSync(file, 'policies:\n  login: { algorithm: fixed-window, limit: 5, window: 1m, maxKeys: 0 }\n')
    const badPolicy = spawnSync(process.execPath, [CLI, 'check', '--config', file], { encoding: 'utf8' })
    expect(badPolicy.status).not.toBe(0)
    expect(badPolicy.stderr + badPolicy.stdout).toMatch(/maxKeys: .*positive whole number/)
    writeFileSync(file, 'policies:\n  login: { algorithm: fixed-window, limit: 5, window: 1m }\n')
    const badUrl = spawnSync(
      process.execPath,
      [CLI, 'serve', '--config', file, '--port', '0', '--store', 'memory?maxKeys=lots'],
      { encoding: 'utf8', env: { ...process.env, SLUICE_STORE: '', REDIS_URL: '' }, timeout: 10_000 },
    )
    expect(badUrl.status).not.toBe(0)
    expect(badUrl.stderr + badUrl.stdout).toMatch(/maxKeys.*whole number/)
  })
})
