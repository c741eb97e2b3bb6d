// Allow and deny list entries added at run time (limiter.addListEntry, the service's /v1/lists):
// store records of kind `allow` and `deny` (src/records.ts), subject the entry, value the JSON
// `{ reason?, addedAt }`, so every instance sharing the store applies them. This is the local copy
// one limiter matches with: per policy id and list, a Set of keys and a BlockList of addresses,
// rebuilt when the records are read again and changed at once by this limiter's own writes.
import { InvalidListError, UnsupportedError } from './errors.js'
import { ipMatcher, parseIp } from './http/ip.js'
import { addressOfKey, type ListName, MAX_LIST_KEY_LENGTH } from './lists.js'
import type { StoreRecord, StoreRecords } from './records.js'

const LISTS: readonly ListName[] = ['allow', 'deny']

/** The longest `reason` of a run-time entry. */
export const MAX_LIST_REASON_LENGTH = 256

/** What an entry matches: a key exactly, or the address a key names. */
export type ListEntryKind = 'key' | 'ip'

/** One entry of an allow or deny list, as `limiter.getLists` answers it. */
export interface ListEntry {
  entry: string
  /** `ip` for an address or CIDR (matched against the address a key names), `key` otherwise. */
  kind: ListEntryKind
  /** `config`: the policy's options (or the service's YAML); `runtime`: added with addListEntry. */
  source: 'config' | 'runtime'
  reason?: string
  /** Run-time entries: when it was added, ms since the epoch on the store's clock. */
  addedAt?: number
  /** Run-time entries with a ttl: when it ends, ms since the epoch on the store's clock. */
  expiresAt?: number
}

/** The record value of a run-time entry. */
interface StoredEntry {
  reason?: string
  addedAt: number
}

// Made of the characters of an address (hex digits, '.', ':', brackets), with '.' or ':' in it: an
// entry written like that is meant as an address or CIDR, and one that does not parse is a mistake
// to report rather than a key to list.
const ADDRESS_LIKE = /^\[?[0-9A-Fa-f.:]*[.:][0-9A-Fa-f.:]*\]?(\/.*)?$/

/**
 * What `entry` is as a run-time entry: `ip` (an address or CIDR) or `key`. Throws
 * `InvalidListError` for an empty or over-long entry and for one written as an address that does
 * not parse (`10.0.0.256`, `10.0.0.0/33`).
 */
export function runtimeEntryKind(entry: unknown, where: string): ListEntryKind {
  if (typeof entry !== 'string' || entry.length === 0)
    throw new InvalidListError(
      `${where}: an entry is a non-empty string, got ${entry === '' ? 'an empty string' : typeof entry}`,
    )
  if (entry.length > MAX_LIST_KEY_LENGTH)
    throw new InvalidListError(
      `${where}: an entry is at most ${MAX_LIST_KEY_LENGTH} characters, got ${entry.length}`,
    )
  if (!ADDRESS_LIKE.test(entry)) return 'key'
  ipMatcher([entry], where, (message) => new InvalidListError(message))
  return 'ip'
}

/** The record value for an entry added now. */
export function storedEntry(addedAt: number, reason: string | undefined): string {
  const stored: StoredEntry = reason === undefined ? { addedAt } : { reason, addedAt }
  return JSON.stringify(stored)
}

/** A record as a ListEntry; undefined for a record this version cannot read. */
export function listEntryOf(record: StoreRecord): ListEntry | undefined {
  let stored: unknown
  try {
    stored = JSON.parse(record.value)
  } catch {
    return undefined
  }
  if (stored === null || typeof stored !== 'object') return undefined
  const { reason, addedAt } = stored as Partial<StoredEntry>
  let kind: ListEntryKind
  try {
    kind = runtimeEntryKind(record.subject, 'record')
  } catch {
    return undefined
  }
  const out: ListEntry = { entry: record.subject, kind, source: 'runtime' }
  if (typeof reason === 'string') out.reason = reason
  if (typeof addedAt === 'number') out.addedAt = addedAt
  if (record.expiresAt !== undefined) out.expiresAt = record.expiresAt
  return out
}

/** One run-time list of one policy, compiled. */
interface RuntimeList {
  /** Key entries and when they end (0: never). */
  readonly keys: Map<string, number>
  /** Address entries and when they end (0: never). */
  readonly ips: Map<string, number>
  /** The address entries compiled; undefined when there are none. */
  ipMatch: ((address: string | undefined) => boolean) | undefined
}

/** Does any address entry end by itself? (Then a match is checked entry by entry for expiry.) */
const ipsExpire = (ips: Map<string, number>): boolean => {
  for (const ends of ips.values()) if (ends !== 0) return true
  return false
}

function compiledIps(ips: Map<string, number>): RuntimeList['ipMatch'] {
  return ips.size === 0 ? undefined : ipMatcher([...ips.keys()], 'records')
}

/**
 * The run-time entries this limiter knows, per policy id and list. `size` is 0 while there are
 * none, so a decision asks one comparison then. An expired entry stops matching at its
 * `expiresAt` on `now` (the store's clock), before the next read drops it.
 */
export class RuntimeLists {
  size = 0
  /** Reads of the store that failed (the copy kept is the last one read), and the last error. */
  failures = 0
  lastError: unknown
  private readonly lists = new Map<string, RuntimeList>()
  /** Moves with every change made here: a read that started before one does not overwrite it. */
  private generation = 0

  constructor(private readonly now: () => number) {}

  /**
   * Read every run-time entry of `policyIds` from `records` and take them as the copy (`nothing`:
   * the store never held a record, so there is nothing to read). Never rejects: a store without
   * records has none, a failing read keeps the copy as it is.
   */
  async read(records: StoreRecords, policyIds: readonly string[], nothing = false): Promise<void> {
    const generation = this.generation
    try {
      const read = await Promise.all(
        policyIds.flatMap((id) =>
          LISTS.map(async (list) => ({ id, list, records: nothing ? [] : await records.list(list, id) })),
        ),
      )
      if (generation !== this.generation) return
      for (const r of read) this.replace(r.id, r.list, r.records)
    } catch (error) {
      if (error instanceof UnsupportedError) return
      this.failures++
      this.lastError = error
    }
  }

  /** Replace every entry of (policy id, list) with `records` (a fresh read of the store). */
  replace(policyId: string, list: ListName, records: readonly StoreRecord[]): void {
    const keys = new Map<string, number>()
    const ips = new Map<string, number>()
    for (const record of records) {
      const entry = listEntryOf(record)
      if (entry === undefined) continue
      ;(entry.kind === 'ip' ? ips : keys).set(entry.entry, entry.expiresAt ?? 0)
    }
    this.set(`${list}\0${policyId}`, { keys, ips, ipMatch: compiledIps(ips) })
  }

  /** An entry added (or replaced) through this limiter: in force here at once. */
  add(policyId: string, list: ListName, entry: string, kind: ListEntryKind, expiresAt: number): void {
    const id = `${list}\0${policyId}`
    const current = this.lists.get(id)
    const next: RuntimeList = {
      keys: new Map(current?.keys),
      ips: new Map(current?.ips),
      ipMatch: undefined,
    }
    ;(kind === 'ip' ? next.ips : next.keys).set(entry, expiresAt)
    this.generation++
    next.ipMatch = kind === 'ip' ? compiledIps(next.ips) : current?.ipMatch
    this.set(id, next)
  }

  /** An entry removed through this limiter: out of force here at once. */
  remove(policyId: string, list: ListName, entry: string): void {
    const id = `${list}\0${policyId}`
    const current = this.lists.get(id)
    this.generation++
    if (current === undefined) return
    const next: RuntimeList = {
      keys: new Map(current.keys),
      ips: new Map(current.ips),
      ipMatch: current.ipMatch,
    }
    next.keys.delete(entry)
    if (next.ips.delete(entry)) next.ipMatch = compiledIps(next.ips)
    this.set(id, next)
  }

  private set(id: string, list: RuntimeList): void {
    const before = this.lists.get(id)
    if (before !== undefined) this.size -= before.keys.size + before.ips.size
    if (list.keys.size + list.ips.size === 0) this.lists.delete(id)
    else {
      this.lists.set(id, list)
      this.size += list.keys.size + list.ips.size
    }
  }

  /** Which run-time list of policy `policyId` holds `key` (deny wins), or undefined. */
  listOfKey(policyId: string, key: string): ListName | undefined {
    if (this.size === 0) return undefined
    if (this.holds(this.lists.get(`deny\0${policyId}`), key)) return 'deny'
    if (this.holds(this.lists.get(`allow\0${policyId}`), key)) return 'allow'
    return undefined
  }

  private holds(list: RuntimeList | undefined, key: string): boolean {
    if (list === undefined) return false
    const until = list.keys.get(key)
    if (until !== undefined && (until === 0 || until > this.now())) return true
    if (list.ipMatch === undefined) return false
    const address = addressOfKey(key)
    if (parseIp(address) === undefined || !list.ipMatch(address)) return false
    if (!ipsExpire(list.ips)) return true
    // A match, unless every address entry that holds the address has expired.
    const now = this.now()
    for (const [range, ends] of list.ips)
      if ((ends === 0 || ends > now) && ipMatcher([range], 'records')(address)) return true
    return false
  }
}
