// Configuration files in envoyproxy/ratelimit's format (test/fixtures/envoy-ratelimit): every valid
// file loads, alone and as one folder, each key of the format lands where the rules use it, and every
// invalid file is refused with an error naming the file, the line and the problem.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { parse, stringify } from 'yaml'
import type { EnvoyLevel, EnvoyRules } from '../../packages/sluice-server/src/envoy/config.js'
import {
  describeEnvoyConfig,
  loadEnvoyConfig,
  parseEnvoyConfig,
} from '../../packages/sluice-server/src/envoy/config.js'
import { matchesGlob } from '../../packages/sluice-server/src/envoy/decide.js'
import { parseConfig } from '../../packages/sluice-server/src/server/config.js'
import { FIXTURES } from '../helpers/envoy.js'

const valid = (name: string) => join(FIXTURES, 'valid', name)
const invalid = (name: string) => join(FIXTURES, 'invalid', name)

const VALID = [
  'catalog.yaml',
  'gateway.yaml',
  'inventory-east.yaml',
  'inventory-west.yaml',
  'media.yaml',
  'notify.yaml',
  'search.yml',
  'storefront.yaml',
  'uploads.yaml',
]

/** Each invalid file: the line its error names and what the message says after `file:line: `. */
const REFUSED: Record<string, [line: number, message: RegExp]> = {
  'alias-bomb.yaml': [7, /^the YAML aliases expand too far \(over 100 nodes from aliases\)/],
  'bad-unit.yaml': [7, /^invalid rate limit unit 'week'; use one of second, minute, hour, day, month, year$/],
  'bad-yaml.yaml': [6, /^not valid YAML: Flow map /],
  'comments-only.yaml': [1, /^the file must be a map with domain and descriptors$/],
  'descriptors-not-a-list.yaml': [5, /^descriptors must be a list of descriptors$/],
  'duplicate-composite-key.yaml': [11, /^duplicate descriptor composite key 'reports\.report_daily'$/],
  'duplicate-map-key.yaml': [8, /^not valid YAML: Map keys must be unique/],
  'empty-domain.yaml': [1, /^config file cannot have empty domain/],
  'empty-key.yaml': [9, /^descriptor has empty key$/],
  'extension-bad-algorithm.yaml': [
    6,
    /^algorithm must be one of fixed-window, .*gcra \(got "leaky-bucket"\)$/,
  ],
  // The line of rate_limit's first key: the error comes from the policy the rate_limit makes.
  'extension-bad-burst.yaml': [8, /^rate_limit: burst must be a positive whole number$/],
  'extension-bad-window.yaml': [6, /^window: "10 minutes" is not a duration/],
  'extension-burst-without-bucket.yaml': [7, /^burst is for algorithm token-bucket or gcra$/],
  'extension-unit-and-window.yaml': [6, /^give either unit or window \(a Sluice extension\), not both$/],
  'flag-not-a-boolean.yaml': [5, /^shadow_mode must be true or false$/],
  'missing-domain.yaml': [2, /^config file cannot have empty domain/],
  'missing-unit.yaml': [5, /^rate_limit needs a unit .* or unlimited: true$/],
  'misspelled-descriptors.yaml': [2, /^unknown key 'descriptor'; did you mean 'descriptors'\?$/],
  'misspelled-rate-limit.yaml': [5, /^unknown key 'ratelimit'; did you mean 'rate_limit'\?$/],
  'misspelled-replaces-name.yaml': [6, /^unknown key 'nmae'; did you mean 'name'\?$/],
  'misspelled-requests-per-unit.yaml': [
    7,
    /^unknown key 'request_per_unit'; did you mean 'requests_per_unit'\?$/,
  ],
  'misspelled-shadow-mode.yaml': [4, /^unknown key 'shadowmode'; did you mean 'shadow_mode'\?$/],
  'name-not-a-string.yaml': [7, /^name must be a string$/],
  'non-map-list.yaml': [4, /^yaml file contains list of type other than map: daily$/],
  'non-scalar-key.yaml': [4, /^a key must be a string$/],
  'non-string-key.yaml': [7, /^key is not of type string: 3600$/],
  'not-a-map.yaml': [2, /^the file must be a map with domain and descriptors$/],
  'proto-key.yaml': [5, /^"__proto__" cannot be a key/],
  'rate-limit-not-a-map.yaml': [4, /^rate_limit must be a map with unit and requests_per_unit$/],
  'replaces-empty.yaml': [9, /^should not have an empty replaces entry/],
  'replaces-entry-not-a-map.yaml': [8, /^a replaces entry must be a map like \{ name: other_limit \}$/],
  'replaces-not-a-list.yaml': [7, /^replaces must be a list like \[\{ name: other_limit \}\]$/],
  'replaces-self.yaml': [10, /^replaces should not contain name of same descriptor \('yearly_by_region'\)$/],
  'requests-per-unit-not-whole.yaml': [6, /^requests_per_unit must be a whole number from 0 to 4294967295$/],
  'unknown-key.yaml': [4, /^unknown key 'priority'; known keys: key, value, rate_limit, descriptors, /],
  'unlimited-with-rate.yaml': [5, /^should not specify rate limit requests_per_unit when unlimited$/],
  'unlimited-with-unit.yaml': [6, /^should not specify rate limit unit when unlimited$/],
  'value-not-a-string.yaml': [4, /^value must be a string$/],
}

/** The error `load` throws, or fails the test when it loads. */
async function refusal(load: Promise<unknown>): Promise<Error & { code?: string }> {
  return load.then(
    () => {
      throw new Error('expected a refusal, the files loaded')
    },
    (e: unknown) => e as Error & { code?: string },
  )
}

/** The entries of one level by their `key=value` (wildcards and key-only entries included). */
function entries(level: EnvoyLevel) {
  const nodes = [...level.exact.values(), ...[...level.wildcards.values()].flat(), ...level.keyOnly.values()]
  return new Map(nodes.map((n) => [n.value === undefined ? n.key : `${n.key}=${n.value}`, n]))
}
const domainOf = (rules: EnvoyRules, domain: string) => entries(rules.domains.get(domain)!)

describe('the envoy-ratelimit fixtures', () => {
  it('loads every file in valid/ on its own', async () => {
    expect(readdirSync(join(FIXTURES, 'valid')).sort()).toEqual(VALID)
    for (const name of VALID) {
      const rules = await loadEnvoyConfig(valid(name))
      expect(rules.domains.size, name).toBe(1)
    }
  })

  it('loads the valid/ folder as a whole, merging inventory-east and inventory-west into one domain', async () => {
    const merged = await loadEnvoyConfig(valid('inventory-east.yaml'), valid('inventory-west.yaml'))
    const level = merged.domains.get('inventory')!
    expect([...level.exact.keys()].sort()).toEqual(['warehouse\u0000east', 'warehouse\u0000west'])
    expect([...level.keyOnly.keys()]).toEqual(['sku'])
    const folder = await loadEnvoyConfig(join(FIXTURES, 'valid'))
    expect(folder.files).toEqual(VALID.map(valid))
    expect([...folder.domains.keys()].sort()).toEqual([
      'catalog',
      'gateway',
      'inventory',
      'media',
      'notify',
      'search',
      'storefront',
      'uploads',
    ])
  })

  it('refuses every file in invalid/ with the file, its line and the problem', async () => {
    const names = readdirSync(join(FIXTURES, 'invalid')).filter((n) => n !== 'duplicate-domain.yaml')
    expect(names.sort()).toEqual(Object.keys(REFUSED).sort())
    for (const name of names) {
      const [line, message] = REFUSED[name]!
      const error = await refusal(loadEnvoyConfig(invalid(name)))
      expect(error.code, name).toBe('SLUICE_INVALID_CONFIG')
      const where = `${invalid(name)}:${line}: `
      expect(error.message.slice(0, where.length), name).toBe(where)
      expect(error.message.slice(where.length), name).toMatch(message)
    }
  })

  it('refuses duplicate-domain.yaml loaded with valid/storefront.yaml', async () => {
    const error = await refusal(loadEnvoyConfig(valid('storefront.yaml'), invalid('duplicate-domain.yaml')))
    expect(error.code).toBe('SLUICE_INVALID_CONFIG')
    expect(error.message).toBe(
      `${invalid('duplicate-domain.yaml')}:3: duplicate domain 'storefront' (also in ${valid('storefront.yaml')})`,
    )
  })

  it('refuses inventory-east.yaml loaded twice (duplicate composite key)', async () => {
    const error = await refusal(loadEnvoyConfig(valid('inventory-east.yaml'), valid('inventory-east.yaml')))
    expect(error.message).toBe(
      `${valid('inventory-east.yaml')}:4: duplicate descriptor composite key 'inventory.warehouse_east'`,
    )
  })
})

describe('what each key of the format becomes', () => {
  it('every unit, in any case: the window and the unit replies name', async () => {
    const rules = await loadEnvoyConfig(valid('notify.yaml'))
    const day = 86_400_000
    const expected = {
      push: 1_000,
      email: 60_000,
      sms: 3_600_000,
      voice: day,
      letter: 30 * day,
      audit_export: 365 * day,
    }
    const units = {
      push: 'second',
      email: 'minute',
      sms: 'hour',
      voice: 'day',
      letter: 'month',
      audit_export: 'year',
    }
    const level = domainOf(rules, 'notify')
    for (const [key, windowMs] of Object.entries(expected)) {
      expect(level.get(key)!.limit, key).toMatchObject({ windowMs, unit: units[key as keyof typeof units] })
      expect(rules.policies[`envoy:notify.${key}`], key).toMatchObject({
        algorithm: 'fixed-window',
        window: windowMs,
      })
    }
    expect(describeEnvoyConfig(rules)).toContain('audit_export: 6 per year, fixed-window')
  })

  it('nested descriptors, key-only defaults, overrides, a named limit, unlimited and detailed_metric', async () => {
    const level = domainOf(await loadEnvoyConfig(valid('storefront.yaml')), 'storefront')
    expect(level.get('tenant=acme')!.limit).toBeUndefined()
    const routes = entries(level.get('tenant=acme')!.children)
    expect(routes.get('route')!.limit!.requestsPerUnit).toBe(4)
    expect(routes.get('route=checkout')!.limit!.requestsPerUnit).toBe(12)
    const method = entries(routes.get('route=checkout')!.children).get('method=POST')!
    expect(method.limit).toMatchObject({
      name: 'storefront.tenant_acme.route_checkout.method_POST',
      requestsPerUnit: 3,
    })
    expect(level.get('client=healthcheck')!.limit).toBeUndefined()
    expect(level.get('port=8443')!.limit!.requestsPerUnit).toBe(15)
    expect(level.get('account')!.limit).toMatchObject({
      name: 'account_daily',
      unit: 'day',
      requestsPerUnit: 3,
    })
    expect(level.get('internal')!.limit).toMatchObject({ unlimited: true, policy: undefined })
    expect(level.get('partner')!.detailedMetric).toBe(true)
    expect(level.get('client')!.detailedMetric).toBe(false)
  })

  it('wildcard values match as globs, with share_threshold true or false', async () => {
    const rules = await loadEnvoyConfig(valid('media.yaml'), valid('uploads.yaml'))
    const media = domainOf(rules, 'media')
    const glob = (key: string) => {
      const parts = media.get(key)!.wildcard!
      return { test: (value: string) => matchesGlob(parts, value) }
    }
    expect(glob('asset=thumb-*').test('thumb-42')).toBe(true)
    expect(glob('asset=thumb-*').test('thumbnail')).toBe(false)
    expect(glob('image=scan*.tiff').test('scan-7.tiff')).toBe(true)
    expect(glob('image=scan*.tiff').test('scan-7xtiff')).toBe(false) // the dot is literal
    expect(glob('stream=live-*-720p-*').test('live-news-720p-b')).toBe(true)
    expect(media.get('asset=thumb-hero')!.wildcard).toBeUndefined()
    expect(entries(media.get('album=public')!.children).get('photo=IMG_*')!.wildcard).toBeDefined()
    const uploads = domainOf(rules, 'uploads')
    expect(uploads.get('path=/bucket/*')!.shareThreshold).toBe(true)
    const team = entries(uploads.get('path=/team/*')!.children)
    expect(team.get('path=drafts/*')!.shareThreshold).toBe(true)
    const objects = entries(uploads.get('bucket=logs-*')!.children)
    expect(objects.get('object=2024-*')!.shareThreshold).toBe(false)
    expect(entries(uploads.get('sdk=js-*')!.children).get('op')!.detailedMetric).toBe(true)
  })

  it('shadow_mode true and false, replaces on two levels, and requests_per_unit: 0', async () => {
    const rules = await loadEnvoyConfig(valid('search.yml'), valid('gateway.yaml'))
    const search = domainOf(rules, 'search')
    expect(search.get('query')!.shadowMode).toBe(true)
    const facets = entries(search.get('index=products')!.children)
    expect(facets.get('facet=price')!.shadowMode).toBe(true)
    expect(facets.get('facet=brand')!.shadowMode).toBe(false)
    const gateway = domainOf(rules, 'gateway')
    expect(gateway.get('plan=enterprise')!.limit!.replaces).toEqual([
      'upload_per_user',
      'delete_per_user',
      'retired_quota',
    ])
    const crawler = entries(gateway.get('session=support')!.children).get('tool=crawler')!
    expect(crawler.limit!.replaces).toEqual(['scraping_banned'])
    const scrape = entries(gateway.get('user')!.children).get('action=scrape')!
    expect(scrape.limit).toMatchObject({ name: 'scraping_banned', requestsPerUnit: 0, policy: undefined })
  })

  it('accepts metadata, quota_mode and value_to_metric and makes nothing of them', async () => {
    const file = valid('catalog.yaml')
    const rules = await loadEnvoyConfig(file)
    const ignored = ['metadata', 'quota_mode', 'value_to_metric']
    const strip = (node: unknown): unknown =>
      Array.isArray(node)
        ? node.map(strip)
        : typeof node === 'object' && node !== null
          ? Object.fromEntries(
              Object.entries(node)
                .filter(([k]) => !ignored.includes(k))
                .map(([k, v]) => [k, strip(v)]),
            )
          : node
    const plain = parse(readFileSync(file, 'utf8'))
    for (const field of ignored) expect(JSON.stringify(plain)).toContain(`"${field}":`)
    const without = parseEnvoyConfig([{ file, text: stringify(strip(plain)) }])
    expect(without.domains).toEqual(rules.domains)
    expect(without.policies).toEqual(rules.policies)
    expect(Object.keys(rules.policies).sort()).toEqual([
      'envoy:catalog.feed.format_xml',
      'envoy:catalog.supplier_northwind',
    ])
  })
})

describe('Sluice extensions', () => {
  const load = (text: string) => parseEnvoyConfig([{ file: 'ext.yaml', text }])

  it("reads envoyproxy/ratelimit's month and year units as 30 and 365 days", () => {
    const rules = load(
      'domain: d\ndescriptors:\n  - key: m\n    rate_limit: { unit: month, requests_per_unit: 1000 }\n  - key: y\n    rate_limit: { unit: YEAR, requests_per_unit: 100 }\n',
    )
    const id = expect.stringMatching(/^envoy\.[0-9a-f]{6}\.[0-9a-f]{6}$/)
    expect(rules.policies).toEqual({
      'envoy:d.m': { id, algorithm: 'fixed-window', limit: 1000, window: 30 * 86_400_000 },
      'envoy:d.y': { id, algorithm: 'fixed-window', limit: 100, window: 365 * 86_400_000 },
    })
    expect(describeEnvoyConfig(rules)).toContain('m: 1000 per month')
  })

  it('takes algorithm, window and burst in rate_limit', () => {
    const rules = load(
      'domain: d\ndescriptors:\n  - key: user\n    rate_limit: { algorithm: token-bucket, requests_per_unit: 10, window: 5m, burst: 20 }\n',
    )
    const policies = Object.values(rules.policies)
    expect(policies).toEqual([
      { id: expect.any(String), algorithm: 'token-bucket', limit: 10, window: 300_000, burst: 20 },
    ])
    expect(describeEnvoyConfig(rules)).toContain('user: 10 per 300000ms, token-bucket')
  })

  it('refuses an unknown algorithm, a bad window and unit with window, naming the line', () => {
    expect(() =>
      load(
        'domain: d\ndescriptors:\n  - key: u\n    rate_limit: { algorithm: leaky, requests_per_unit: 1, unit: second }\n',
      ),
    ).toThrow(/ext\.yaml:4: algorithm must be one of/)
    expect(() =>
      load('domain: d\ndescriptors:\n  - key: u\n    rate_limit: { requests_per_unit: 1, window: soon }\n'),
    ).toThrow(/ext\.yaml:4: /)
    expect(() =>
      load(
        'domain: d\ndescriptors:\n  - key: u\n    rate_limit: { requests_per_unit: 1, unit: second, window: 5s }\n',
      ),
    ).toThrow(/either unit or window/)
  })
})

describe('docs/envoy.md', () => {
  const text = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'envoy.md'), 'utf8')
  const blocks = [...text.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!)

  it('holds rules, sluice.yaml and envoy.yaml blocks that all load', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(4)
    for (const block of blocks) {
      if (block.startsWith('domain:')) parseEnvoyConfig([{ file: 'docs/envoy.md', text: block }])
      else if (block.startsWith('# sluice.yaml')) {
        const config = parseConfig(block, 'docs/sluice.yaml')
        expect(config.grpc.port).toBe(8081)
        expect(config.envoy.charge).toBe('all-or-nothing')
      } else {
        expect(block.startsWith('# envoy.yaml')).toBe(true)
        // Envoy's own config: valid YAML pointing its rate limit service at Sluice's port.
        expect(JSON.stringify(parse(block))).toContain('"port_value":8081')
      }
    }
  })
})
