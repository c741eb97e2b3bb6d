import { describe, expect, it } from 'vitest'
import { hashedApiKey } from '../../packages/sluice/src/http/keys.js'
import type { Spike } from '../../packages/sluice/src/metrics/spikes.js'
import { SpikeDetector } from '../../packages/sluice/src/metrics/spikes.js'

/**
 * Feed `perSecond` requests for each of `keys` in each of `seconds` seconds starting at `from` (ms),
 * in time order (as a limiter would emit them).
 */
function feed(
  d: SpikeDetector,
  policy: string,
  keys: string | readonly string[],
  from: number,
  seconds: number,
  perSecond: number,
) {
  const list = typeof keys === 'string' ? [keys] : keys
  for (let s = 0; s < seconds; s++)
    for (let i = 0; i < perSecond; i++)
      for (const key of list) d.record(policy, key, from + s * 1000 + Math.floor((i * 1000) / perSecond))
}

const users = Array.from({ length: 20 }, (_, k) => `user-${k}`)

describe('SpikeDetector', () => {
  it('flags a policy whose rate jumps 10x over its own baseline, with when and how much', () => {
    const d = new SpikeDetector({ factor: 10, minRate: 5, warmupIntervals: 5 })
    const seen: Spike[] = []
    d.onSpike((s) => seen.push(s))
    // Steady 20 req/s spread over 20 keys (1 req/s each) for 10 s.
    feed(d, 'api', users, 0, 10, 1)
    d.tick(10_000)
    expect(seen).toEqual([])
    // Then 250 req/s in one second, still spread over the same keys (12.5 req/s each: no key spike).
    feed(d, 'api', users, 10_000, 1, 12)
    for (let i = 0; i < 10; i++) d.record('api', `user-${i}`, 10_500)
    d.tick(11_000)
    expect(seen).toHaveLength(1)
    const s = seen[0]!
    expect(s).toMatchObject({ scope: 'policy', policy: 'api', at: 11_000, rate: 250 })
    expect(s.baseline).toBeCloseTo(20, 5)
    expect(s.ratio).toBeCloseTo(12.5, 5)
    expect(d.recent()[0]).toEqual(s)
  })

  it('does not flag steady traffic or a rise below the factor', () => {
    const d = new SpikeDetector({ factor: 10 })
    feed(d, 'api', 'k', 0, 20, 30)
    feed(d, 'api', 'k', 20_000, 5, 200) // 6.7x: not a spike
    d.tick(30_000)
    expect(d.recent()).toEqual([])
  })

  it('flags one key that jumps, not its quiet neighbours', () => {
    const d = new SpikeDetector({ factor: 10, minRate: 5 })
    feed(d, 'login', ['alice', 'bob', 'mallory'], 0, 10, 3)
    feed(d, 'login', ['alice', 'bob'], 10_000, 1, 3)
    feed(d, 'login', 'mallory', 10_000, 1, 80) // 80/s against a 3/s baseline (floored at 5): 16x
    const found = d.tick(11_000)
    const keySpikes = found.filter((s) => s.scope === 'key')
    expect(keySpikes).toHaveLength(1)
    expect(keySpikes[0]).toMatchObject({ policy: 'login', key: 'mallory', rate: 80 })
    expect(keySpikes[0]!.ratio).toBeCloseTo(16, 5)
  })

  it('ignores a policy during warm-up and rates under the floor', () => {
    const d = new SpikeDetector({ factor: 10, minRate: 5, warmupIntervals: 5 })
    feed(d, 'api', 'a', 0, 1, 1)
    feed(d, 'api', 'a', 1_000, 1, 40) // 40x, but the policy has one interval of history only
    d.tick(2_000)
    // The key: 40/s against baseline 1 floored at 5 = 8x, under 10x.
    expect(d.recent()).toEqual([])
  })

  it('a spike raises the baseline, so a sustained level is flagged once, not every second', () => {
    const d = new SpikeDetector({ factor: 10, alpha: 0.2 })
    feed(d, 'api', 'k', 0, 10, 10)
    feed(d, 'api', 'k', 10_000, 5, 200)
    d.tick(15_000)
    const policySpikes = d.recent().filter((s) => s.scope === 'policy')
    expect(policySpikes).toHaveLength(1)
    expect(policySpikes[0]!.at).toBe(11_000)
  })

  it('quiet periods decay the baseline, so traffic coming back after a long silence can spike', () => {
    const d = new SpikeDetector({ factor: 10, alpha: 0.5 })
    feed(d, 'api', 'k', 0, 10, 8)
    d.tick(40_000) // 30 silent seconds (capped at 20 decay steps)
    feed(d, 'api', 'k', 40_000, 1, 60)
    d.tick(41_000)
    // Baseline decayed to ~0 and is floored at 5: 60/s is 12x.
    expect(d.recent().some((s) => s.scope === 'policy' && s.rate === 60)).toBe(true)
  })

  it('keeps at most maxKeys baselines and keep spikes', () => {
    const d = new SpikeDetector({ maxKeys: 10, keep: 3, keysPerInterval: 8, minRate: 1, factor: 2 })
    for (let s = 0; s < 10; s++) for (let k = 0; k < 8; k++) d.record('api', `s${s}-k${k}`, s * 1000)
    d.tick(10_000)
    expect(d.recent().length).toBeLessThanOrEqual(3)
    // Internal bound, checked through the only observable effect: a re-appearing old key is new again.
    expect((d as unknown as { keyBaselines: Map<string, unknown> }).keyBaselines.size).toBeLessThanOrEqual(10)
  })
})

describe('spikes of hashed keys', () => {
  it('carry the short fingerprint of an apikey:<hash> key; plain keys carry none', () => {
    const hashed = hashedApiKey('sk_live_spiky-secret')
    const d = new SpikeDetector({ factor: 10, minRate: 5 })
    feed(d, 'api', [hashed, 'plain'], 0, 10, 3)
    feed(d, 'api', [hashed, 'plain'], 10_000, 1, 80)
    const keySpikes = d.tick(11_000).filter((s) => s.scope === 'key')
    expect(keySpikes.find((s) => s.key === hashed)?.fingerprint).toBe(`${hashed.slice(0, 15)}…`)
    expect(keySpikes.find((s) => s.key === 'plain')).not.toHaveProperty('fingerprint')
  })
})
