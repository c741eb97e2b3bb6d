// The framing ceiling of the envoy bench case: HTTP/2 (cleartext, prior knowledge) spoken over a
// node:net socket by this file alone, answering every request stream with one fixed gRPC frame and
// OK trailers. It measures what the protocol's own work costs in JavaScript (frames, HPACK, windows)
// without node:http2's objects per stream. Not a server to run: no bounds, no CONTINUATION, no
// priorities, no window per stream (every client measured opens each stream with 65,535 bytes, far
// more than one answer), and Huffman-coded strings stay undecoded (h2load repeats its headers, so
// from a connection's second request on they all come from the HPACK dynamic table).
import { createServer } from 'node:net'

const PREFACE_BYTES = 24
const FRAME_HEADER_BYTES = 9
const TYPE = { DATA: 0, HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8 }
const FLAG = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4, PADDED: 0x8, PRIORITY: 0x20 }
/** RFC 7541: a dynamic table entry's size is its name's and value's lengths plus 32. */
const ENTRY_OVERHEAD = 32
/** The static table has 61 entries; a header of the dynamic table is indexed from 62. */
const STATIC_ENTRIES = 61

function frameHeader(length, type, flags, stream) {
  const b = Buffer.allocUnsafe(FRAME_HEADER_BYTES)
  b.writeUIntBE(length, 0, 3)
  b[3] = type
  b[4] = flags
  b.writeUInt32BE(stream, 5)
  return b
}

/** A string literal, not Huffman-coded, with a 7-bit length (every string here is shorter than 127). */
const literal = (text) => Buffer.concat([Buffer.from([text.length]), Buffer.from(text, 'latin1')])

// The answer's header blocks, encoded once: `:status: 200` indexed (static entry 8); `content-type`
// by its static name (entry 31, as a 4-bit prefixed integer: 15, then 16); the rest as literals
// without indexing, so no dynamic table of the client's changes.
const ANSWER_BLOCK = Buffer.concat([
  Buffer.from([0x88, 0x0f, 0x10]),
  literal('application/grpc+proto'),
  Buffer.from([0x00]),
  literal('grpc-accept-encoding'),
  literal('identity'),
])
const TRAILER_BLOCK = Buffer.concat([
  Buffer.from([0x00]),
  literal('grpc-status'),
  literal('0'),
  Buffer.from([0x00]),
  literal('grpc-message'),
  literal('OK'),
])

/** A prefixed HPACK integer at `at` with `bits` bits in its first byte: [value, where it ends]. */
function integer(buf, at, bits) {
  const max = (1 << bits) - 1
  let value = buf[at] & max
  let pos = at + 1
  if (value < max) return [value, pos]
  for (let shift = 0; ; shift += 7) {
    const b = buf[pos++]
    value += (b & 0x7f) * 2 ** shift
    if ((b & 0x80) === 0) return [value, pos]
  }
}

class Connection {
  constructor(socket, frame) {
    this.socket = socket
    this.frame = frame
    this.pending = undefined
    this.prefaced = false
    /** The HPACK dynamic table, newest first: [name, value] pairs. */
    this.table = []
    this.tableBytes = 0
    this.tableLimit = 4096
    /** Open request streams: id -> their headers. */
    this.streams = new Map()
    /** What the client lets this side send on the connection. */
    this.sendWindow = 65_535
    /** Answers waiting for the connection's window. */
    this.waiting = []
    this.out = []
  }

  string(buf, at) {
    const huffman = (buf[at] & 0x80) !== 0
    const [length, start] = integer(buf, at, 7)
    const end = start + length
    return [huffman ? `huffman:${buf.toString('hex', start, end)}` : buf.latin1Slice(start, end), end]
  }

  nameOf(index) {
    return index <= STATIC_ENTRIES ? `static:${index}` : this.table[index - STATIC_ENTRIES - 1][0]
  }

  remember(name, value) {
    this.table.unshift([name, value])
    this.tableBytes += name.length + value.length + ENTRY_OVERHEAD
    this.fit()
  }

  /** Evict the oldest entries until the table is within its limit. */
  fit() {
    while (this.tableBytes > this.tableLimit) {
      const [n, v] = this.table.pop()
      this.tableBytes -= n.length + v.length + ENTRY_OVERHEAD
    }
  }

  /** An HPACK header block into name -> value (static entries by their index, for this bench). */
  headers(buf, at, end) {
    const headers = new Map()
    let pos = at
    while (pos < end) {
      const b = buf[pos]
      let name
      let value
      if ((b & 0x80) !== 0) {
        let index
        ;[index, pos] = integer(buf, pos, 7)
        if (index <= STATIC_ENTRIES) [name, value] = [`static:${index}`, '']
        else [name, value] = this.table[index - STATIC_ENTRIES - 1]
      } else if ((b & 0xe0) === 0x20) {
        ;[this.tableLimit, pos] = integer(buf, pos, 5)
        this.fit()
        continue
      } else {
        const indexing = (b & 0xc0) === 0x40
        let index
        ;[index, pos] = integer(buf, pos, indexing ? 6 : 4)
        if (index === 0) [name, pos] = this.string(buf, pos)
        else name = this.nameOf(index)
        ;[value, pos] = this.string(buf, pos)
        if (indexing) this.remember(name, value)
      }
      headers.set(name, value)
    }
    return headers
  }

  read(chunk) {
    const buf = this.pending === undefined ? chunk : Buffer.concat([this.pending, chunk])
    let pos = 0
    if (!this.prefaced) {
      if (buf.length < PREFACE_BYTES) {
        this.pending = buf
        return
      }
      pos = PREFACE_BYTES
      this.prefaced = true
      this.out.push(frameHeader(0, TYPE.SETTINGS, 0, 0))
    }
    while (buf.length - pos >= FRAME_HEADER_BYTES) {
      const length = buf.readUIntBE(pos, 3)
      if (buf.length - pos < FRAME_HEADER_BYTES + length) break
      const start = pos + FRAME_HEADER_BYTES
      pos = start + length
      this.onFrame(buf, buf[start - 6], buf[start - 5], buf.readUInt32BE(start - 4) & 0x7fffffff, start, pos)
    }
    this.pending = pos === buf.length ? undefined : buf.subarray(pos)
    this.flush()
  }

  onFrame(buf, type, flags, stream, start, end) {
    if (type === TYPE.DATA) {
      // The request's bytes are read and dropped; the connection's window is given back at once.
      if (end > start) {
        const grant = Buffer.allocUnsafe(4)
        grant.writeUInt32BE(end - start, 0)
        this.out.push(frameHeader(4, TYPE.WINDOW_UPDATE, 0, 0), grant)
      }
      if ((flags & FLAG.END_STREAM) !== 0) this.answer(stream)
    } else if (type === TYPE.HEADERS) {
      let at = start
      let until = end
      if ((flags & FLAG.PADDED) !== 0) until -= buf[at++]
      if ((flags & FLAG.PRIORITY) !== 0) at += 5
      this.streams.set(stream, this.headers(buf, at, until))
      if ((flags & FLAG.END_STREAM) !== 0) this.answer(stream)
    } else if (type === TYPE.SETTINGS) {
      // Nothing the client sets changes this side: its table size bounds an encoder's dynamic
      // table, which the answers do not use, and its window per stream is taken as large enough.
      if ((flags & FLAG.ACK) === 0) this.out.push(frameHeader(0, TYPE.SETTINGS, FLAG.ACK, 0))
    } else if (type === TYPE.WINDOW_UPDATE) {
      if (stream === 0) {
        this.sendWindow += buf.readUInt32BE(start) & 0x7fffffff
        while (this.waiting.length > 0 && this.sendWindow >= this.frame.length)
          this.send(this.waiting.shift())
      }
    } else if (type === TYPE.PING) {
      if ((flags & FLAG.ACK) === 0)
        this.out.push(frameHeader(8, TYPE.PING, FLAG.ACK, 0), buf.subarray(start, end))
    } else if (type === TYPE.RST_STREAM) {
      this.streams.delete(stream)
    } else if (type === TYPE.GOAWAY) {
      this.socket.end()
    }
  }

  answer(stream) {
    if (!this.streams.delete(stream)) return
    if (this.sendWindow >= this.frame.length) this.send(stream)
    else this.waiting.push(stream)
  }

  send(stream) {
    this.sendWindow -= this.frame.length
    this.out.push(
      frameHeader(ANSWER_BLOCK.length, TYPE.HEADERS, FLAG.END_HEADERS, stream),
      ANSWER_BLOCK,
      frameHeader(this.frame.length, TYPE.DATA, 0, stream),
      this.frame,
      frameHeader(TRAILER_BLOCK.length, TYPE.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, stream),
      TRAILER_BLOCK,
    )
  }

  /** Everything one read produced, in one write. */
  flush() {
    if (this.out.length === 0) return
    this.socket.write(this.out.length === 1 ? this.out[0] : Buffer.concat(this.out))
    this.out = []
  }
}

/** The framing ceiling (not listening yet): every request stream answered with `frame` and OK trailers. */
export function framingServer(frame) {
  return createServer((socket) => {
    socket.setNoDelay(true)
    socket.on('error', () => {})
    const connection = new Connection(socket, frame)
    socket.on('data', (chunk) => connection.read(chunk))
  })
}
