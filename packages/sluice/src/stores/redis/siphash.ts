// SipHash-2-4 (Aumasson and Bernstein, 2012): a keyed hash made for short inputs whose outputs an
// attacker without the key cannot predict, which is what a Cluster hash tag derived from a caller's
// key needs. Here rather than a node:crypto HMAC because it runs per decision: an HMAC object costs
// microseconds per call (allocation and the native call), this a few hundred nanoseconds.
// Each 64-bit word is two 32-bit halves (high, low) in local variables: in a typed array or at
// module level the same code measured three to five times slower.

/** A 128-bit SipHash key as its two 64-bit words, each (high, low) as unsigned 32-bit halves. */
export interface SipKey {
  readonly k0h: number
  readonly k0l: number
  readonly k1h: number
  readonly k1l: number
}

/** The key from its 16 bytes (little-endian words, as the reference implementation reads them). */
export function sipKey(bytes: Uint8Array): SipKey {
  if (bytes.length !== 16) throw new RangeError('a SipHash key is 16 bytes')
  const word = (at: number): number =>
    (bytes[at]! | (bytes[at + 1]! << 8) | (bytes[at + 2]! << 16) | (bytes[at + 3]! << 24)) >>> 0
  return { k0l: word(0), k0h: word(4), k1l: word(8), k1h: word(12) }
}

/**
 * SipHash-2-4 of the first `length` bytes of `data`, as the [high, low] unsigned 32-bit halves of
 * the 64-bit result (the reference implementation writes that number's 8 bytes little-endian).
 */
export function sipHash24(key: SipKey, data: Uint8Array, length: number): [number, number] {
  let v0h = key.k0h ^ 0x736f6d65
  let v0l = key.k0l ^ 0x70736575
  let v1h = key.k1h ^ 0x646f7261
  let v1l = key.k1l ^ 0x6e646f6d
  let v2h = key.k0h ^ 0x6c796765
  let v2l = key.k0l ^ 0x6e657261
  let v3h = key.k1h ^ 0x74656462
  let v3l = key.k1l ^ 0x79746573
  // Message words: every whole 8 bytes, then one of the bytes left and the length (mod 256) in its
  // top byte. One pass per word (v3 ^= m, 2 rounds, v0 ^= m), then a last pass of 4 rounds with
  // v2 ^= 0xff and no word (m = 0 makes its xors no-ops).
  const words = (length >>> 3) + 1
  for (let w = 0; w <= words; w++) {
    let mh = 0
    let ml = 0
    let rounds = 2
    if (w < words - 1) {
      const i = 8 * w
      ml = data[i]! | (data[i + 1]! << 8) | (data[i + 2]! << 16) | (data[i + 3]! << 24)
      mh = data[i + 4]! | (data[i + 5]! << 8) | (data[i + 6]! << 16) | (data[i + 7]! << 24)
    } else if (w === words - 1) {
      mh = (length & 0xff) << 24
      for (let i = 8 * w; i < length; i++) {
        const shift = 8 * (i - 8 * w)
        if (shift < 32) ml |= data[i]! << shift
        else mh |= data[i]! << (shift - 32)
      }
    } else {
      v2l ^= 0xff
      rounds = 4
    }
    v3h ^= mh
    v3l ^= ml
    for (let r = 0; r < rounds; r++) {
      // v0 += v1 (mod 2^64); v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32)
      let sum = (v0l >>> 0) + (v1l >>> 0)
      v0h = (v0h + v1h + (sum > 0xffffffff ? 1 : 0)) | 0
      v0l = sum | 0
      let t = (v1h << 13) | (v1l >>> 19)
      v1l = (v1l << 13) | (v1h >>> 19)
      v1h = t ^ v0h
      v1l ^= v0l
      t = v0h
      v0h = v0l
      v0l = t
      // v2 += v3; v3 = rotl(v3, 16); v3 ^= v2
      sum = (v2l >>> 0) + (v3l >>> 0)
      v2h = (v2h + v3h + (sum > 0xffffffff ? 1 : 0)) | 0
      v2l = sum | 0
      t = (v3h << 16) | (v3l >>> 16)
      v3l = (v3l << 16) | (v3h >>> 16)
      v3h = t ^ v2h
      v3l ^= v2l
      // v0 += v3; v3 = rotl(v3, 21); v3 ^= v0
      sum = (v0l >>> 0) + (v3l >>> 0)
      v0h = (v0h + v3h + (sum > 0xffffffff ? 1 : 0)) | 0
      v0l = sum | 0
      t = (v3h << 21) | (v3l >>> 11)
      v3l = (v3l << 21) | (v3h >>> 11)
      v3h = t ^ v0h
      v3l ^= v0l
      // v2 += v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32)
      sum = (v2l >>> 0) + (v1l >>> 0)
      v2h = (v2h + v1h + (sum > 0xffffffff ? 1 : 0)) | 0
      v2l = sum | 0
      t = (v1h << 17) | (v1l >>> 15)
      v1l = (v1l << 17) | (v1h >>> 15)
      v1h = t ^ v2h
      v1l ^= v2l
      t = v2h
      v2h = v2l
      v2l = t
    }
    v0h ^= mh
    v0l ^= ml
  }
  return [(v0h ^ v1h ^ v2h ^ v3h) >>> 0, (v0l ^ v1l ^ v2l ^ v3l) >>> 0]
}
