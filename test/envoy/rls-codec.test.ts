// The gRPC listener's own protobuf coding of ShouldRateLimit, proved against protobufjs reading
// rls.proto (through proto-loader, with the options the tests' gRPC clients use): generated messages
// decode to what protobufjs decodes, answers encode to what protobufjs reads back, and truncated,
// mutated or random bytes end in MalformedMessageError, never another error or a hang.
import { loadSync } from '@grpc/proto-loader'
import { describe, expect, it } from 'vitest'
import type { WireRequest, WireResponse, WireStatus } from '../../packages/sluice-server/src/envoy/decide.js'
import { PROTO_OPTIONS, rlsProtoPath } from '../../packages/sluice-server/src/envoy/grpc.js'
import {
  decodeRateLimitRequest,
  encodeRateLimitResponseFrame,
  MalformedMessageError,
} from '../../packages/sluice-server/src/envoy/rls-codec.js'

const protobufjs = (
  loadSync(rlsProtoPath(), PROTO_OPTIONS)['envoy.service.ratelimit.v3.RateLimitService'] as Record<
    string,
    {
      requestSerialize(value: unknown): Buffer
      requestDeserialize(bytes: Buffer): WireRequest
      responseSerialize(value: unknown): Buffer
      responseDeserialize(bytes: Buffer): Record<string, unknown>
    }
  >
).ShouldRateLimit!

/** A small seeded generator (mulberry32), so every run checks the same messages. */
function random(seed: number) {
  let state = seed >>> 0
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (below: number) => Math.floor(next() * below)
  const ALPHABET = ['a', 'Z', '0', '-', '_', '.', ' ', 'é', '€', '😀', '\u0000', '|', '=']
  const text = (max: number) =>
    Array.from({ length: int(max + 1) }, () => ALPHABET[int(ALPHABET.length)]!).join('')
  const uint32 = () => (next() < 0.3 ? int(200) : next() < 0.5 ? 0xffffffff - int(3) : int(2 ** 32))
  return { next, int, text, uint32 }
}

const UNITS = ['UNKNOWN', 'SECOND', 'MINUTE', 'HOUR', 'DAY', 'MONTH', 'YEAR']

function generatedRequest(seed: number): Record<string, unknown> {
  const r = random(seed)
  const request: Record<string, unknown> = {
    domain: r.text(12),
    descriptors: Array.from({ length: r.int(5) }, () => ({
      entries: Array.from({ length: r.int(4) }, () => ({ key: r.text(8), value: r.text(20) })),
      ...(r.next() < 0.4
        ? { limit: { requests_per_unit: r.uint32(), unit: UNITS[r.int(UNITS.length)] } }
        : {}),
    })),
  }
  if (r.next() < 0.5) request.hits_addend = r.uint32()
  return request
}

function generatedResponse(seed: number): WireResponse {
  const r = random(seed)
  const status = (): WireStatus => ({
    code: r.next() < 0.5 ? 'OK' : 'OVER_LIMIT',
    limit_remaining: r.uint32(),
    ...(r.next() < 0.8
      ? {
          current_limit: {
            name: r.text(10),
            requests_per_unit: r.uint32(),
            unit: UNITS[r.int(UNITS.length)]!,
          },
        }
      : {}),
    ...(r.next() < 0.8
      ? { duration_until_reset: { seconds: r.int(40_000_000_000), nanos: r.int(1000) * 1_000_000 } }
      : {}),
  })
  return {
    overall_code: r.next() < 0.5 ? 'OK' : 'OVER_LIMIT',
    statuses: Array.from({ length: r.int(5) }, status),
    response_headers_to_add: Array.from({ length: r.int(4) }, () => ({ key: r.text(16), value: r.text(10) })),
  }
}

/** The answer as protobufjs reads it back, with proto-loader's defaults for what was left out. */
function asProtobufjsReadsIt(response: WireResponse) {
  return {
    overall_code: response.overall_code,
    statuses: response.statuses.map((s) => ({
      code: s.code,
      limit_remaining: s.limit_remaining,
      current_limit: s.current_limit ?? null,
      duration_until_reset: s.duration_until_reset ?? null,
    })),
    response_headers_to_add: response.response_headers_to_add.map((h) => ({
      ...h,
      raw_value: Buffer.alloc(0),
    })),
    request_headers_to_add: [],
  }
}

/** Decodes, returning the error instead of throwing it. */
function attempt(bytes: Buffer): WireRequest | Error {
  try {
    return decodeRateLimitRequest(bytes)
  } catch (error) {
    return error as Error
  }
}

describe('decodeRateLimitRequest', () => {
  it('reads 2,000 generated requests as protobufjs reads them', () => {
    for (let seed = 1; seed <= 2000; seed++) {
      const bytes = protobufjs.requestSerialize(generatedRequest(seed))
      expect(decodeRateLimitRequest(bytes), `seed ${seed}`).toEqual(protobufjs.requestDeserialize(bytes))
    }
  })

  it('reads a message from an offset, as the listener reads it behind its gRPC prefix', () => {
    const bytes = protobufjs.requestSerialize(generatedRequest(7))
    const framed = Buffer.concat([Buffer.from([0, 0, 0, 0, bytes.length]), bytes])
    expect(decodeRateLimitRequest(framed, 5)).toEqual(protobufjs.requestDeserialize(bytes))
  })

  it('gives proto-loader defaults for an empty message', () => {
    expect(decodeRateLimitRequest(Buffer.alloc(0))).toEqual({ domain: '', descriptors: [], hits_addend: 0 })
    expect(decodeRateLimitRequest(Buffer.alloc(0))).toEqual(protobufjs.requestDeserialize(Buffer.alloc(0)))
  })

  it('skips unknown fields of every proto3 wire type, at the top and inside a descriptor', () => {
    // field 9 varint 300; field 10 fixed64; field 11 length-delimited "xyz"; field 12 fixed32
    const unknown = Buffer.from([
      0x48, 0xac, 0x02, 0x51, 1, 2, 3, 4, 5, 6, 7, 8, 0x5a, 3, 0x78, 0x79, 0x7a, 0x65, 1, 2, 3, 4,
    ])
    const entry = Buffer.concat([Buffer.from([0x0a, 1, 0x6b, 0x12, 1, 0x76]), unknown]) // key "k", value "v"
    const descriptor = Buffer.concat([unknown, Buffer.from([0x0a, entry.length]), entry, unknown])
    const request = Buffer.concat([
      unknown,
      Buffer.from([0x0a, 1, 0x64]), // domain "d"
      Buffer.from([0x12, descriptor.length]),
      descriptor,
      unknown,
    ])
    const decoded = decodeRateLimitRequest(request)
    expect(decoded).toEqual({
      domain: 'd',
      descriptors: [{ entries: [{ key: 'k', value: 'v' }], limit: null }],
      hits_addend: 0,
    })
    expect(decoded).toEqual(protobufjs.requestDeserialize(request))
  })

  it('reads invalid UTF-8 as U+FFFD, as protobufjs does (the decision refuses it)', () => {
    const request = Buffer.from([0x0a, 2, 0xc3, 0x28])
    expect(decodeRateLimitRequest(request).domain).toBe('\ufffd(')
    expect(decodeRateLimitRequest(request)).toEqual(protobufjs.requestDeserialize(request))
  })

  it('names a unit rls.proto does not know by its number, as proto-loader does', () => {
    const request = protobufjs.requestSerialize({
      domain: 'd',
      descriptors: [{ entries: [{ key: 'k', value: 'v' }], limit: { requests_per_unit: 5, unit: 9 } }],
    })
    expect(decodeRateLimitRequest(request)).toEqual(protobufjs.requestDeserialize(request))
    expect(decodeRateLimitRequest(request).descriptors[0]!.limit!.unit).toBe(9)
  })

  const MALFORMED: [string, number[]][] = [
    ['a string longer than the message', [0x0a, 5, 0x61]],
    ['a length whose varint never ends', [0x0a, 0xff, 0xff]],
    ['a varint of 11 bytes', [0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]],
    ['a tag cut short', [0x80]],
    ['field number 0', [0x00, 0x01]],
    ['a group (wire type 3)', [0x4b, 0x4c]],
    ['wire type 6', [0x4e]],
    ['a fixed64 cut short', [0x51, 1, 2, 3]],
    ['a fixed32 cut short', [0x55, 1, 2]],
    ['a known string field sent as a varint', [0x08, 0x01]],
    ['hits_addend sent length-delimited', [0x1a, 0x01, 0x01]],
    // A descriptor of 4 bytes whose entry claims 6: the entry may not borrow the bytes after its descriptor.
    ['an entry longer than its descriptor', [0x12, 4, 0x0a, 6, 0x0a, 1, 0x6b, 0x12, 1, 0x76]],
    ['an override longer than its descriptor', [0x12, 2, 0x12, 3, 0x08, 1, 0x10]],
  ]
  for (const [what, bytes] of MALFORMED)
    it(`refuses ${what} with MalformedMessageError`, () => {
      expect(() => decodeRateLimitRequest(Buffer.from(bytes))).toThrow(MalformedMessageError)
    })

  // protobufjs reads a string cut short as the bytes there are; this decoder refuses it.
  it('ends every truncation of 300 generated requests in a MalformedMessageError or in what protobufjs reads', () => {
    let refused = 0
    for (let seed = 1; seed <= 300; seed++) {
      const bytes = protobufjs.requestSerialize(generatedRequest(seed))
      for (let length = 0; length < bytes.length; length++) {
        const cut = bytes.subarray(0, length)
        const mine = attempt(cut)
        if (mine instanceof Error) {
          expect(mine, `seed ${seed}, ${length} bytes`).toBeInstanceOf(MalformedMessageError)
          refused++
        } else expect(mine, `seed ${seed}, ${length} bytes`).toEqual(protobufjs.requestDeserialize(cut))
      }
    }
    expect(refused).toBeGreaterThan(1000)
  })

  it('ends 20,000 mutated and random inputs in a request or a MalformedMessageError, nothing else', () => {
    const r = random(27)
    for (let n = 0; n < 20_000; n++) {
      let bytes: Buffer
      if (n % 2 === 0) {
        bytes = Buffer.from(protobufjs.requestSerialize(generatedRequest(n)))
        for (let flips = 1 + r.int(3); flips > 0 && bytes.length > 0; flips--)
          bytes[r.int(bytes.length)] = r.int(256)
      } else bytes = Buffer.from(Array.from({ length: r.int(64) }, () => r.int(256)))
      const result = attempt(bytes)
      if (result instanceof Error)
        expect(result, `input ${bytes.toString('hex')}`).toBeInstanceOf(MalformedMessageError)
      else expect(result.descriptors.every((d) => Array.isArray(d.entries))).toBe(true)
    }
  })
})

describe('encodeRateLimitResponseFrame', () => {
  it('writes one uncompressed gRPC message whose 2,000 generated answers protobufjs reads back', () => {
    for (let seed = 1; seed <= 2000; seed++) {
      const response = generatedResponse(seed)
      const frame = encodeRateLimitResponseFrame(response)
      expect(frame[0]).toBe(0)
      expect(frame.readUInt32BE(1)).toBe(frame.length - 5)
      expect(protobufjs.responseDeserialize(frame.subarray(5)), `seed ${seed}`).toMatchObject(
        asProtobufjsReadsIt(response),
      )
    }
  })

  it('writes the same bytes for an answer as protobufjs when every field holds a value', () => {
    const response: WireResponse = {
      overall_code: 'OVER_LIMIT',
      statuses: [
        {
          code: 'OVER_LIMIT',
          current_limit: { name: 'per-user', requests_per_unit: 100, unit: 'MINUTE' },
          limit_remaining: 3,
          duration_until_reset: { seconds: 59, nanos: 500_000_000 },
        },
      ],
      response_headers_to_add: [{ key: 'RateLimit-Limit', value: '100' }],
    }
    expect(encodeRateLimitResponseFrame(response).subarray(5)).toEqual(protobufjs.responseSerialize(response))
  })
})
