// envoyproxy/ratelimit's own configuration files (../shared/envoy-ratelimit, test data beside the
// clone) load as-is, and every invalid one is refused with an error naming the file and the problem.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { parse } from 'yaml'
import { describeEnvoyConfig, loadEnvoyConfig, parseEnvoyConfig } from '../../src/envoy/config.js'
import { parseConfig } from '../../src/server/config.js'
import { FIXTURES } from './helpers.js'

const valid = (name: string) => join(FIXTURES, 'valid', name)
const invalid = (name: string) => join(FIXTURES, 'invalid', name)

const REFUSED: Record<string, RegExp> = {
  'empty_domain.yaml': /cannot have empty domain/,
  'empty_key.yaml': /descriptor has empty key/,
  'duplicate_key.yaml': /duplicate descriptor composite key 'test-domain\.key1_value1'/,
  'bad_limit_unit.yaml': /invalid rate limit unit 'foo'/,
  'replaces_self.yaml': /replaces should not contain name of same descriptor/,
  'replaces_empty.yaml': /should not have an empty replaces entry/,
  'bad_yaml.yaml': /not valid YAML/,
  'misspelled_key.yaml': /unknown key 'ratelimit'; did you mean 'rate_limit'\?/,
  'misspelled_key2.yaml': /unknown key 'requestsperunit'; did you mean 'requests_per_unit'\?/,
  'non_string_key.yaml': /key is not of type string: 0\.25/,
  'non_map_list.yaml': /yaml file contains list of type other than map: a/,
  'unlimited_with_unit.yaml': /should not specify rate limit unit when unlimited/,
}

describe('envoyproxy/ratelimit fixtures', () => {
  it('loads every file in valid/ on its own', async () => {
    const names = readdirSync(join(FIXTURES, 'valid'))
    expect(names.length).toBeGreaterThanOrEqual(9)
    for (const name of names) {
      const rules = await loadEnvoyConfig(valid(name))
      expect(rules.domains.size, name).toBe(1)
    }
  })

  it('loads the valid/ folder as a whole, merging merge_domain_key1 and key2 into one domain', async () => {
    const merged = await loadEnvoyConfig(valid('merge_domain_key1.yaml'), valid('merge_domain_key2.yaml'))
    const level = merged.domains.get('test-domain')!
    expect([...level.exact.keys()].sort()).toEqual(['key1\u0000value1', 'key2\u0000value2'])
  })

  it('refuses every file in invalid/ with the file, its line and the problem', async () => {
    const names = readdirSync(join(FIXTURES, 'invalid')).filter((n) => !n.startsWith('duplicate_domain'))
    expect(names.sort()).toEqual(Object.keys(REFUSED).sort())
    for (const name of names) {
      const error = await loadEnvoyConfig(invalid(name)).then(
        () => undefined,
        (e: unknown) => e as Error & { code: string },
      )
      expect(error, name).toBeDefined()
      expect(error!.code, name).toBe('SLUICE_INVALID_CONFIG')
      expect(error!.message, name).toMatch(new RegExp(`^${invalid(name).replace(/[.]/g, '\\.')}:\\d+: `))
      expect(error!.message, name).toMatch(REFUSED[name]!)
    }
  })

  it('refuses duplicate_domain_with_basic_config.yaml loaded with valid/basic_config.yaml', async () => {
    await expect(
      loadEnvoyConfig(valid('basic_config.yaml'), invalid('duplicate_domain_with_basic_config.yaml')),
    ).rejects.toThrow(/duplicate_domain_with_basic_config\.yaml:1: duplicate domain 'test-domain'/)
  })

  it('refuses merge_domain_key1.yaml loaded twice (duplicate composite key)', async () => {
    await expect(
      loadEnvoyConfig(valid('merge_domain_key1.yaml'), valid('merge_domain_key1.yaml')),
    ).rejects.toThrow(/duplicate descriptor composite key 'test-domain\.key1_value1'/)
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
