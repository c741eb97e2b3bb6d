// Config loading: the example config, every error naming file, line and path, tiers, store URLs.
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { InvalidConfigError } from '../../packages/sluice/src/errors.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import {
  describeConfig,
  limiterPolicies,
  loadConfig,
  parseConfig,
} from '../../packages/sluice-server/src/server/config.js'
import { parseStoreUrl, redactStoreUrl } from '../../packages/sluice-server/src/server/store-url.js'

const EXAMPLE = fileURLToPath(new URL('../../packages/sluice-server/examples/sluice.yaml', import.meta.url))
const API = '  api: { algorithm: token-bucket, limit: 100, window: 1m }\n'

function errorOf(text: string): InvalidConfigError {
  try {
    parseConfig(text, 'conf.yaml')
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidConfigError)
    expect((error as InvalidConfigError).code).toBe('SLUICE_INVALID_CONFIG')
    return error as InvalidConfigError
  }
  throw new Error('expected the config to be refused')
}

describe('the example config', () => {
  it('loads with every key the issue lists', async () => {
    const config = await loadConfig(EXAMPLE)
    expect(config.store).toBe('memory')
    expect(config.prefix).toBe('sluice')
    expect(config.onStoreError).toBe('open')
    expect(config.policyNames).toEqual(['api', 'login', 'perIp'])
    expect(config.tierNames).toEqual(['pro', 'enterprise'])
    expect(config.lookup('login')?.onStoreError).toBe('closed')
    expect(config.lookup('api')?.onStoreError).toBe('open')
    expect(config.lookup('api', 'pro')?.resolved).toMatchObject({
      limit: 1000,
      capacity: 200,
      windowMs: 60_000,
    })
    expect(config.lookup('api', 'enterprise')?.resolved).toMatchObject({ limit: 10_000, capacity: 2000 })
    // A tier without an override for a policy uses the policy as written.
    expect(config.lookup('login', 'pro')).toBe(config.lookup('login'))
    expect(config.lookup('api', 'gold')).toBeUndefined()
    expect(describeConfig(config)).toContain('api (tier pro): token-bucket, 1000 per 60000ms, capacity 200')
  })

  it('hands createLimiter one policy per policy x tier, each with its effective onStoreError', async () => {
    const config = await loadConfig(EXAMPLE)
    const policies = limiterPolicies(config)
    expect(Object.keys(policies)).toHaveLength(5)
    for (const entry of config.entries.values()) {
      expect(policies[entry.displayName]).toMatchObject({ id: entry.id, onStoreError: entry.onStoreError })
    }
    expect(policies.login).toMatchObject({ onStoreError: 'closed' })
    expect(policies.api).toMatchObject({ onStoreError: 'open' })
    const limiter = createLimiter({ policies })
    const pro = config.lookup('api', 'pro')!
    expect(pro.displayName).toBe('api.pro')
    expect((await limiter.consume('api.pro', 'k')).limit).toBe(200)
  })

  it('names limiter policies as configured, with storage ids by policy, tier and state shape', () => {
    const a = parseConfig(`policies:\n${API}tiers:\n  pro: { api: { limit: 5 } }\n`, 'a')
    const b = parseConfig(`policies:\n${API.replace('limit: 100', 'limit: 7')}`, 'b')
    const c = parseConfig(`policies:\n${API.replace('1m', '2m')}`, 'c')
    expect(a.lookup('api')).toMatchObject({
      displayName: 'api',
      id: expect.stringMatching(/^api\._\.[0-9a-f]{6}$/),
    })
    expect(a.lookup('api', 'pro')).toMatchObject({
      displayName: 'api.pro',
      id: expect.stringMatching(/^api\.pro\.[0-9a-f]{6}$/),
    })
    expect(b.lookup('api')!.id).toBe(a.lookup('api')!.id)
    expect(c.lookup('api')!.id).not.toBe(a.lookup('api')!.id)
    expect(a.lookup('api')!.resolved).toMatchObject({ name: 'api', id: a.lookup('api')!.id })
  })

  it('refuses an id in a policy or a tier: the service gives each its storage id', () => {
    expect(() =>
      parseConfig(`policies:\n  api: { algorithm: gcra, limit: 1, window: 1s, id: x }\n`, 'i.yaml'),
    ).toThrow(/policies\.api\.id: the service gives each policy its storage id/)
    expect(() => parseConfig(`policies:\n${API}tiers:\n  pro: { api: { id: x } }\n`, 'i.yaml')).toThrow(
      /tiers\.pro\.api\.id: the service gives/,
    )
  })
})

describe('config errors name file, line and path', () => {
  const cases: [string, string, string][] = [
    [
      'a spelled-out duration',
      `policies:\n  api:\n    algorithm: token-bucket\n    limit: 100\n    window: "10 minutes"\n`,
      'conf.yaml:5: policies.api.window: "10 minutes" is not a duration, use 10m',
    ],
    [
      'a bad duration',
      `policies:\n  api: { algorithm: fixed-window, limit: 1, window: soon }\n`,
      'conf.yaml:2: policies.api.window: "soon" is not a duration',
    ],
    [
      'an unknown algorithm',
      `policies:\n  x: 1\n  api: { algorithm: leaky, limit: 1, window: 1s }\n`,
      'conf.yaml:2: policies.x: must be a map',
    ],
    [
      'an unknown algorithm name',
      `policies:\n  api: { algorithm: leaky, limit: 1, window: 1s }\n`,
      'conf.yaml:2: policies.api.algorithm: "leaky" is not an algorithm',
    ],
    [
      'a negative limit',
      `policies:\n${API}\n  b:\n    algorithm: gcra\n    limit: -3\n    window: 1s\n`,
      'conf.yaml:6: policies.b.limit: limit must be a positive whole number',
    ],
    [
      'an unknown policy option',
      `policies:\n  api: { algorithm: gcra, limit: 1, window: 1s, brust: 3 }\n`,
      "conf.yaml:2: policies.api: unknown option 'brust'; did you mean 'burst'?",
    ],
    ['an unknown top-level key', `policies:\n${API}polices: {}\n`, 'conf.yaml:3: polices: unknown key'],
    [
      'a bad onStoreError',
      `onStoreError: maybe\npolicies:\n${API}`,
      'conf.yaml:1: onStoreError: must be one of open, closed, memory',
    ],
    [
      'a bad per-policy onStoreError',
      `policies:\n  api: { algorithm: gcra, limit: 1, window: 1s, onStoreError: later }\n`,
      'conf.yaml:2: policies.api.onStoreError: must be one of open, closed, memory',
    ],
    [
      'a tier of an unknown policy',
      `policies:\n${API}tiers:\n  pro:\n    web: { limit: 3 }\n`,
      'conf.yaml:5: tiers.pro.web: no policy named web',
    ],
    [
      'a bad tier override',
      `policies:\n${API}tiers:\n  pro:\n    api:\n      window: 1 hour\n`,
      'conf.yaml:6: tiers.pro.api.window: "1 hour" is not a duration, use 1h',
    ],
    [
      'a tier burst on a policy without one',
      `policies:\n  login: { algorithm: sliding-window-log, limit: 5, window: 15m }\ntiers:\n  pro: { login: { burst: 9 } }\n`,
      'conf.yaml:4: tiers.pro.login.burst: only token-bucket and gcra take a burst',
    ],
    ['no policies', `store: memory\n`, 'conf.yaml:1: policies: is required'],
    ['empty policies', `policies: {}\n`, 'conf.yaml:1: policies: define at least one policy'],
    [
      'a dotted policy name',
      `policies:\n  a.b: { algorithm: gcra, limit: 1, window: 1s }\n`,
      'conf.yaml:2: policies.a.b: a policy name is a letter',
    ],
    [
      'a short admin token',
      `policies:\n${API}admin:\n  token: abc\n`,
      'conf.yaml:4: admin.token: must be at least 16 characters',
    ],
    ['a non-string store', `store: 5\npolicies:\n${API}`, 'conf.yaml:1: store: must be a store URL'],
    ['broken YAML', `policies:\n  api: { algorithm: gcra\n`, 'conf.yaml:3: not valid YAML'],
    ['a duplicate key', `policies:\n${API}${API}`, 'conf.yaml:3: not valid YAML: Map keys must be unique'],
    ['not a map', `- 1\n- 2\n`, 'conf.yaml:1: the config must be a YAML map'],
  ]
  for (const [name, text, message] of cases) {
    it(name, () => {
      expect(errorOf(text).message).toContain(message)
    })
  }

  it('a file that cannot be read', async () => {
    await expect(loadConfig('/nonexistent/sluice.yaml')).rejects.toMatchObject({
      code: 'SLUICE_INVALID_CONFIG',
    })
  })
})

describe('store URLs', () => {
  it('parses every form', () => {
    expect(parseStoreUrl('memory')).toEqual({ kind: 'memory', redacted: 'memory' })
    expect(parseStoreUrl('redis://127.0.0.1:6380/2')).toMatchObject({
      kind: 'redis',
      tls: false,
      host: '127.0.0.1',
      port: 6380,
      db: 2,
    })
    expect(parseStoreUrl('redis://cache')).toMatchObject({ host: 'cache', port: 6379, db: 0 })
    expect(parseStoreUrl('rediss://user:p%40ss@cache:6390')).toMatchObject({
      tls: true,
      username: 'user',
      password: 'p@ss',
      port: 6390,
    })
    expect(parseStoreUrl('redis://secret@cache')).toMatchObject({ username: undefined, password: 'secret' })
    expect(parseStoreUrl('redis+cluster://h1:7000,h2:7001')).toMatchObject({
      kind: 'cluster',
      nodes: [
        { host: 'h1', port: 7000 },
        { host: 'h2', port: 7001 },
      ],
    })
  })

  it('refuses the rest, saying what to write', () => {
    for (const url of [
      'mysql://x',
      'redis://',
      'redis://h:99999',
      'redis://h/abc',
      'redis://a:1,b:2',
      'redis+cluster://h:1/0',
      'localhost:6379',
    ]) {
      expect(() => parseStoreUrl(url), url).toThrow(/use memory, redis:\/\/host:port/)
    }
  })

  it('hides passwords', () => {
    expect(redactStoreUrl('redis://user:hunter2@h:1')).toBe('redis://user:***@h:1')
    expect(redactStoreUrl('redis://hunter2@h:1')).toBe('redis://***@h:1')
    expect(redactStoreUrl('redis://h:1')).toBe('redis://h:1')
  })
})
