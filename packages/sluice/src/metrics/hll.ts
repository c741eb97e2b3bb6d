// A small distinct counter for the abuse patterns: exact (a short list of 32-bit hashes) while a key
// has seen few distinct values, then a HyperLogLog of 2^9 = 512 one-byte registers. Merges by union.
import { fnv1a } from './topk.js'

/** Registers of the dense form: 2^PRECISION. */
const HLL_PRECISION = 9
const HLL_REGISTER_COUNT = 1 << HLL_PRECISION
/** Relative standard error of a dense estimate: 1.04 / sqrt(m), about 4.6% with 512 registers. */
export const HLL_STANDARD_ERROR = 1.04 / Math.sqrt(HLL_REGISTER_COUNT)
/** Distinct hashes kept exactly before the sketch turns dense (32 x 4 bytes < 512 bytes). */
const SPARSE_LIMIT = 32
/** Upper bound on the bytes one sketch holds (the registers; the sparse list is smaller). */
export const SKETCH_BYTES = HLL_REGISTER_COUNT

const RANK_BITS = 32 - HLL_PRECISION
const ALPHA = 0.7213 / (1 + 1.079 / HLL_REGISTER_COUNT)

function setRegister(registers: Uint8Array, hash: number): boolean {
  const index = hash >>> RANK_BITS
  const rest = (hash << HLL_PRECISION) >>> 0
  // Position of the first 1 bit in the remaining bits (1-based); all zero counts as RANK_BITS + 1.
  const rank = rest === 0 ? RANK_BITS + 1 : Math.clz32(rest) + 1
  if (rank <= registers[index]!) return false
  registers[index] = rank
  return true
}

function estimateRegisters(registers: Uint8Array): number {
  let sum = 0
  let zeros = 0
  for (let i = 0; i < HLL_REGISTER_COUNT; i++) {
    const r = registers[i]!
    sum += 2 ** -r
    if (r === 0) zeros++
  }
  const m = HLL_REGISTER_COUNT
  const raw = (ALPHA * m * m) / sum
  // Small cardinalities: linear counting on the empty registers is far more accurate.
  if (raw <= 2.5 * m && zeros > 0) return m * Math.log(m / zeros)
  return raw
}

/**
 * Distinct values seen, exact up to SPARSE_LIMIT (bar 32-bit hash collisions), then HyperLogLog.
 * @example
 * const s = new DistinctSketch()
 * s.add(fnv1a('user:1')); s.add(fnv1a('user:1'))
 * s.count() // 1
 */
export class DistinctSketch {
  private sparse: number[] | undefined = []
  private registers: Uint8Array | undefined
  private cached = 0
  private dirty = false

  /** Count one value by its 32-bit hash; returns true when the count may have changed. */
  add(hash: number): boolean {
    const sparse = this.sparse
    if (sparse !== undefined) {
      if (sparse.includes(hash)) return false
      if (sparse.length < SPARSE_LIMIT) {
        sparse.push(hash)
        return true
      }
      const registers = new Uint8Array(HLL_REGISTER_COUNT)
      for (const h of sparse) setRegister(registers, h)
      setRegister(registers, hash)
      this.registers = registers
      this.sparse = undefined
      // The count is the registers' estimate from now on, whether or not this hash raised one: a
      // count left at its cached value (0 before any) would read a key past the list as empty.
      this.dirty = true
      return true
    }
    if (!setRegister(this.registers!, hash)) return false
    this.dirty = true
    return true
  }

  /** This sketch's estimate (cached between changes). */
  count(): number {
    if (this.sparse !== undefined) return this.sparse.length
    if (this.dirty) {
      this.cached = estimateRegisters(this.registers!)
      this.dirty = false
    }
    return this.cached
  }

  /** Estimated distinct values in the union of `sketches`. */
  static union(sketches: readonly DistinctSketch[]): number {
    if (sketches.length === 1) return Math.round(sketches[0]!.count())
    if (sketches.every((s) => s.sparse !== undefined)) {
      const all = new Set<number>()
      for (const s of sketches) for (const h of s.sparse!) all.add(h)
      if (all.size <= SPARSE_LIMIT) return all.size
      const registers = new Uint8Array(HLL_REGISTER_COUNT)
      for (const h of all) setRegister(registers, h)
      return Math.round(estimateRegisters(registers))
    }
    const merged = new Uint8Array(HLL_REGISTER_COUNT)
    for (const s of sketches) {
      if (s.sparse !== undefined) for (const h of s.sparse) setRegister(merged, h)
      else
        for (let i = 0; i < HLL_REGISTER_COUNT; i++)
          if (s.registers![i]! > merged[i]!) merged[i] = s.registers![i]!
    }
    return Math.round(estimateRegisters(merged))
  }
}

export { fnv1a }
