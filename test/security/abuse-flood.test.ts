// The abuse patterns under a flood, through the real service over HTTP. An attacker sends
// thousands of one-off (address, user) pairs to wash its own accounts out of the bounded tables;
// memory stays at its bound, and the address with many accounts and the rotating account still show.
import { describe, expect, it } from 'vitest'
import type { AbuseReport } from '../../packages/sluice/src/metrics/abuse.js'
import { get, post, servicesClosedAfterEach } from '../helpers/service.js'

const service = servicesClosedAfterEach()

const CONFIG = `
policies:
  per-ip:   { algorithm: fixed-window, limit: 1000000, window: 1h }
  per-user: { algorithm: fixed-window, limit: 1000000, window: 1h }
abuse: { capacity: 128, identitiesPerAddress: 40, addressesPerIdentity: 40 }
`

describe('abuse patterns under a flood of one-off pairs (real service)', () => {
  it('keeps memory at its bound and still flags the many-accounts address and the rotator', async () => {
    const r = await service(CONFIG, { observability: { flushMs: 50 } })
    const check = (address: string, user: string) =>
      post(`${r.url}/v1/check`, {
        checks: [
          { policy: 'per-ip', key: address },
          { policy: 'per-user', key: user },
        ],
      })
    // 2,400 flood requests (one new address and one new user each); every 20th request the rotator
    // comes from a new address and one more account appears behind the shared address.
    const FLOOD = 2400
    const IN_FLIGHT = 8
    let next = 0
    const worker = async () => {
      for (let i = next++; i < FLOOD; i = next++) {
        const flood = await check(`ip:10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, `user:flood-${i}`)
        expect(flood.status).toBe(200)
        if (i % 20 === 0) {
          const k = i / 20
          await check(`ip:100.${64 + (k % 60)}.${k}.1`, 'user:rotator')
          await check('ip:198.51.100.77', `user:acct-${k}`)
        }
      }
    }
    await Promise.all(Array.from({ length: IN_FLIGHT }, worker))

    const snap = await get(`${r.url}/dashboard/snapshot.json`)
    const report = snap.body.abuse as AbuseReport
    expect(report.memory.maxTrackedKeys).toBe(2 * 5 * 128)
    expect(report.memory.trackedKeys).toBeLessThanOrEqual(report.memory.maxTrackedKeys)
    const tolerance = 3 * report.standardError
    const [address] = report.identitiesPerAddress
    expect(address?.key).toBe('ip:198.51.100.77')
    expect(Math.abs(address!.distinct - 120) / 120).toBeLessThanOrEqual(tolerance)
    const [rotator] = report.addressesPerIdentity
    expect(rotator?.key).toBe('user:rotator')
    expect(Math.abs(rotator!.distinct - 120) / 120).toBeLessThanOrEqual(tolerance)
    expect(report.alerts.map((a) => a.key).sort()).toEqual(['ip:198.51.100.77', 'user:rotator'])
    // No flood key is flagged.
    for (const e of [...report.identitiesPerAddress, ...report.addressesPerIdentity].slice(1))
      if (e.key !== 'ip:198.51.100.77' && e.key !== 'user:rotator') expect(e.flagged).toBe(false)
  }, 20_000)
})
