// Abuse patterns in `sluice serve`, over real sockets: layered /v1/check requests and /v1/authz
// calls feed (address, identity) pairs; the snapshot JSON, /metrics and the config keys carry them.
import { describe, expect, it } from 'vitest'
import { InvalidConfigError } from '../../packages/sluice/src/errors.js'
import { hashedApiKey } from '../../packages/sluice/src/http/keys.js'
import type { AbuseReport } from '../../packages/sluice/src/metrics/abuse.js'
import { parseConfig } from '../../packages/sluice-server/src/server/config.js'
import { sample } from '../helpers/exposition.js'
import type { Running } from '../helpers/service.js'
import { get, post, servicesClosedAfterEach } from '../helpers/service.js'

const service = servicesClosedAfterEach()
const fast = { observability: { flushMs: 50, pushIntervalMs: 100 } }

async function abuseOf(r: Running): Promise<AbuseReport> {
  const res = await get(`${r.url}/dashboard/snapshot.json`)
  expect(res.status).toBe(200)
  return res.body.abuse as AbuseReport
}

describe('sluice serve: abuse patterns', () => {
  it('/v1/check layered requests with ip: and user: keys: many accounts behind one address', async () => {
    const r = await service(
      `
policies:
  per-ip:   { algorithm: fixed-window, limit: 100000, window: 1h }
  per-user: { algorithm: fixed-window, limit: 100, window: 1h }
abuse: { window: 10m, identitiesPerAddress: 20, addressesPerIdentity: 30 }
`,
      fast,
    )
    for (let i = 0; i < 40; i++) {
      const res = await post(`${r.url}/v1/check`, {
        checks: [
          { policy: 'per-ip', key: 'ip:198.51.100.7' },
          { policy: 'per-user', key: `user:acct-${i}` },
        ],
      })
      expect(res.status).toBe(200)
    }
    // Benign: 30 addresses with one user each.
    for (let i = 0; i < 30; i++)
      await post(`${r.url}/v1/check`, {
        checks: [
          { policy: 'per-ip', key: `ip:203.0.113.${i}` },
          { policy: 'per-user', key: `user:b${i}` },
        ],
      })
    const report = await abuseOf(r)
    expect(report.windowMs).toBe(600_000)
    expect(report.thresholds).toEqual({ identitiesPerAddress: 20, addressesPerIdentity: 30 })
    expect(report.identitiesPerAddress[0]).toMatchObject({
      key: 'ip:198.51.100.7',
      decisions: 40,
      flagged: true,
    })
    // Past 32 distinct values the count is a HyperLogLog estimate: within 3 standard errors.
    const distinct = report.identitiesPerAddress[0]!.distinct
    expect(Math.abs(distinct - 40)).toBeLessThanOrEqual(3 * report.standardError * 40)
    // The 30 benign addresses have one user each, and every user one address: neither is listed.
    expect(report.identitiesPerAddress).toHaveLength(1)
    expect(report.addressesPerIdentity).toEqual([])
    expect(report.alerts).toHaveLength(1)
    expect(report.alerts[0]).toMatchObject({ pattern: 'identitiesPerAddress', key: 'ip:198.51.100.7' })
    const text = await (await fetch(`${r.url}/metrics`)).text()
    expect(sample(text, 'sluice_abuse_alerts_total', { pattern: 'identitiesPerAddress' })).toBe(1)
    expect(sample(text, 'sluice_abuse_flagged_keys', { pattern: 'identitiesPerAddress' })).toBe(1)
  })

  it('abuse.policies names which layers are addresses and identities, tiers included', async () => {
    const r = await service(
      `
policies:
  per-client: { algorithm: fixed-window, limit: 100000, window: 1h }
  per-token:  { algorithm: fixed-window, limit: 100000, window: 1h }
tiers:
  pro: { per-token: { limit: 200000 } }
abuse:
  addressesPerIdentity: 12
  policies: { per-client: address, per-token: identity }
`,
      fast,
    )
    for (let i = 0; i < 15; i++)
      await post(`${r.url}/v1/check`, {
        tier: 'pro',
        checks: [
          { policy: 'per-client', key: `192.0.2.${i}` },
          { policy: 'per-token', key: 'tenant-9' },
        ],
      })
    const report = await abuseOf(r)
    expect(report.addressesPerIdentity[0]).toMatchObject({
      key: 'tenant-9',
      distinct: 15,
      networks: 1,
      flagged: true,
    })
    expect(report.identitiesPerAddress).toEqual([]) // 15 addresses, one identity each
  })

  it('/v1/authz with an API key header feeds (client address, hashed key); the key shows as a fingerprint', async () => {
    const secret = 'sk_live_rotating_through_addresses'
    const r = await service(
      `
policies:
  api: { algorithm: fixed-window, limit: 5, window: 1h }
authz: { keyHeader: x-api-key }
abuse: { addressesPerIdentity: 25 }
`,
      fast,
    )
    const statuses: number[] = []
    for (let i = 0; i < 30; i++) {
      const res = await get(`${r.url}/v1/authz?policy=api`, {
        'x-api-key': secret,
        'x-real-ip': `100.${64 + i}.${i}.9`,
      })
      statuses.push(res.status)
    }
    // The per-key limit is hit while the key rotates through 30 addresses: the rotation pattern.
    expect(statuses.filter((s) => s === 429)).toHaveLength(25)
    const report = await abuseOf(r)
    const hashed = hashedApiKey(secret)
    expect(report.addressesPerIdentity[0]).toMatchObject({
      key: hashed,
      fingerprint: `apikey:${hashed.slice(7, 15)}…`,
      distinct: 30,
      networks: 30,
      decisions: 30,
      denied: 25,
      flagged: true,
    })
    expect(report.identitiesPerAddress).toEqual([]) // each address carried the one key
    expect(report.alerts[0]).toMatchObject({
      pattern: 'addressesPerIdentity',
      fingerprint: report.addressesPerIdentity[0]?.fingerprint,
    })
    const snapshotText = await (await fetch(`${r.url}/dashboard/snapshot.json`)).text()
    const metricsText = await (await fetch(`${r.url}/metrics`)).text()
    for (const text of [snapshotText, metricsText]) expect(text).not.toContain(secret)
    expect(metricsText).not.toContain(hashed)
  })

  it('/v1/authz keyed on the address alone feeds no pair', async () => {
    const r = await service('policies:\n  api: { algorithm: fixed-window, limit: 5, window: 1h }\n', fast)
    for (let i = 0; i < 3; i++) await get(`${r.url}/v1/authz?policy=api`, { 'x-real-ip': `203.0.113.${i}` })
    const report = await abuseOf(r)
    expect(report.identitiesPerAddress).toEqual([])
    expect(report.thresholds).toEqual({ identitiesPerAddress: 50, addressesPerIdentity: 100 })
    expect(report.windowMs).toBe(300_000)
  })

  it('config keys are checked: window, thresholds, policy names, kinds, unknown keys', () => {
    const base = 'policies:\n  per-ip: { algorithm: fixed-window, limit: 5, window: 1m }\n'
    const bad: [string, RegExp][] = [
      ['abuse: { window: soon }', /abuse\.window/],
      ['abuse: { window: 0 }', /abuse\.window: 0 is not/],
      ['abuse: { window: 10ms }', /abuse\.window: 10ms is too short/],
      ['abuse: { identitiesPerAddress: 0 }', /abuse\.identitiesPerAddress.*at least 1/],
      ['abuse: { addressesPerIdentity: 2.5 }', /abuse\.addressesPerIdentity/],
      ['abuse: { policies: { per-iq: address } }', /no policy named per-iq \(did you mean per-ip\?\)/],
      ['abuse: { policies: { per-ip: ip } }', /must be address or identity/],
      ['abuse: { treshold: 5 }', /treshold/],
    ]
    for (const [line, message] of bad) {
      const run = () => parseConfig(`${base}${line}\n`, 'abuse.yaml')
      expect(run, line).toThrow(InvalidConfigError)
      expect(run, line).toThrow(message)
      expect(run, line).toThrow(/abuse\.yaml:3/)
    }
    const ok = parseConfig(
      `${base}abuse: { window: 90s, capacity: 64, policies: { per-ip: address } }\n`,
      'ok.yaml',
    )
    expect(ok.abuse).toMatchObject({ windowMs: 90_000, capacity: 64, identitiesPerAddress: 50 })
    expect([...ok.abuse.policies]).toEqual([['per-ip', 'address']])
  })
})
