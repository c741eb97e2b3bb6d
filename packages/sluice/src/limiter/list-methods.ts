// limiter.addListEntry, removeListEntry and getLists: run-time allow and deny entries written as
// store records (src/runtime-lists.ts), in force in this limiter at once and in every limiter
// sharing the store once it reads the records again; getLists answers the policy's configured
// entries and the store's run-time ones, each marked with its source.
import { type Duration, parseDuration } from '../duration.js'
import { InvalidListError, InvalidOptionsError } from '../errors.js'
import type { ListName } from '../lists.js'
import { checkKnownKeys, isOptionsObject, keysOf } from '../options.js'
import type { ResolvedPolicy } from '../policy.js'
import type { StoreRecord } from '../records.js'
import {
  type ListEntry,
  listEntryOf,
  MAX_LIST_REASON_LENGTH,
  type RuntimeLists,
  runtimeEntryKind,
  storedEntry,
} from '../runtime-lists.js'
import type { Store } from '../store.js'
import type { Validator } from './validate.js'

/** What `addListEntry` takes besides the entry. */
export interface ListEntryOptions {
  /** The entry removes itself after this long. Default: never. */
  ttl?: Duration
  /** Why, for people: kept, listed and logged (at most 256 characters). */
  reason?: string
}

/** The lists of one policy as `getLists` answers them. */
export interface PolicyLists {
  policy: string
  allow: ListEntry[]
  deny: ListEntry[]
}

const OPTION_KEYS = keysOf<ListEntryOptions>({ ttl: true, reason: true })
const LISTS: readonly ListName[] = ['allow', 'deny']

function checkList(list: unknown, where: string): ListName {
  if (!LISTS.includes(list as ListName))
    throw new InvalidListError(`${where}: the list is 'allow' or 'deny', got ${JSON.stringify(list)}`)
  return list as ListName
}

/** The configured entries of one list, marked. */
function configured(policy: ResolvedPolicy, list: ListName): ListEntry[] {
  const written = policy.lists?.[list]
  if (written === undefined) return []
  return [
    ...(written.keys ?? []).map((entry): ListEntry => ({ entry, kind: 'key', source: 'config' })),
    ...(written.ips ?? []).map((entry): ListEntry => ({ entry, kind: 'ip', source: 'config' })),
  ]
}

/** The limiter's methods made here. */
export type ListMethod = 'addListEntry' | 'removeListEntry' | 'getLists'

export interface ListMethods<Name extends string> {
  addListEntry(policy: Name, list: ListName, entry: string, options?: ListEntryOptions): Promise<ListEntry>
  removeListEntry(policy: Name, list: ListName, entry: string): Promise<boolean>
  getLists(policy: Name): Promise<PolicyLists>
}

/** The list methods of one limiter, over its store's records and its local copy of them. */
export function listMethods<Name extends string>(
  store: Store,
  validate: Validator,
  runtime: RuntimeLists,
): ListMethods<Name> {
  return {
    async addListEntry(name, list, entry, options = {}) {
      const where = `addListEntry(${JSON.stringify(name)})`
      const policy = validate.single(name, 'list', 1)
      checkList(list, where)
      const kind = runtimeEntryKind(entry, `${where} entry`)
      if (!isOptionsObject(options)) throw new InvalidOptionsError(`${where}: options are { ttl?, reason? }`)
      checkKnownKeys(where, options, OPTION_KEYS)
      const ttlMs = options.ttl === undefined ? undefined : parseDuration(options.ttl, `${where}.ttl`)
      const { reason } = options
      if (reason !== undefined && (typeof reason !== 'string' || reason.length > MAX_LIST_REASON_LENGTH))
        throw new InvalidListError(`${where}.reason: text of at most ${MAX_LIST_REASON_LENGTH} characters`)
      const addedAt = store.now()
      await store.records.put(list, policy.id, entry, storedEntry(addedAt, reason), ttlMs)
      const expiresAt = ttlMs === undefined ? 0 : addedAt + ttlMs
      runtime.add(policy.id, list, entry, kind, expiresAt)
      const out: ListEntry = { entry, kind, source: 'runtime', addedAt }
      if (reason !== undefined) out.reason = reason
      if (expiresAt !== 0) out.expiresAt = expiresAt
      return out
    },
    async removeListEntry(name, list, entry) {
      const where = `removeListEntry(${JSON.stringify(name)})`
      const policy = validate.single(name, 'list', 1)
      checkList(list, where)
      runtimeEntryKind(entry, `${where} entry`)
      const removed = await store.records.delete(list, policy.id, entry)
      runtime.remove(policy.id, list, entry)
      return removed
    },
    async getLists(name) {
      const policy = validate.single(name, 'list', 1)
      const [allow, deny] = await Promise.all([
        store.records.list('allow', policy.id),
        store.records.list('deny', policy.id),
      ])
      const runtimeOf = (records: readonly StoreRecord[]) =>
        records
          .map(listEntryOf)
          .filter((e): e is ListEntry => e !== undefined)
          .sort((a, b) => (a.entry < b.entry ? -1 : a.entry > b.entry ? 1 : 0))
      return {
        policy: policy.name,
        allow: [...configured(policy, 'allow'), ...runtimeOf(allow)],
        deny: [...configured(policy, 'deny'), ...runtimeOf(deny)],
      }
    },
  }
}
