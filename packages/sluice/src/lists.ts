// Allow and deny lists of a policy or an HTTP rule: keys matched exactly (a Set) and addresses
// against addresses and CIDRs (the HTTP core's ipMatcher, one BlockList per list), checked and
// compiled once, so a decision asks at most one Set and one BlockList per list it has.
import { InvalidListError } from './errors.js'
import { ipMatcher } from './http/ip.js'
import { isOptionsObject, unknownOptionMessage } from './options.js'

/**
 * The entries of an allow or deny list: `keys` match a limiter key exactly; `ips` (addresses, CIDRs,
 * or the names loopback, private, linklocal; IPv4 and IPv6) match an address.
 */
export interface ListEntries {
  keys?: readonly string[]
  ips?: readonly string[]
}

/** Which list matched: a deny list (denied without a store call) or an allow list (not limited). */
export type ListName = 'allow' | 'deny'

/** The most entries one `keys` or `ips` list holds. */
export const MAX_LIST_ENTRIES = 10_000
/** The longest key entry, in characters. */
export const MAX_LIST_KEY_LENGTH = 1024

const ENTRY_KINDS = ['keys', 'ips'] as const

/** One list, compiled: undefined parts were not given. */
export interface CompiledList {
  readonly keys: ReadonlySet<string> | undefined
  readonly ip: ((address: string | undefined) => boolean) | undefined
}

/** The allow and deny lists of a policy or rule: as written (for listings) and compiled. */
export interface CompiledLists {
  /** The allow list as written (frozen copies), or undefined. */
  readonly allow: Readonly<ListEntries> | undefined
  /** The deny list as written (frozen copies), or undefined. */
  readonly deny: Readonly<ListEntries> | undefined
  /** The deny list compiled. */
  readonly denied: CompiledList | undefined
  /** The allow list compiled. */
  readonly allowed: CompiledList | undefined
}

const fail = (message: string) => new InvalidListError(message)

/**
 * Throw `InvalidListError` unless `entry` can be an entry of a `keys` (a non-empty string of at most
 * MAX_LIST_KEY_LENGTH characters) or an `ips` list (an address, a CIDR or a range name).
 */
export function checkListEntry(where: string, kind: 'keys' | 'ips', entry: unknown): void {
  if (typeof entry !== 'string' || entry.length === 0)
    throw fail(
      `${where}: an entry is a non-empty string, got ${entry === '' ? 'an empty string' : typeof entry}`,
    )
  if (kind === 'keys' && entry.length > MAX_LIST_KEY_LENGTH)
    throw fail(`${where}: a key entry is at most ${MAX_LIST_KEY_LENGTH} characters, got ${entry.length}`)
  if (kind === 'ips') ipMatcher([entry], where, fail)
}

/** One list (`allow` or `deny`), checked entry by entry and compiled. */
function compileList(where: string, value: unknown): { written: ListEntries; list: CompiledList } {
  if (!isOptionsObject(value))
    throw fail(
      `${where}: a list is { keys?: [...], ips?: [...] }, got ${value === null ? 'null' : typeof value}`,
    )
  for (const key of Object.keys(value))
    if (!(ENTRY_KINDS as readonly string[]).includes(key))
      throw fail(`${where}: ${unknownOptionMessage(key, ENTRY_KINDS)}`)
  const written: ListEntries = {}
  let keys: Set<string> | undefined
  let ip: CompiledList['ip']
  for (const kind of ENTRY_KINDS) {
    const entries = (value as Record<string, unknown>)[kind]
    if (entries === undefined) continue
    if (!Array.isArray(entries))
      throw fail(
        `${where}.${kind}: a list of strings, like ${kind === 'ips' ? "['10.0.0.0/8']" : "['user-42']"}`,
      )
    if (entries.length > MAX_LIST_ENTRIES)
      throw fail(`${where}.${kind}: at most ${MAX_LIST_ENTRIES} entries, got ${entries.length}`)
    for (let i = 0; i < entries.length; i++) checkListEntry(`${where}.${kind}[${i}]`, kind, entries[i])
    const copy = Object.freeze([...(entries as string[])])
    written[kind] = copy
    if (copy.length === 0) continue
    if (kind === 'keys') keys = new Set(copy)
    else ip = ipMatcher(copy, `${where}.ips`, fail)
  }
  return { written: Object.freeze(written), list: { keys, ip } }
}

/**
 * The lists of `allow` and `deny` as given to a policy or a rule at `where` (`policies.api`), or
 * undefined when neither is given. Throws `InvalidListError`.
 */
export function compileLists(where: string, allow: unknown, deny: unknown): CompiledLists | undefined {
  if (allow === undefined && deny === undefined) return undefined
  const a = allow === undefined ? undefined : compileList(`${where}.allow`, allow)
  const d = deny === undefined ? undefined : compileList(`${where}.deny`, deny)
  return Object.freeze({
    allow: a?.written,
    deny: d?.written,
    allowed: a?.list,
    denied: d?.list,
  })
}

/**
 * The address a limiter key names, for matching `ips`: the key itself, or what follows `ip:` (the
 * HTTP core's form); an IPv6 network key (`ip:2001:db8:1:2::/64`) by its first address. Not an
 * address: the matcher answers false.
 */
export function addressOfKey(key: string): string {
  const address = key.startsWith('ip:') ? key.slice(3) : key
  const slash = address.indexOf('/')
  return slash < 0 ? address : address.slice(0, slash)
}

function matches(list: CompiledList | undefined, key: string | undefined, address: string | undefined) {
  if (list === undefined) return false
  return (
    (key !== undefined && list.keys?.has(key) === true) ||
    (list.ip !== undefined && address !== undefined && list.ip(address))
  )
}

/**
 * Which list holds a request: `deny` when the deny list holds its key or its address (deny wins),
 * else `allow` when the allow list does, else undefined.
 */
export function listOf(
  lists: CompiledLists,
  key: string | undefined,
  address: string | undefined,
): ListName | undefined {
  if (matches(lists.denied, key, address)) return 'deny'
  if (matches(lists.allowed, key, address)) return 'allow'
  return undefined
}

/** `listOf` for a limiter key alone: its `ips` match the address the key names (addressOfKey). */
export function listOfKey(lists: CompiledLists, key: string): ListName | undefined {
  const address =
    lists.denied?.ip === undefined && lists.allowed?.ip === undefined ? undefined : addressOfKey(key)
  return listOf(lists, key, address)
}
