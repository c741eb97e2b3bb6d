// The protobuf coding of ShouldRateLimit's two messages, written for exactly the fields of rls.proto
// that the call uses (rls.proto stays the description of the wire; test/envoy/rls-codec.test.ts
// proves this against protobufjs reading rls.proto). Decoding is bounded: every length is checked
// against the bytes there are, unknown fields are skipped, nesting is what the messages nest.
import type { WireDescriptor, WireEntry, WireRequest, WireResponse, WireStatus } from './decide.js'

/** A message that is no RateLimitRequest: the listener answers INVALID_ARGUMENT with this message. */
export class MalformedMessageError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'MalformedMessageError'
  }
}

/** Protobuf wire types (protobuf.dev/programming-guides/encoding). */
const VARINT = 0
const FIXED64 = 1
const LENGTH_DELIMITED = 2
const FIXED32 = 5

/** RateLimitResponse.RateLimit.Unit by number, as proto-loader's `enums: String` names them. */
const UNIT_NAMES = ['UNKNOWN', 'SECOND', 'MINUTE', 'HOUR', 'DAY', 'MONTH', 'YEAR'] as const
const UNIT_NUMBERS: Readonly<Record<string, number>> = Object.fromEntries(
  UNIT_NAMES.map((name, i) => [name, i]),
)
const CODE_NUMBERS: Readonly<Record<string, number>> = { UNKNOWN: 0, OK: 1, OVER_LIMIT: 2 }

/**
 * A cursor over one message's bytes. `end` is where the message being read ends; a nested message
 * narrows it and restores it once read, so no read ever passes the bytes its length announced.
 */
class Reader {
  end: number
  constructor(
    readonly bytes: Buffer,
    public at: number,
  ) {
    this.end = bytes.length
  }

  /** A varint's low 32 bits, unsigned; at most 10 bytes, as protobuf writes a 64-bit value. */
  uint32(): number {
    const { bytes, end } = this
    let value = 0
    for (let i = 0; i < 10; i++) {
      if (this.at >= end) throw new MalformedMessageError('a number runs past the end of its message')
      const byte = bytes[this.at++]!
      if (i < 5) value |= (byte & 0x7f) << (7 * i)
      if (byte < 0x80) return value >>> 0
    }
    throw new MalformedMessageError('a number is longer than 10 bytes')
  }

  /** The end of a length-delimited field starting here (its length read), within the message. */
  delimited(): number {
    const length = this.uint32()
    if (length > this.end - this.at)
      throw new MalformedMessageError(`a field of ${length} bytes runs past the end of its message`)
    return this.at + length
  }

  string(): string {
    const end = this.delimited()
    // Invalid UTF-8 reads as U+FFFD, which decide.ts refuses.
    const text = this.bytes.toString('utf8', this.at, end)
    this.at = end
    return text
  }

  /** Skips a field of `wireType` whose tag was read. Groups (proto2 only) are refused. */
  skip(wireType: number): void {
    switch (wireType) {
      case VARINT:
        this.uint32()
        return
      case FIXED64:
        this.advance(8)
        return
      case LENGTH_DELIMITED:
        this.at = this.delimited()
        return
      case FIXED32:
        this.advance(4)
        return
      default:
        throw new MalformedMessageError(`wire type ${wireType} at byte ${this.at} is not one proto3 writes`)
    }
  }

  private advance(count: number): void {
    if (count > this.end - this.at)
      throw new MalformedMessageError('a fixed-size field runs past the end of its message')
    this.at += count
  }
}

/** Reads a field's tag: its number (never 0) and wire type. */
function tagOf(reader: Reader): number {
  const tag = reader.uint32()
  if (tag >>> 3 === 0) throw new MalformedMessageError(`field number 0 at byte ${reader.at}`)
  return tag
}

/** Fails unless a known field came with the wire type rls.proto gives it. */
function expectWireType(tag: number, wireType: number): void {
  if ((tag & 7) !== wireType)
    throw new MalformedMessageError(`field ${tag >>> 3} has wire type ${tag & 7}, not ${wireType}`)
}

function readEntry(reader: Reader, end: number): WireEntry {
  const entry: WireEntry = { key: '', value: '' }
  while (reader.at < end) {
    const tag = tagOf(reader)
    switch (tag >>> 3) {
      case 1:
        expectWireType(tag, LENGTH_DELIMITED)
        entry.key = reader.string()
        break
      case 2:
        expectWireType(tag, LENGTH_DELIMITED)
        entry.value = reader.string()
        break
      default:
        reader.skip(tag & 7)
    }
  }
  return entry
}

function readOverride(reader: Reader, end: number): NonNullable<WireDescriptor['limit']> {
  let requestsPerUnit = 0
  let unit = 0
  while (reader.at < end) {
    const tag = tagOf(reader)
    switch (tag >>> 3) {
      case 1:
        expectWireType(tag, VARINT)
        requestsPerUnit = reader.uint32()
        break
      case 2:
        expectWireType(tag, VARINT)
        unit = reader.uint32() | 0
        break
      default:
        reader.skip(tag & 7)
    }
  }
  // An enum value rls.proto does not name stays a number, as proto-loader leaves it.
  return { requests_per_unit: requestsPerUnit, unit: (UNIT_NAMES[unit] ?? unit) as string }
}

/**
 * `list` with `item` added: a list of one made for the first item (V8 gives an array grown from
 * empty room for 17), pushed to after that.
 */
function added<T>(list: T[] | undefined, item: T): T[] {
  if (list === undefined) return [item]
  list.push(item)
  return list
}

function readDescriptor(reader: Reader, end: number): WireDescriptor {
  let entries: WireEntry[] | undefined
  let limit: WireDescriptor['limit'] = null
  while (reader.at < end) {
    const tag = tagOf(reader)
    switch (tag >>> 3) {
      case 1:
        expectWireType(tag, LENGTH_DELIMITED)
        entries = added(entries, readEntry(reader, nested(reader)))
        restore(reader, end)
        break
      case 2:
        expectWireType(tag, LENGTH_DELIMITED)
        limit = readOverride(reader, nested(reader))
        restore(reader, end)
        break
      default:
        reader.skip(tag & 7)
    }
  }
  return { entries: entries ?? [], limit }
}

/** Narrows the reader to the nested message starting here; returns where it ends. */
function nested(reader: Reader): number {
  const end = reader.delimited()
  reader.end = end
  return end
}

/** Back to the enclosing message (ending at `end`) once a nested one is read. */
function restore(reader: Reader, end: number): void {
  reader.end = end
}

/**
 * A RateLimitRequest from its protobuf bytes (those of `bytes` from `start` on), with proto-loader's
 * defaults (`''`, `0`, `[]`, a missing `limit` as null). Throws MalformedMessageError for bytes
 * that are no such message.
 */
export function decodeRateLimitRequest(bytes: Buffer, start = 0): WireRequest {
  const reader = new Reader(bytes, start)
  let domain = ''
  let descriptors: WireDescriptor[] | undefined
  let hitsAddend = 0
  const end = bytes.length
  while (reader.at < end) {
    const tag = tagOf(reader)
    switch (tag >>> 3) {
      case 1:
        expectWireType(tag, LENGTH_DELIMITED)
        domain = reader.string()
        break
      case 2:
        expectWireType(tag, LENGTH_DELIMITED)
        descriptors = added(descriptors, readDescriptor(reader, nested(reader)))
        restore(reader, end)
        break
      case 3:
        expectWireType(tag, VARINT)
        hitsAddend = reader.uint32()
        break
      default:
        reader.skip(tag & 7)
    }
  }
  return { domain, descriptors: descriptors ?? [], hits_addend: hitsAddend }
}

// Encoding: the sizes first (a message's length precedes it), then one buffer written in one pass.
// Fields holding their default (0, '', absent) are left out, as proto3 writes them.

function varintSize(value: number): number {
  let size = 1
  while (value >= 0x80) {
    value = Math.floor(value / 128)
    size++
  }
  return size
}

/** A field of `bytes` length-delimited bytes: tag, length, bytes. */
const delimitedSize = (bytes: number) => 1 + varintSize(bytes) + bytes
const stringSize = (text: string) => delimitedSize(Buffer.byteLength(text))
/** A varint field (tag, value), or nothing for 0. */
const numberSize = (value: number) => (value === 0 ? 0 : 1 + varintSize(value))

type Limit = NonNullable<WireStatus['current_limit']>
type Duration = NonNullable<WireStatus['duration_until_reset']>

/** protobuf's int32/uint32 of a JavaScript number, as protobufjs takes one. */
const uint32 = (value: number) => value >>> 0
/** int64 of a non-negative whole number of seconds (negative never occurs: durations are clamped at 0). */
const int64 = (value: number) => Math.max(0, Math.trunc(value))

function limitSize(limit: Limit): number {
  return (
    numberSize(uint32(limit.requests_per_unit)) +
    numberSize(UNIT_NUMBERS[limit.unit] ?? 0) +
    (limit.name === '' ? 0 : stringSize(limit.name))
  )
}

function durationSize(duration: Duration): number {
  return numberSize(int64(duration.seconds)) + numberSize(uint32(duration.nanos))
}

function statusSize(status: WireStatus): number {
  let size = numberSize(CODE_NUMBERS[status.code] ?? 0) + numberSize(uint32(status.limit_remaining))
  if (status.current_limit !== undefined) size += delimitedSize(limitSize(status.current_limit))
  if (status.duration_until_reset !== undefined)
    size += delimitedSize(durationSize(status.duration_until_reset))
  return size
}

function headerSize(header: { key: string; value: string }): number {
  return (
    (header.key === '' ? 0 : stringSize(header.key)) + (header.value === '' ? 0 : stringSize(header.value))
  )
}

class Writer {
  at: number
  constructor(
    readonly out: Buffer,
    at: number,
  ) {
    this.at = at
  }

  varint(value: number): void {
    const { out } = this
    while (value >= 0x80) {
      out[this.at++] = (value % 128) | 0x80
      value = Math.floor(value / 128)
    }
    out[this.at++] = value
  }

  /** A varint field, left out when 0. */
  number(field: number, value: number): void {
    if (value === 0) return
    this.out[this.at++] = field << 3
    this.varint(value)
  }

  string(field: number, text: string): void {
    if (text === '') return
    this.out[this.at++] = (field << 3) | LENGTH_DELIMITED
    this.varint(Buffer.byteLength(text))
    this.at += this.out.write(text, this.at, 'utf8')
  }

  /** The tag and length of a nested message of `size` bytes, written next. */
  nested(field: number, size: number): void {
    this.out[this.at++] = (field << 3) | LENGTH_DELIMITED
    this.varint(size)
  }
}

function writeStatus(writer: Writer, status: WireStatus): void {
  writer.number(1, CODE_NUMBERS[status.code] ?? 0)
  const limit = status.current_limit
  if (limit !== undefined) {
    writer.nested(2, limitSize(limit))
    writer.number(1, uint32(limit.requests_per_unit))
    writer.number(2, UNIT_NUMBERS[limit.unit] ?? 0)
    writer.string(3, limit.name)
  }
  writer.number(3, uint32(status.limit_remaining))
  const duration = status.duration_until_reset
  if (duration !== undefined) {
    writer.nested(4, durationSize(duration))
    writer.number(1, int64(duration.seconds))
    writer.number(2, uint32(duration.nanos))
  }
}

/**
 * A RateLimitResponse as one gRPC message: the 5-byte prefix (not compressed, the length) and the
 * protobuf bytes, in one buffer.
 */
export function encodeRateLimitResponseFrame(response: WireResponse): Buffer {
  const overall = CODE_NUMBERS[response.overall_code] ?? 0
  let size = numberSize(overall)
  for (const status of response.statuses) size += delimitedSize(statusSize(status))
  for (const header of response.response_headers_to_add) size += delimitedSize(headerSize(header))
  const out = Buffer.allocUnsafe(5 + size)
  out[0] = 0
  out.writeUInt32BE(size, 1)
  const writer = new Writer(out, 5)
  writer.number(1, overall)
  for (const status of response.statuses) {
    writer.nested(2, statusSize(status))
    writeStatus(writer, status)
  }
  for (const header of response.response_headers_to_add) {
    writer.nested(3, headerSize(header))
    writer.string(1, header.key)
    writer.string(2, header.value)
  }
  return out
}
