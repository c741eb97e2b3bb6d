// Abuse patterns on a synthetic attack trace, through a real limiter's layered decisions: 200
// accounts behind one address, one account over 500 addresses, 10,000 benign sources around them.
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { withSluice } from '../../packages/sluice/src/adapters/node.js'
import { InvalidOptionsError } from '../../packages/sluice/src/errors.js'
import { hashedApiKey } from '../../packages/sluice/src/http/keys.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import type { AbuseAlert } from '../../packages/sluice/src/metrics/abuse.js'
import { AbuseDetector, networkOf } from '../../packages/sluice/src/metrics/abuse.js'
import { HLL_STANDARD_ERROR } from '../../packages/sluice/src/metrics/hll.js'
import type { Observability } from '../../packages/sluice/src/metrics/observability.js'
import { createObservability } from '../../packages/sluice/src/metrics/observability.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { sample } from '../helpers/exposition.js'

const policies = {
  perIp: { algorithm: 'fixed-window', limit: 1_000_000, window: '1h' },
  perUser: { algorithm: 'fixed-window', limit: 3, window: '1h' },
} as const

const ATTACK_ADDRESS = 'ip:198.51.100.7'
const ROTATOR = 'user:rotator'
/** Within 3 standard errors of the sketch: what "within the stated error" means for one count. */
const TOLERANCE = 3 * HLL_STANDARD_ERROR

interface Pair {
  address: string
  identity: string
}

/** A deterministic shuffle (the trace interleaves attacks with benign traffic). */
function shuffle<T>(items: T[], seed = 7): T[] {
  let state = seed
  for (let i = items.length - 1; i > 0; i--) {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0
    const j = state % (i + 1)
    const tmp = items[i]!
    items[i] = items[j]!
    items[j] = tmp
  }
  return items
}

function benignAddress(j: number): string {
  return `ip:10.${(j >> 16) & 255}.${(j >> 8) & 255}.${j & 255}`
}

/** 10,000 benign sources: one user each, every 5th address a household of 3, every 3rd user on 2 addresses. */
function benignTrace(): Pair[] {
  const pairs: Pair[] = []
  for (let j = 0; j < 10_000; j++) {
    pairs.push({ address: benignAddress(j), identity: `user:b${j}` })
    if (j % 5 === 0) {
      pairs.push({ address: benignAddress(j), identity: `user:b${j}-2` })
      pairs.push({ address: benignAddress(j), identity: `user:b${j}-3` })
    }
    if (j % 3 === 0) pairs.push({ address: `ip:172.16.${(j >> 8) & 255}.${j & 255}`, identity: `user:b${j}` })
  }
  return pairs
}

function attackTrace(): Pair[] {
  const pairs: Pair[] = []
  for (let i = 0; i < 200; i++) pairs.push({ address: ATTACK_ADDRESS, identity: `user:acct-${i}` })
  // 500 addresses in 500 different /24 networks.
  for (let i = 0; i < 500; i++)
    pairs.push({ address: `ip:100.${64 + Math.floor(i / 250)}.${i % 250}.${1 + (i % 7)}`, identity: ROTATOR })
  return pairs
}

let obs: Observability | undefined
afterEach(() => {
  obs?.close()
  obs = undefined
})

describe('abuse patterns from layered decisions', () => {
  it('detects 200 accounts behind one address and one account over 500 addresses, flags no benign source', async () => {
    let clock = Date.UTC(2026, 0, 1)
    const limiter = createLimiter({ policies, store: memoryStore({ now: () => clock }) })
    obs = createObservability({ limiter, now: () => clock, flushMs: 60_000 })
    const alerts: AbuseAlert[] = []
    obs.onAbuse((a) => alerts.push(a))
    const trace = shuffle([...benignTrace(), ...attackTrace()])
    const started = clock
    for (const [i, p] of trace.entries()) {
      // The per-user limit (3 an hour) is hit by the rotator: the rotation pattern of the issue.
      await limiter.consume([
        { policy: 'perIp', key: p.address },
        { policy: 'perUser', key: p.identity },
      ])
      if (i % 10 === 9) clock += 1
    }
    // The whole trace (about 18,000 decisions) fits in the window.
    expect(clock - started).toBeLessThan(5 * 60_000)
    const report = obs.abuse({ k: 5 })!
    expect(report.windowMs).toBe(300_000)
    expect(report.thresholds).toEqual({ identitiesPerAddress: 50, addressesPerIdentity: 100 })

    const [address, ...others] = report.identitiesPerAddress
    expect(address?.key).toBe(ATTACK_ADDRESS)
    expect(Math.abs(address!.distinct - 200) / 200).toBeLessThanOrEqual(TOLERANCE)
    expect(address?.flagged).toBe(true)
    for (const other of others) expect(other.flagged).toBe(false)

    const [identity, ...rest] = report.addressesPerIdentity
    expect(identity?.key).toBe(ROTATOR)
    expect(Math.abs(identity!.distinct - 500) / 500).toBeLessThanOrEqual(TOLERANCE)
    expect(Math.abs(identity!.networks! - 500) / 500).toBeLessThanOrEqual(TOLERANCE)
    expect(identity?.decisions).toBe(500)
    expect(identity?.denied).toBe(497) // the per-user limit of 3 an hour
    for (const other of rest) expect(other.flagged).toBe(false)
    // Benign households (3 users) and mobile users (2 addresses) are the largest benign counts.
    expect(others[0]?.distinct).toBe(3)
    expect(rest[0]?.distinct).toBe(2)

    // One alert per pattern, for the attackers only, none for the 10,000 benign sources.
    expect(alerts.map((a) => [a.pattern, a.key]).sort()).toEqual([
      ['addressesPerIdentity', ROTATOR],
      ['identitiesPerAddress', ATTACK_ADDRESS],
    ])
    expect(report.alerts).toHaveLength(2)
    for (const a of alerts) {
      expect(a.distinct).toBeGreaterThanOrEqual(a.threshold)
      expect(a.at - started).toBeLessThan(report.windowMs)
    }
    const text = await obs.metrics.registry.metrics()
    expect(sample(text, 'sluice_abuse_alerts_total', { pattern: 'identitiesPerAddress' })).toBe(1)
    expect(sample(text, 'sluice_abuse_alerts_total', { pattern: 'addressesPerIdentity' })).toBe(1)
    expect(sample(text, 'sluice_abuse_flagged_keys', { pattern: 'identitiesPerAddress' })).toBe(1)
    expect(sample(text, 'sluice_abuse_flagged_keys', { pattern: 'addressesPerIdentity' })).toBe(1)
    expect(obs.snapshot().abuse?.identitiesPerAddress[0]?.key).toBe(ATTACK_ADDRESS)
  })

  it('alerts once per crossing: not again while above, again after falling below', () => {
    let clock = 1_000_000
    const d = new AbuseDetector({ windowMs: 60_000, buckets: 6, identitiesPerAddress: 10 })
    const alerts: AbuseAlert[] = []
    d.onAbuse((a) => alerts.push(a))
    const burst = (from: number, n: number) => {
      for (let i = from; i < from + n; i++) d.record(clock, 'ip:203.0.113.9', `user:${i}`, false)
      d.check(clock)
    }
    burst(0, 9)
    expect(alerts).toHaveLength(0) // 9 < 10
    burst(9, 1)
    expect(alerts).toHaveLength(1)
    expect(alerts[0]).toMatchObject({ pattern: 'identitiesPerAddress', distinct: 10, threshold: 10 })
    burst(10, 30)
    clock += 10_000
    burst(40, 5)
    expect(alerts).toHaveLength(1) // still above: no second alert
    clock += 120_000 // the window moved past every pair: below again, re-armed
    d.check(clock)
    expect(d.report(clock).identitiesPerAddress).toEqual([])
    burst(100, 10)
    expect(alerts).toHaveLength(2)
  })

  it('keeps memory bounded: at most capacity keys per bucket, whatever the number of sources', () => {
    const d = new AbuseDetector({ windowMs: 60_000, buckets: 2, capacity: 256 })
    const clock = 5_000_000
    for (let j = 0; j < 20_000; j++) d.record(clock + (j % 2) * 30_000, benignAddress(j), `user:${j}`, false)
    // Heavy keys survive the churn: an address with 60 identities among 20,000 one-user addresses.
    for (let i = 0; i < 60; i++) d.record(clock + 30_000, ATTACK_ADDRESS, `user:acct-${i}`, false)
    for (let j = 20_000; j < 30_000; j++) d.record(clock + 30_000, benignAddress(j), `user:${j}`, false)
    const memory = d.memory()
    expect(memory.maxTrackedKeys).toBe(2 * 2 * 256)
    expect(memory.trackedKeys).toBeLessThanOrEqual(memory.maxTrackedKeys)
    expect(memory.maxSketchBytes).toBe(3 * 2 * 256 * 512)
    const [top] = d.report(clock + 30_000).identitiesPerAddress
    expect(top?.key).toBe(ATTACK_ADDRESS)
    expect(Math.abs(top!.distinct - 60) / 60).toBeLessThanOrEqual(TOLERANCE)
  })

  it('lists only addresses with several identities and identities with several addresses', () => {
    const d = new AbuseDetector()
    const t = 7_000_000
    for (let i = 0; i < 3; i++) d.record(t, 'ip:192.0.2.1', 'user:solo', false)
    d.record(t, 'ip:192.0.2.2', 'user:roamer', false)
    d.record(t, 'ip:192.0.2.2', 'user:neighbour', false)
    d.record(t, 'ip:192.0.2.3', 'user:roamer', false)
    const report = d.report(t)
    expect(report.identitiesPerAddress.map((e) => [e.key, e.distinct])).toEqual([['ip:192.0.2.2', 2]])
    expect(report.addressesPerIdentity.map((e) => [e.key, e.distinct])).toEqual([['user:roamer', 2]])
    // Every client here has one of each: nothing to list.
    const quiet = new AbuseDetector()
    for (let i = 0; i < 20; i++) quiet.record(t, `ip:198.51.100.${i}`, `user:u${i}`, false)
    expect(quiet.report(t)).toMatchObject({ identitiesPerAddress: [], addressesPerIdentity: [] })
  })

  it('a full table drops the least recently fed of its smallest keys, not the oldest', () => {
    const d = new AbuseDetector({ capacity: 4 })
    const t = 9_000_000
    for (const key of ['a', 'b', 'c', 'd']) d.record(t, `ip:192.0.2.${key.charCodeAt(0)}`, 'user:1', false)
    d.record(t, 'ip:192.0.2.97', 'user:1', false) // a again, same partner: its count stays 1
    d.record(t, 'ip:192.0.2.101', 'user:1', false) // e: the table is full, one key goes (b, not a)
    d.record(t, 'ip:192.0.2.97', 'user:2', false)
    // b comes back with a second partner: kept, it would count 2 and be listed; dropped, it counts 1.
    d.record(t, 'ip:192.0.2.98', 'user:2', false)
    const a = d.report(t).identitiesPerAddress.find((e) => e.key === 'ip:192.0.2.97')
    expect(a).toMatchObject({ distinct: 2, decisions: 3 })
    expect(d.report(t).identitiesPerAddress.map((e) => e.key)).not.toContain('ip:192.0.2.98')
  })

  it('reads kinds from configured policies, API keys only as fingerprints, peeks not counted', async () => {
    let clock = 2_000_000
    const limiter = createLimiter({
      policies: { 'per-client': policies.perIp, 'per-token': policies.perUser },
      store: memoryStore({ now: () => clock }),
    })
    obs = createObservability({
      limiter,
      now: () => clock,
      abuse: { addressesPerIdentity: 5, kinds: { 'per-client': 'address', 'per-token': 'identity' } },
    })
    const apiKey = hashedApiKey('sk_live_very_secret')
    for (let i = 0; i < 6; i++) {
      await limiter.peek([
        { policy: 'per-client', key: `203.0.113.${i}` },
        { policy: 'per-token', key: apiKey },
      ])
    }
    expect(obs.abuse()?.addressesPerIdentity).toEqual([])
    for (let i = 0; i < 6; i++) {
      clock += 1
      await limiter.consume([
        { policy: 'per-client', key: `203.0.113.${i}` },
        { policy: 'per-token', key: apiKey },
      ])
    }
    const [entry] = obs.abuse()!.addressesPerIdentity
    expect(entry).toMatchObject({ key: apiKey, distinct: 6, networks: 1, flagged: true })
    expect(entry?.fingerprint).toBe(`apikey:${apiKey.slice(7, 15)}…`)
    expect(JSON.stringify(obs.snapshot())).not.toContain('sk_live_very_secret')
    expect(obs.snapshot().abuse?.alerts[0]?.fingerprint).toBe(entry?.fingerprint)
  })

  it('observePair feeds a pair no layer shows; abuse: false turns the patterns off', () => {
    const limiter = createLimiter({ policies })
    obs = createObservability({ limiter, abuse: { identitiesPerAddress: 2 } })
    obs.observePair('ip:192.0.2.1', 'user:a')
    obs.observePair('ip:192.0.2.1', 'user:b', true)
    expect(obs.abuse()?.identitiesPerAddress[0]).toMatchObject({ distinct: 2, decisions: 2, denied: 1 })
    obs.close()
    obs = createObservability({ limiter, abuse: false })
    obs.observePair('ip:192.0.2.1', 'user:a')
    expect(obs.abuse()).toBeNull()
    expect(obs.snapshot().abuse).toBeNull()
  })

  it('groups networks by /24 and /64, and refuses bad options at construction', () => {
    expect(networkOf('ip:203.0.113.77')).toBe('203.0.113.0/24')
    expect(networkOf('ip:2001:db8:1:2::/64')).toBe('2001:db8:1:2::/64')
    expect(networkOf('2001:db8:1:2:aaaa::1')).toBe('2001:db8:1:2::/64')
    expect(() => new AbuseDetector({ windowMs: 0 })).toThrow(InvalidOptionsError)
    expect(() => new AbuseDetector({ identitiesPerAddress: 1.5 })).toThrow(/whole number/)
    expect(() => new AbuseDetector({ kinds: { api: 'ip' as never } })).toThrow(/address' or 'identity/)
    expect(() =>
      createObservability({ limiter: createLimiter({ policies }), abuse: { window: 1 } as never }),
    ).toThrow(/windowMs/)
  })

  it('reads the HTTP core keys as they are made: ip: addresses, user: and apikey: identities', async () => {
    const limiter = createLimiter({
      policies: { ...policies, perKey: { algorithm: 'fixed-window', limit: 1_000_000, window: '1h' } },
    })
    obs = createObservability({ limiter, abuse: { identitiesPerAddress: 10, addressesPerIdentity: 10 } })
    const server = createServer(
      withSluice(
        {
          limiter,
          trustProxy: ['loopback'],
          proxyHeader: 'x-real-ip',
          user: (r) => r.header('x-user'),
          rules: [
            { policy: 'perIp', key: 'ip' },
            { policy: 'perUser', key: 'user' },
            { policy: 'perKey', key: 'apiKey' },
          ],
        },
        (_req, res) => res.end('ok'),
      ),
    )
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`
    try {
      // 12 users behind one IPv6 /64 (different addresses in it); one API key from 12 IPv4 addresses.
      for (let i = 0; i < 12; i++)
        await (
          await fetch(url, { headers: { 'x-real-ip': `2001:db8:5:6::${i + 1}`, 'x-user': `u${i}` } })
        ).text()
      for (let i = 0; i < 12; i++)
        await (
          await fetch(url, { headers: { 'x-real-ip': `198.51.${i}.10`, 'x-api-key': 'sk_test_http' } })
        ).text()
    } finally {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
    const report = obs.abuse()!
    expect(report.identitiesPerAddress[0]).toMatchObject({
      key: 'ip:2001:db8:5:6::/64',
      distinct: 12,
      flagged: true,
    })
    expect(report.addressesPerIdentity[0]).toMatchObject({
      key: hashedApiKey('sk_test_http'),
      distinct: 12,
      networks: 12,
      flagged: true,
    })
    expect(report.alerts).toHaveLength(2)
  })
})
