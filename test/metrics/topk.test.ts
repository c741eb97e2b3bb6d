import { describe, expect, it } from 'vitest'
import { hashedApiKey } from '../../packages/sluice/src/http/keys.js'
import {
  DistinctCounter,
  keyFingerprint,
  SlidingTopK,
  SpaceSaving,
} from '../../packages/sluice/src/metrics/topk.js'

/** Deterministic pseudo-random numbers (mulberry32), so failures reproduce. */
function random(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** A Zipf-like stream over `keys` keys: key i has weight 1/(i+1)^s. */
function zipfStream(n: number, keys: number, s: number, seed: number): string[] {
  const weights = Array.from({ length: keys }, (_, i) => 1 / (i + 1) ** s)
  const sum = weights.reduce((a, b) => a + b, 0)
  const cdf: number[] = []
  let acc = 0
  for (const w of weights) {
    acc += w / sum
    cdf.push(acc)
  }
  const rnd = random(seed)
  const out: string[] = []
  for (let i = 0; i < n; i++) {
    const u = rnd()
    let lo = 0
    let hi = keys - 1
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (cdf[mid]! < u) lo = mid + 1
      else hi = mid
    }
    out.push(`key-${lo}`)
  }
  return out
}

function exactCounts(stream: readonly string[]): Map<string, number> {
  const m = new Map<string, number>()
  for (const k of stream) m.set(k, (m.get(k) ?? 0) + 1)
  return m
}

describe('SpaceSaving', () => {
  it('is exact while the keys fit', () => {
    const s = new SpaceSaving(4)
    for (const k of ['a', 'b', 'a', 'c', 'a', 'b']) s.add(k)
    expect(s.top(3)).toEqual([
      { key: 'a', count: 3, maxError: 0 },
      { key: 'b', count: 2, maxError: 0 },
      { key: 'c', count: 1, maxError: 0 },
    ])
    expect(s.total).toBe(6)
  })

  it('never holds more than its capacity, and a new key takes the smallest counter', () => {
    const s = new SpaceSaving(2)
    s.add('a', 5)
    s.add('b', 1)
    s.add('c') // evicts b (1): c gets 1 + 1 with error 1
    expect(s.size).toBe(2)
    expect(s.get('b')).toBeUndefined()
    expect(s.get('c')).toEqual({ key: 'c', count: 2, maxError: 1 })
    expect(s.get('a')).toEqual({ key: 'a', count: 5, maxError: 0 })
  })

  it('finds every key above total/capacity and bounds every error (Zipf stream)', () => {
    const stream = zipfStream(50_000, 5_000, 1.1, 7)
    const exact = exactCounts(stream)
    const capacity = 100
    const s = new SpaceSaving(capacity)
    for (const k of stream) s.add(k)
    expect(s.size).toBe(capacity)
    for (const e of s.entries()) {
      const truth = exact.get(e.key) ?? 0
      // Space-saving overestimates by at most the recorded error, never underestimates.
      expect(e.count).toBeGreaterThanOrEqual(truth)
      expect(e.count - e.maxError).toBeLessThanOrEqual(truth)
      expect(e.maxError).toBeLessThanOrEqual(stream.length / capacity)
    }
    for (const [key, count] of exact) if (count > stream.length / capacity) expect(s.get(key)).toBeDefined()
    // The true top 5 come out as the top 5, in order.
    const trueTop = [...exact].sort((a, b) => b[1] - a[1]).slice(0, 5)
    expect(s.top(5).map((e) => e.key)).toEqual(trueTop.map(([k]) => k))
  })
})

describe('DistinctCounter (HyperLogLog)', () => {
  it.each([0, 1, 50, 1_000, 20_000])('estimates %i distinct keys within 20%%', (n) => {
    const c = new DistinctCounter()
    for (let i = 0; i < n; i++) {
      c.add(`user-${i}`)
      c.add(`user-${i}`) // repeats do not count
    }
    const estimate = DistinctCounter.estimate([c])
    expect(Math.abs(estimate - n)).toBeLessThanOrEqual(Math.max(2, n * 0.2))
  })

  it('merges counters as a union', () => {
    const a = new DistinctCounter()
    const b = new DistinctCounter()
    for (let i = 0; i < 3000; i++) a.add(`k${i}`)
    for (let i = 2000; i < 5000; i++) b.add(`k${i}`)
    const estimate = DistinctCounter.estimate([a, b])
    expect(Math.abs(estimate - 5000)).toBeLessThanOrEqual(1000)
  })
})

describe('SlidingTopK', () => {
  it('forgets what is older than the horizon, one bucket at a time', () => {
    const t = new SlidingTopK({ horizonMs: 60_000, buckets: 6, capacity: 16 })
    for (let i = 0; i < 30; i++) t.add('early', 1_000)
    for (let i = 0; i < 10; i++) t.add('later', 25_000)
    expect(t.report(30_000, 5).top.map((e) => [e.key, e.count])).toEqual([
      ['early', 30],
      ['later', 10],
    ])
    // At 60 s the bucket [0, 10 s) has left the 60 s horizon; [20 s, 30 s) is still inside.
    const r = t.report(60_000, 5)
    expect(r.top.map((e) => [e.key, e.count])).toEqual([['later', 10]])
    expect(r.total).toBe(10)
    expect(t.report(90_000, 5).total).toBe(0)
  })

  it('sums a key across buckets and bounds the error of keys evicted from a full bucket', () => {
    const t = new SlidingTopK({ horizonMs: 20_000, buckets: 2, capacity: 2 })
    t.add('a', 0, 10)
    t.add('b', 0, 5)
    t.add('a', 10_000, 7)
    t.add('c', 10_000, 3)
    t.add('d', 10_000, 1) // evicts c (3): d = 4, error 3
    const r = t.report(15_000, 10)
    expect(r.top[0]).toEqual({ key: 'a', count: 17, maxError: 0 })
    const b = r.top.find((e) => e.key === 'b')!
    // b is missing from the full second bucket, where it might have had up to that bucket's floor.
    expect(b.count).toBe(5)
    expect(b.maxError).toBe(4)
    expect(r.total).toBe(26)
  })

  it('reports the share of traffic of the top 1% of keys', () => {
    const t = new SlidingTopK({ horizonMs: 60_000, capacity: 64 })
    // 1000 keys; keys 0..9 (1%) send 100 requests each, the other 990 send 1 each.
    for (let i = 0; i < 1000; i++) t.add(`ip-${i}`, 1_000, i < 10 ? 100 : 1)
    const r = t.report(2_000, 10)
    expect(r.total).toBe(1990)
    expect(Math.abs(r.distinctKeys - 1000)).toBeLessThan(200)
    // ceil(1% of ~1000) keys: the ten heavy ones (their counts are exact, they were tracked first).
    expect(r.topOnePercentShare).not.toBeNull()
    expect(r.topOnePercentShare!).toBeGreaterThan(0.45)
    expect(r.topOnePercentShare!).toBeLessThan(0.56)
    expect(r.top.slice(0, 10).every((e) => /^ip-\d$/.test(e.key))).toBe(true)
  })

  it('says it cannot tell when the top 1% is more keys than it tracks', () => {
    const t = new SlidingTopK({ horizonMs: 60_000, capacity: 8 })
    for (let i = 0; i < 5000; i++) t.add(`ip-${i}`, 1_000)
    expect(t.report(1_000, 5).topOnePercentShare).toBeNull()
  })

  it('keeps memory bounded whatever the number of keys', () => {
    const t = new SlidingTopK({ horizonMs: 60_000, buckets: 6, capacity: 32 })
    for (let i = 0; i < 100_000; i++) t.add(`ip-${i}`, i)
    expect(t.report(100_000, 1000).top.length).toBeLessThanOrEqual(6 * 32)
  })
})

describe('keyFingerprint', () => {
  it('shortens the hashed keys of the HTTP core and the service, and nothing else', () => {
    const hashed = hashedApiKey('sk_live_secret')
    expect(keyFingerprint(hashed)).toBe(`apikey:${hashed.slice(7, 15)}…`)
    expect(keyFingerprint(`hash:${'A'.repeat(32)}`)).toBe('hash:AAAAAAAA…')
    for (const key of ['user-42', '203.0.113.7', 'apikey:short', `apikey:${'A'.repeat(33)}`])
      expect(keyFingerprint(key), key).toBeUndefined()
  })

  it('SlidingTopK reports a fingerprint beside the hashed key', () => {
    const hashed = hashedApiKey('sk_live_secret')
    const t = new SlidingTopK()
    t.add(hashed, 1000, 5)
    t.add('user-1', 1000, 1)
    expect(t.report(1000, 2).top).toEqual([
      { key: hashed, count: 5, maxError: 0, fingerprint: keyFingerprint(hashed) },
      { key: 'user-1', count: 1, maxError: 0 },
    ])
  })
})
