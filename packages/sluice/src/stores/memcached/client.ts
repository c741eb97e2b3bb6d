// The four memcached commands the store needs, as raw binary-protocol requests sent through a memjs
// client. memjs (1.3.x) has no gets/cas of its own, but its `perform` sends any request and hands
// back the reply header, which in the binary protocol always carries the item's CAS value.
// The client type is structural, so the declarations compile in a project without memjs.

/** The subset of a memjs `Client` (`memjs.Client.create('host:port')`) that Sluice uses. */
export interface MemjsClientLike {
  /** Sends one request to the server that owns `key`; the reply (or an error) comes to `callback`. */
  perform(
    key: string,
    request: Buffer,
    seq: number,
    // biome-ignore lint/suspicious/noExplicitAny: memjs's own declaration of the callback
    callback?: (error: Error | null, ...reply: any[]) => void,
  ): void
  incrSeq(): void
  readonly seq: number
}

/** A reply as memjs parses it. */
interface Reply {
  header: { status: number; cas?: Buffer }
  val: Buffer
}

const OPCODE = { get: 0x00, set: 0x01, add: 0x02, delete: 0x04, version: 0x0b } as const
const STATUS = { ok: 0, notFound: 1, exists: 2, notStored: 5 } as const
const NAMES: Record<number, string> = {
  3: 'value too large',
  4: 'invalid arguments',
  5: 'item not stored',
  129: 'unknown command',
  130: 'out of memory',
}

/** An item read with its CAS value (8 opaque bytes). */
export interface CasItem {
  value: Buffer
  cas: Buffer
}

/** Outcome of a conditional write: stored, or lost to another writer (the caller re-reads). */
export type WriteOutcome = { stored: true; cas: Buffer } | { stored: false }

/** A reply status memcached should not give to these commands: a typed failure upstream. */
class MemcachedReplyError extends Error {
  readonly status: number
  constructor(command: string, status: number) {
    super(`memcached ${command}: ${NAMES[status] ?? `status ${status}`}`)
    this.status = status
  }
}

const EMPTY = Buffer.alloc(0)
const NO_CAS = Buffer.alloc(8)

/**
 * One binary-protocol request: the 24-byte header, extras, key, value. `cas` (8 bytes) makes a
 * set or delete conditional on the item being unchanged since it was read.
 */
function request(
  opcode: number,
  key: Buffer,
  extras: Buffer,
  value: Buffer,
  seq: number,
  cas: Buffer,
): Buffer {
  const body = extras.length + key.length + value.length
  const buf = Buffer.allocUnsafe(24 + body)
  buf.writeUInt8(0x80, 0) // request magic
  buf.writeUInt8(opcode, 1)
  buf.writeUInt16BE(key.length, 2)
  buf.writeUInt8(extras.length, 4)
  buf.writeUInt8(0, 5) // data type
  buf.writeUInt16BE(0, 6) // vbucket
  buf.writeUInt32BE(body, 8)
  buf.writeUInt32BE(seq >>> 0, 12) // opaque: memjs matches the reply to the request by it
  cas.copy(buf, 16)
  extras.copy(buf, 24)
  key.copy(buf, 24 + extras.length)
  value.copy(buf, 24 + extras.length + key.length)
  return buf
}

/** Flags (0) and expiry (seconds) of a set or add. */
function storageExtras(ttlSeconds: number): Buffer {
  const extras = Buffer.alloc(8)
  extras.writeUInt32BE(ttlSeconds >>> 0, 4)
  return extras
}

/** memcached's commands over a memjs client, as promises. */
export class MemcachedCommands {
  constructor(private readonly client: MemjsClientLike) {}

  private send(key: string, opcode: number, extras: Buffer, value: Buffer, cas: Buffer): Promise<Reply> {
    this.client.incrSeq()
    const seq = this.client.seq
    const buf = request(opcode, Buffer.from(key, 'latin1'), extras, value, seq, cas)
    return new Promise<Reply>((resolve, reject) => {
      this.client.perform(key, buf, seq, (error: Error | null, reply: Reply | null) => {
        if (error !== null && error !== undefined)
          reject(error instanceof Error ? error : new Error(String(error)))
        else if (reply === null || reply === undefined) reject(new Error('memcached: no reply'))
        else resolve(reply)
      })
    })
  }

  /** The item and its CAS value, or undefined when there is none. */
  async gets(key: string): Promise<CasItem | undefined> {
    const reply = await this.send(key, OPCODE.get, EMPTY, EMPTY, NO_CAS)
    const status = reply.header.status
    if (status === STATUS.notFound) return undefined
    if (status !== STATUS.ok) throw new MemcachedReplyError('get', status)
    return { value: reply.val, cas: reply.header.cas ?? NO_CAS }
  }

  /** Store only if no item exists. */
  async add(key: string, value: Buffer, ttlSeconds: number): Promise<WriteOutcome> {
    const reply = await this.send(key, OPCODE.add, storageExtras(ttlSeconds), value, NO_CAS)
    return this.outcome('add', reply)
  }

  /** Store only if the item is unchanged since it was read with `cas`. */
  async cas(key: string, value: Buffer, ttlSeconds: number, cas: Buffer): Promise<WriteOutcome> {
    const reply = await this.send(key, OPCODE.set, storageExtras(ttlSeconds), value, cas)
    return this.outcome('cas', reply)
  }

  /** Delete; with `cas`, only if the item is unchanged since it was read. True when deleted. */
  async delete(key: string, cas: Buffer = NO_CAS): Promise<boolean> {
    const reply = await this.send(key, OPCODE.delete, EMPTY, EMPTY, cas)
    const status = reply.header.status
    if (status === STATUS.ok) return true
    if (status === STATUS.notFound || status === STATUS.exists) return false
    throw new MemcachedReplyError('delete', status)
  }

  /** The server's version string: a round trip that touches no item (readiness checks). */
  async version(): Promise<string> {
    const reply = await this.send('', OPCODE.version, EMPTY, EMPTY, NO_CAS)
    if (reply.header.status !== STATUS.ok) throw new MemcachedReplyError('version', reply.header.status)
    return reply.val.toString('latin1')
  }

  private outcome(command: string, reply: Reply): WriteOutcome {
    const status = reply.header.status
    if (status === STATUS.ok) return { stored: true, cas: reply.header.cas ?? NO_CAS }
    // add: the key exists; cas: changed (exists) or gone (not found) since it was read.
    if (status === STATUS.exists || status === STATUS.notFound || status === STATUS.notStored)
      return { stored: false }
    throw new MemcachedReplyError(command, status)
  }
}

/** True for an object that has what `memcachedStore` calls on a memjs client. */
export function isMemjsClient(client: unknown): client is MemjsClientLike {
  const c = client as Partial<MemjsClientLike> | null
  return (
    typeof c === 'object' &&
    c !== null &&
    typeof c.perform === 'function' &&
    typeof c.incrSeq === 'function' &&
    typeof c.seq === 'number'
  )
}
