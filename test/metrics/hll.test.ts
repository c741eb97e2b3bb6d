// The abuse patterns' distinct counter: its count right after it turns from an exact list of
// hashes into HyperLogLog registers, whatever the hash that turns it.
import { describe, expect, it } from 'vitest'
import { DistinctSketch } from '../../packages/sluice/src/metrics/hll.js'

// A hash whose top 9 bits pick register `index` and whose other 23 bits give that register `rank`
// (the position of their first 1 bit, from 1).
const hashFor = (index: number, rank: number): number => ((index << 23) | (1 << (23 - rank))) >>> 0

/** A sketch of 32 distinct hashes, one per register 0-31, each of rank 2: its exact list is full. */
function full(): DistinctSketch {
  const s = new DistinctSketch()
  for (let i = 0; i < 32; i++) expect(s.add(hashFor(i, 2))).toBe(true)
  expect(s.count()).toBe(32)
  return s
}

describe('DistinctSketch', () => {
  it('counts about 33 when the 33rd distinct hash raises no register', () => {
    const s = full()
    // Register 0 again, a lower rank: a new hash, and the registers stay as they are.
    expect(s.add(hashFor(0, 1))).toBe(true)
    expect(s.count()).toBeGreaterThanOrEqual(32)
    expect(s.count()).toBeLessThanOrEqual(35)
  })

  it('counts about 33 when the 33rd distinct hash raises a register', () => {
    const s = full()
    expect(s.add(hashFor(32, 2))).toBe(true)
    expect(s.count()).toBeGreaterThanOrEqual(32)
    expect(s.count()).toBeLessThanOrEqual(35)
  })

  it('ignores a hash seen before, in either form', () => {
    const s = full()
    expect(s.add(hashFor(5, 2))).toBe(false)
    s.add(hashFor(40, 2))
    const count = s.count()
    expect(s.add(hashFor(40, 2))).toBe(false)
    expect(s.count()).toBe(count)
  })

  it('a union of a dense sketch and an exact list counts the distinct hashes of both', () => {
    const dense = full()
    dense.add(hashFor(0, 1))
    const list = new DistinctSketch()
    for (let i = 32; i < 40; i++) list.add(hashFor(i, 2))
    const union = DistinctSketch.union([dense, list])
    expect(union).toBeGreaterThanOrEqual(39)
    expect(union).toBeLessThanOrEqual(43)
  })
})
