// Observability's state per policy is bounded whatever the number of policy names that decide
// (Envoy's per-request limits make a policy per shape): at most `maxPolicies` kept, the least
// recently decided dropped and counted; a snapshot lists at most `dashboardPolicies` and sums the
// rest, so its size does not grow with the number of policies; the Prometheus label stays bounded.
import { describe, expect, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { createObservability } from '../../packages/sluice/src/metrics/observability.js'
import type { Policy } from '../../packages/sluice/src/policy.js'
import { sample } from '../helpers/exposition.js'

const POLICIES = 3000

function limiterOf(count: number) {
  const policies: Record<string, Policy> = {}
  for (let i = 0; i < count; i++)
    policies[`p${i}`] = { algorithm: 'fixed-window', limit: 3, window: 60_000 } as Policy
  return createLimiter({ policies })
}

describe('observability bounded in policies', () => {
  it('keeps at most maxPolicies, dropping the least recently decided, and counts what it dropped', () => {
    let now = 1_000_000
    const limiter = limiterOf(POLICIES)
    const obs = createObservability({ limiter, now: () => now, maxPolicies: 100, dashboardPolicies: 10 })
    // p0 decides all along: it stays; p1..p2999 once each, in order.
    for (let i = 1; i < POLICIES; i++) {
      limiter.consumeSync(`p${i}`, 'k')
      limiter.consumeSync('p0', 'k')
      if (i % 50 === 0) {
        obs.flush()
        now += 10
      }
    }
    const snap = obs.snapshot()
    expect(snap.policies.length).toBe(10)
    expect(snap.policies.map((p) => p.policy)).toContain('p0')
    expect(snap.otherPolicies.count).toBe(90)
    expect(snap.otherPolicies.dropped).toBe(POLICIES - 100)
    // The listed policies and the others add up to every decision of the kept ones.
    const listed = snap.policies.reduce((n, p) => n + p.totals.allowed + p.totals.denied, 0)
    expect(listed + snap.otherPolicies.totals.allowed + snap.otherPolicies.totals.denied).toBe(
      // p0's 2999 decisions (3 allowed, the rest denied), and one for each of the other 99 kept
      2999 + 99,
    )
    expect(obs.topKeys().length).toBeLessThanOrEqual(2 * 100)
    expect(snap.topDenied.length).toBeLessThanOrEqual(10)
    expect(snap.topAdmitted.length).toBeLessThanOrEqual(10)
    obs.close()
  })

  it('lists the busiest policies, counting the second still filling', () => {
    const limiter = limiterOf(3)
    // The clock stands still: every decision is in the current second.
    const obs = createObservability({ limiter, now: () => 1_700_000_000_500, dashboardPolicies: 1 })
    limiter.consumeSync('p0', 'k')
    for (let i = 0; i < 3; i++) limiter.consumeSync('p2', 'k')
    for (let i = 0; i < 2; i++) limiter.consumeSync('p1', 'k')
    const snap = obs.snapshot()
    expect(snap.policies.map((p) => p.policy)).toEqual(['p2'])
    expect(snap.otherPolicies).toMatchObject({ count: 2, dropped: 0, totals: { allowed: 3, denied: 0 } })
    obs.close()
  })

  it('gives a snapshot of the same bounded size for 30 policies or 3000 (defaults)', async () => {
    const sizes: number[] = []
    for (const count of [30, POLICIES]) {
      const limiter = limiterOf(count)
      const obs = createObservability({ limiter })
      for (let i = 0; i < count; i++)
        for (let j = 0; j < 4; j++) limiter.consumeSync(`p${i}`, `key-${j}-${'x'.repeat(200)}`)
      const snap = obs.snapshot()
      sizes.push(Buffer.byteLength(JSON.stringify(snap)))
      expect(snap.policies.length).toBeLessThanOrEqual(50)
      expect(snap.policies.length + snap.otherPolicies.count + snap.otherPolicies.dropped).toBe(count)
      // Prometheus: at most 100 policy labels, the rest under _other, with every decision counted.
      const text = await obs.metrics.registry.metrics()
      const labels = new Set([...text.matchAll(/sluice_decisions_total\{policy="([^"]+)"/g)].map((m) => m[1]))
      expect(labels.size).toBeLessThanOrEqual(101)
      let counted = 0
      for (const policy of labels)
        for (const outcome of ['allowed', 'denied'])
          counted += sample(text, 'sluice_decisions_total', { policy: policy!, outcome }) ?? 0
      expect(counted).toBe(count * 4)
      obs.close()
    }
    // 50 listed policies with their top keys: well under what 3000 would take (about 3 MB here).
    expect(sizes[1]).toBeLessThan(400_000)
    expect(sizes[1]! / sizes[0]!).toBeLessThan(2)
  })
})
