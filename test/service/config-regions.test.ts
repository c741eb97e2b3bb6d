// The `store:` block with regions: parsed into the local region, each region's URL and the sync
// period; every mistake refused with file:line and path; passwords never printed; `scope` per policy.
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { InvalidConfigError } from '../../packages/sluice/src/errors.js'
import { describeConfig, parseConfig } from '../../packages/sluice-server/src/server/config.js'

const API = '  api: { algorithm: sliding-window-counter, limit: 100, window: 1m, scope: global }\n'
const PER_IP = '  perIp: { algorithm: sliding-window-counter, limit: 10, window: 1s }\n'

function errorOf(text: string): string {
  try {
    parseConfig(text, 'conf.yaml')
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidConfigError)
    expect((error as InvalidConfigError).code).toBe('SLUICE_INVALID_CONFIG')
    return (error as Error).message
  }
  throw new Error('expected the config to be refused')
}

/** The first yaml fence after `heading` in a docs page of this repository. */
function yamlAfter(page: string, heading: string): string {
  const text = readFileSync(fileURLToPath(new URL(`../../docs/${page}`, import.meta.url)), 'utf8')
  const from = text.indexOf(heading)
  expect(from).toBeGreaterThan(-1)
  const fence = /```yaml\n([\s\S]*?)```/.exec(text.slice(from))
  return fence![1]!
}

const withStore = (store: string) => `store:\n${store}policies:\n${API}${PER_IP}`

describe('store: { region, regions, syncEvery }', () => {
  it('reads the local region, each region URL in file order and the sync period', () => {
    const config = parseConfig(
      withStore(
        '  region: us\n  regions:\n    eu: redis://eu-redis:6379\n    us: rediss+cluster://u1:7000,u2:7000\n  syncEvery: 100ms\n',
      ),
      'conf.yaml',
    )
    expect(config.regions).toEqual({
      region: 'us',
      urls: { eu: 'redis://eu-redis:6379', us: 'rediss+cluster://u1:7000,u2:7000' },
      syncEveryMs: 100,
    })
    expect(config.store).toBe('rediss+cluster://u1:7000,u2:7000')
    expect(config.storeWritten).toBe(true)
  })

  it('syncs every 200ms when syncEvery is not given; a single store URL has no regions', () => {
    const block = parseConfig(withStore('  region: eu\n  regions: { eu: redis://a:6379 }\n'), 'conf.yaml')
    expect(block.regions?.syncEveryMs).toBe(200)
    expect(parseConfig(`store: redis://a:6379\npolicies:\n${API}`, 'conf.yaml').regions).toBeUndefined()
  })

  const refused: [string, string, string][] = [
    [
      'an unknown key, with a suggestion',
      '  region: eu\n  regoins: { eu: redis://a:6379 }\n',
      "conf.yaml:3: store.regoins: unknown key; did you mean 'regions'?",
    ],
    [
      'a region not among regions',
      '  region: ap\n  regions:\n    eu: redis://a:6379\n    us: redis://b:6379\n',
      'conf.yaml:2: store.region: "ap" is not one of store.regions (eu, us)',
    ],
    [
      'no local region',
      '  regions: { eu: redis://a:6379 }\n',
      'conf.yaml:1: store.region: is required: the region this instance runs in, one of eu',
    ],
    [
      'regions not a map',
      '  region: eu\n  regions: [redis://a:6379]\n',
      'conf.yaml:3: store.regions: must be a map of region name to Redis URL',
    ],
    ['no regions', '  region: eu\n  regions: {}\n', 'conf.yaml:3: store.regions: name at least one region'],
    [
      'a spelled-out syncEvery',
      '  region: eu\n  regions: { eu: redis://a:6379 }\n  syncEvery: 2 seconds\n',
      'conf.yaml:4: store.syncEvery: "2 seconds" is not a duration, use 2s',
    ],
    [
      'a syncEvery that is not a duration',
      '  region: eu\n  regions: { eu: redis://a:6379 }\n  syncEvery: often\n',
      'conf.yaml:4: store.syncEvery: "often" is not a duration, use a duration like 200ms or 1s',
    ],
    [
      'a syncEvery too short',
      '  region: eu\n  regions: { eu: redis://a:6379 }\n  syncEvery: 1ms\n',
      'conf.yaml:4: store.syncEvery: "1ms" is out of range; use 10ms to 1m',
    ],
    [
      'a region that is not Redis',
      '  region: eu\n  regions:\n    eu: redis://a:6379\n    us: memcached://b:11211\n',
      'conf.yaml:5: store.regions.us: "memcached://b:11211": each region\'s store is Redis',
    ],
    [
      'a bad region URL',
      '  region: eu\n  regions:\n    eu: redis://a:6379\n    us: redis://b:99999\n',
      'conf.yaml:5: store.regions.us: "redis://b:99999": port 99999 is out of range',
    ],
    [
      'TLS file parameters on a region URL',
      '  region: eu\n  regions:\n    eu: redis://a:6379\n    us: rediss://b:6380?tls_ca=certs/ca.pem\n',
      'conf.yaml:5: store.regions.us: "rediss://b:6380?tls_ca=certs/ca.pem": tls_ca, tls_cert, tls_key and tls_servername apply to a single store, not to a region (a region\'s rediss:// uses the system\'s CAs)',
    ],
    [
      'store.tls beside regions',
      '  region: eu\n  regions: { eu: redis://a:6379 }\n  tls: { ca: certs/ca.pem }\n',
      'conf.yaml:4: store.tls: unknown key',
    ],
    [
      'a bad region name',
      '  region: eu\n  regions:\n    eu: redis://a:6379\n    "u s": redis://b:6379\n',
      "conf.yaml:5: store.regions.u s: a region name is 1-64 letters, digits, '_', '-' or '.'",
    ],
  ]
  for (const [name, store, message] of refused)
    it(`refuses ${name}, with file:line`, () => {
      expect(errorOf(withStore(store))).toContain(message)
    })

  it('never prints a region password: not in errors, not in sluice check', () => {
    const secret = 'hunter2-region'
    const bad = errorOf(
      withStore(
        `  region: eu\n  regions:\n    eu: redis://:${secret}@a:6379\n    us: redis://:${secret}@b:0\n`,
      ),
    )
    expect(bad).toContain('store.regions.us: "redis://:***@b:0"')
    expect(bad).not.toContain(secret)
    const config = parseConfig(
      withStore(
        `  region: eu\n  regions:\n    eu: redis://app:${secret}@a:6379\n    us: redis://${secret}@b:6379\n`,
      ),
      'conf.yaml',
    )
    const described = describeConfig(config)
    expect(described).toContain('  store: multi-region  prefix: sluice  onStoreError: open\n')
    expect(described).toContain(
      '  regions: local eu; eu redis://app:***@a:6379, us redis://***@b:6379; sync every 200ms',
    )
    expect(described).not.toContain(secret)
  })
})

describe('the documented examples', () => {
  it('docs/service.md and docs/topologies.md show configs that load, with their regions', () => {
    const service = parseConfig(yamlAfter('service.md', '### Several regions'), 'service.md')
    expect(service.regions).toMatchObject({ region: 'eu', syncEveryMs: 200 })
    expect(Object.keys(service.regions!.urls)).toEqual(['eu', 'us'])
    expect(service.lookup('api')?.resolved.scope).toBe('global')
    const topologies = parseConfig(
      yamlAfter('topologies.md', "**From the service's config.**"),
      'topologies.md',
    )
    expect(Object.keys(topologies.regions!.urls)).toEqual(['eu', 'us', 'ap'])
  })
})

describe('scope per policy', () => {
  it('passes scope to the limiter policy and shows a global one in sluice check', () => {
    const config = parseConfig(withStore('  region: eu\n  regions: { eu: redis://a:6379 }\n'), 'conf.yaml')
    expect(config.lookup('api')?.resolved.scope).toBe('global')
    expect(config.lookup('perIp')?.resolved.scope).toBeUndefined()
    const described = describeConfig(config)
    expect(described).toMatch(/ {4}api: sliding-window-counter, 100 per 60000ms, capacity 100, scope global,/)
    expect(described).toMatch(/ {4}perIp: sliding-window-counter, 10 per 1000ms, capacity 10, onStoreError/)
  })

  it('refuses a scope the library does not know, and a global scope on an algorithm it cannot share', () => {
    expect(
      errorOf(
        `policies:\n  api: { algorithm: sliding-window-counter, limit: 1, window: 1m, scope: local }\n`,
      ),
    ).toContain("conf.yaml:2: policies.api.scope: must be 'region' or 'global'")
    expect(
      errorOf(`policies:\n  api: { algorithm: token-bucket, limit: 1, window: 1m, scope: global }\n`),
    ).toMatch(/^conf\.yaml:2: policies\.api\.scope: /)
  })
})
