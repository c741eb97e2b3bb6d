// Inputs that would collide or slip through. Each case is sent to the real service over
// real sockets (raw bytes where fetch would clean them up), to the library through createLimiter, and
// to the config parser and the built CLI; each must be refused with a typed error and stored nothing.
import { execFile } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import {
  InvalidConfigError,
  InvalidCostError,
  InvalidOptionsError,
} from '../../packages/sluice/src/errors.js'
import { createHttpLimiter } from '../../packages/sluice/src/http/index.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { parseConfig } from '../../packages/sluice-server/src/server/config.js'
import { get, post, servicesClosedAfterEach } from '../helpers/service.js'
import { rawPost } from './raw.js'

const run = promisify(execFile)
const startService = servicesClosedAfterEach()

const YAML = `
policies:
  api: { algorithm: fixed-window, limit: 10, window: 1m }
  other: { algorithm: fixed-window, limit: 10, window: 1m }
tiers:
  pro: { api: { limit: 100 } }
`

const portOf = (url: string) => Number(new URL(url).port)

/** What is left of `key`'s budget under `policy` (a peek spends nothing). */
async function remaining(url: string, key: string, policy = 'api', tier?: string): Promise<number> {
  const res = await post(`${url}/v1/peek`, tier === undefined ? { policy, key } : { policy, key, tier })
  expect(res.status).toBe(200)
  return res.body.remaining as number
}

describe('keys: invalid UTF-8 and lone surrogates cannot share a budget', () => {
  it('refuses a body whose key bytes are not UTF-8 (400 invalid_utf8), and spends nothing', async () => {
    const { url } = await startService(YAML)
    const port = portOf(url)
    const body = (bytes: number[]) =>
      Buffer.concat([Buffer.from('{"policy":"api","key":"'), Buffer.from(bytes), Buffer.from('"}')])
    // Decoded with replacement, both would be the key "\uFFFD\uFFFD".
    for (const bytes of [
      [0xff, 0xfe],
      [0xff, 0xfd],
      [0xc3], // a truncated two-byte sequence
      [0xed, 0xa0, 0x80], // an encoded surrogate (CESU-8), not UTF-8
    ]) {
      const answer = await rawPost(port, '/v1/check', body(bytes))
      expect(answer.status, `bytes ${bytes}`).toBe(400)
      expect(answer.json?.error).toBe('invalid_utf8')
    }
    expect(await remaining(url, '\uFFFD\uFFFD')).toBe(10)
    expect(await remaining(url, '\uFFFD')).toBe(10)
    // Valid multi-byte UTF-8 still works, and is its own key.
    const ok = await rawPost(port, '/v1/check', body([0xc3, 0xa9]))
    expect(ok.status).toBe(200)
    expect(await remaining(url, 'é')).toBe(9)
  })

  it('refuses a key holding a lone surrogate escape (400 invalid_key): UTF-8 stores would merge them', async () => {
    const { url } = await startService(YAML)
    for (const key of ['\\ud800', 'a\\udfff', '\\udc00\\ud800']) {
      const res = await post(`${url}/v1/check`, `{"policy":"api","key":"${key}"}`)
      expect(res.status, key).toBe(400)
      expect(res.body.error).toBe('invalid_key')
    }
    // A well-formed pair is one code point and is fine.
    expect((await post(`${url}/v1/check`, '{"policy":"api","key":"\\ud83d\\ude00"}')).status).toBe(200)
    expect(await remaining(url, '😀')).toBe(9)
  })
})

describe('/v1/authz query: only decimal digits, no repeated parameters', () => {
  it('refuses every non-decimal cost (400 invalid_cost) and spends nothing', async () => {
    const { url } = await startService(YAML)
    for (const cost of [
      '0x10',
      '1e1',
      '+3',
      '%205',
      '5%20',
      '1.0',
      '-1',
      '0',
      '',
      '0b11',
      ' 5',
      'Infinity',
    ]) {
      const res = await get(`${url}/v1/authz?policy=api&cost=${cost}`)
      expect(res.status, `cost=${cost}`).toBe(400)
      expect(res.body.error).toBe('invalid_cost')
    }
    expect(await remaining(url, 'ip:127.0.0.1')).toBe(10)
    expect((await get(`${url}/v1/authz?policy=api&cost=3`)).status).toBe(200)
    expect(await remaining(url, 'ip:127.0.0.1')).toBe(7)
  })

  it('refuses a repeated query parameter (400 duplicate_parameter) and spends nothing', async () => {
    const { url } = await startService(YAML)
    for (const query of [
      'policy=api&policy=other',
      'policy=api&cost=1&cost=5',
      'policy=api&tier=pro&tier=pro',
    ]) {
      const res = await get(`${url}/v1/authz?${query}`)
      expect(res.status, query).toBe(400)
      expect(res.body.error).toBe('duplicate_parameter')
    }
    expect(await remaining(url, 'ip:127.0.0.1')).toBe(10)
    expect(await remaining(url, 'ip:127.0.0.1', 'other')).toBe(10)
    expect(await remaining(url, 'ip:127.0.0.1', 'api', 'pro')).toBe(100)
  })
})

describe('layered checks: "tier": null is an error, not the outer tier', () => {
  it('answers 400 invalid_body and charges no layer', async () => {
    const { url } = await startService(YAML)
    const res = await post(`${url}/v1/check`, {
      tier: 'pro',
      checks: [
        { policy: 'api', key: 'alice', tier: null },
        { policy: 'other', key: 'alice' },
      ],
    })
    expect(res.status).toBe(400)
    expect(res.body.error).toBe('invalid_body')
    expect(await remaining(url, 'alice', 'api', 'pro')).toBe(100)
    expect(await remaining(url, 'alice')).toBe(10)
    expect(await remaining(url, 'alice', 'other')).toBe(10)
  })
})

describe('library: cost null and sparse layered arrays are typed errors', () => {
  const policies = { api: { algorithm: 'fixed-window', limit: 10, window: '1m' } } as const

  it('cost: null is InvalidCostError on consume, peek and consumeSync, and spends nothing', async () => {
    const limiter = createLimiter({ policies })
    const nullCost = { cost: null as unknown as number }
    await expect(limiter.consume('api', 'k', nullCost)).rejects.toBeInstanceOf(InvalidCostError)
    await expect(limiter.peek('api', 'k', nullCost)).rejects.toBeInstanceOf(InvalidCostError)
    expect(() => limiter.consumeSync('api', 'k', nullCost)).toThrow(InvalidCostError)
    await expect(
      limiter.consume([{ policy: 'api', key: 'k', cost: null as unknown as number }]),
    ).rejects.toBeInstanceOf(InvalidCostError)
    expect((await limiter.peek('api', 'k')).remaining).toBe(10)
    // Leaving cost out still means 1.
    expect((await limiter.consume('api', 'k', {})).remaining).toBe(9)
  })

  it('a sparse or holey layered array is InvalidOptionsError, not a raw TypeError', async () => {
    const limiter = createLimiter({ policies })
    // biome-ignore lint/suspicious/noSparseArray: the hole is the input under test
    const sparse = [, { policy: 'api', key: 'k' }] as unknown as { policy: 'api'; key: string }[]
    const holes = new Array(2) as { policy: 'api'; key: string }[]
    const withNull = [null, { policy: 'api', key: 'k' }] as unknown as { policy: 'api'; key: string }[]
    for (const checks of [sparse, holes, withNull]) {
      await expect(limiter.consume(checks)).rejects.toBeInstanceOf(InvalidOptionsError)
      await expect(limiter.peek(checks)).rejects.toBeInstanceOf(InvalidOptionsError)
    }
    expect((await limiter.peek('api', 'k')).remaining).toBe(10)
  })
})

describe('IPv4 in IPv6 clothing keys as the IPv4 address, not as ::/64', () => {
  it('through the service: mapped (hex and dotted) and compatible forms spend 6.6.6.6', async () => {
    const { url } = await startService(YAML)
    const forms = [
      '::ffff:606:606',
      '::ffff:6.6.6.6',
      '0:0:0:0:0:ffff:0606:0606',
      '[::ffff:606:606]',
      '::6.6.6.6',
      '::606:606',
    ]
    for (const form of forms) {
      const res = await get(`${url}/v1/authz?policy=api`, { 'x-real-ip': form })
      expect(res.status, form).toBe(200)
    }
    expect(await remaining(url, 'ip:6.6.6.6')).toBe(10 - forms.length)
    expect(await remaining(url, 'ip:::/64')).toBe(10)
    // ::1 and :: stay IPv6 (loopback and unspecified are not IPv4-compatible addresses).
    expect((await get(`${url}/v1/authz?policy=api`, { 'x-real-ip': '::1' })).status).toBe(200)
    expect(await remaining(url, 'ip:::/64')).toBe(9)
    expect(await remaining(url, 'ip:0.0.0.1')).toBe(10)
  })

  it('through the HTTP core: the ip key of a mapped peer address is the IPv4 one', () => {
    const limiter = createLimiter({
      policies: { wide: { algorithm: 'fixed-window', limit: 100, window: '1m' } },
    })
    const core = createHttpLimiter({ limiter, rules: [{ policy: 'wide', key: 'ip' }] })
    const keyFrom = (remoteAddress: string) => {
      const outcome = core.check({
        method: 'GET',
        route: '/',
        path: '/',
        remoteAddress,
        header: () => undefined,
        raw: undefined,
      })
      if (outcome instanceof Promise) throw new Error('expected a synchronous outcome')
      return outcome.decision?.key
    }
    expect(keyFrom('::ffff:606:606')).toBe('ip:6.6.6.6')
    expect(keyFrom('::6.6.6.6')).toBe('ip:6.6.6.6')
    expect(keyFrom('::ffff:c633:6404')).toBe('ip:198.51.100.4')
    expect(keyFrom('::1')).toBe('ip:::/64')
  })
})

const ALIAS_BOMB = `a: &a [x, x, x, x, x, x, x, x, x]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
policies:
  api: { algorithm: fixed-window, limit: 10, window: 1m }
`
const PROTO_KEY = `policies:
  api: { algorithm: fixed-window, limit: 10, window: 1m }
  __proto__: { algorithm: fixed-window, limit: 1, window: 1m }
`
const NESTED_PROTO = `policies:
  api:
    algorithm: fixed-window
    limit: 10
    window: 1m
tiers:
  pro:
    __proto__: { limit: 1 }
`

describe('YAML: __proto__ keys and alias bombs are config errors with file:line', () => {
  it('parseConfig refuses a __proto__ key, naming its line', () => {
    expect(() => parseConfig(PROTO_KEY, 'proto.yaml')).toThrow(InvalidConfigError)
    expect(() => parseConfig(PROTO_KEY, 'proto.yaml')).toThrow(/^proto\.yaml:3: .*__proto__/)
    expect(() => parseConfig(NESTED_PROTO, 'nested.yaml')).toThrow(/^nested\.yaml:8: .*__proto__/)
  })

  it('parseConfig turns an alias bomb into InvalidConfigError naming file and line', () => {
    let error: unknown
    try {
      parseConfig(ALIAS_BOMB, 'bomb.yaml')
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(InvalidConfigError)
    expect((error as Error).message).toMatch(/^bomb\.yaml:\d+: .*alias/)
  })

  it('sluice check prints file:line and no stack for both (built CLI)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-inputs-'))
    const cli = resolve('packages/sluice-server/dist/cli.js')
    for (const [name, text, line] of [
      ['proto.yaml', PROTO_KEY, 3],
      ['bomb.yaml', ALIAS_BOMB, undefined],
    ] as const) {
      const file = join(dir, name)
      writeFileSync(file, text)
      const result = await run(process.execPath, [cli, 'check', '--config', file]).then(
        () => ({ code: 0, stderr: '' }),
        (error: { code: number; stderr: string }) => ({ code: error.code, stderr: error.stderr }),
      )
      expect(result.code, name).toBe(1)
      expect(result.stderr).toMatch(new RegExp(`^sluice: ${file.replace(/[.]/g, '\\.')}:${line ?? '\\d+'}: `))
      expect(result.stderr).not.toMatch(/\n\s+at /)
      expect(result.stderr).not.toMatch(/ReferenceError/)
    }
  })
})
