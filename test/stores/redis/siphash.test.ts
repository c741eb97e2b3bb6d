// SipHash-2-4 as the reference implementation computes it: its published outputs for the key
// 00..0f, and a plain BigInt transcription of the algorithm for every length up to 80 bytes (each
// length takes another path through the last, partial word).
import { describe, expect, it } from 'vitest'
import { type SipKey, sipHash24, sipKey } from '../../../packages/sluice/src/stores/redis/siphash.js'

const keyBytes = Uint8Array.from({ length: 16 }, (_, i) => i)
const hex = ([high, low]: [number, number]): string =>
  high.toString(16).padStart(8, '0') + low.toString(16).padStart(8, '0')

/** SipHash-2-4 on 64-bit BigInts, word by word as the paper writes it. */
function reference(key: Uint8Array, message: Uint8Array): bigint {
  const mask = (1n << 64n) - 1n
  const rotl = (x: bigint, b: bigint): bigint => ((x << b) | (x >> (64n - b))) & mask
  const word = (bytes: Uint8Array, at: number): bigint => {
    let x = 0n
    for (let i = 7; i >= 0; i--) x = (x << 8n) | BigInt(bytes[at + i] ?? 0)
    return x
  }
  const k0 = word(key, 0)
  const k1 = word(key, 8)
  let v0 = k0 ^ 0x736f6d6570736575n
  let v1 = k1 ^ 0x646f72616e646f6dn
  let v2 = k0 ^ 0x6c7967656e657261n
  let v3 = k1 ^ 0x7465646279746573n
  const round = (): void => {
    v0 = (v0 + v1) & mask
    v1 = rotl(v1, 13n) ^ v0
    v0 = rotl(v0, 32n)
    v2 = (v2 + v3) & mask
    v3 = rotl(v3, 16n) ^ v2
    v0 = (v0 + v3) & mask
    v3 = rotl(v3, 21n) ^ v0
    v2 = (v2 + v1) & mask
    v1 = rotl(v1, 17n) ^ v2
    v2 = rotl(v2, 32n)
  }
  const whole = message.length - (message.length % 8)
  const absorb = (m: bigint): void => {
    v3 ^= m
    round()
    round()
    v0 ^= m
  }
  for (let i = 0; i < whole; i += 8) absorb(word(message, i))
  let last = BigInt(message.length & 0xff) << 56n
  for (let i = whole; i < message.length; i++) last |= BigInt(message[i]!) << BigInt(8 * (i - whole))
  absorb(last)
  v2 ^= 0xffn
  for (let i = 0; i < 4; i++) round()
  return v0 ^ v1 ^ v2 ^ v3
}

describe('SipHash-2-4', () => {
  const key: SipKey = sipKey(keyBytes)

  it('matches the published outputs for key 00..0f', () => {
    expect(hex(sipHash24(key, new Uint8Array(0), 0))).toBe('726fdb47dd0e0e31')
    const message = Uint8Array.from({ length: 15 }, (_, i) => i)
    expect(hex(sipHash24(key, message, 15))).toBe('a129ca6149be45e5')
  })

  it('matches the BigInt transcription at every length, with high bytes and other keys', () => {
    const otherKey = Uint8Array.from({ length: 16 }, (_, i) => 0xff - i * 13)
    for (const k of [keyBytes, otherKey]) {
      for (let length = 0; length <= 80; length++) {
        const message = Uint8Array.from({ length }, (_, i) => (i * 151 + length * 7 + 0x80) & 0xff)
        expect(hex(sipHash24(sipKey(k), message, length)), `length ${length}`).toBe(
          reference(k, message).toString(16).padStart(16, '0'),
        )
      }
    }
  })

  it('reads only the first `length` bytes', () => {
    const buffer = Uint8Array.from({ length: 32 }, (_, i) => i)
    expect(sipHash24(key, buffer, 15)).toEqual(sipHash24(key, buffer.slice(0, 15), 15))
  })

  it('refuses a key that is not 16 bytes', () => {
    expect(() => sipKey(new Uint8Array(15))).toThrow(RangeError)
  })
})
