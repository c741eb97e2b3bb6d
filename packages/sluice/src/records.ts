// Store-side records: small values the limiter keeps in the store (per-key overrides, run-time allow
// and deny lists) so that every instance sharing the store applies them. The types of the contract,
// the checks every store runs before it writes, and the in-process implementation the memory store uses.
import { randomUUID } from 'node:crypto'
import {
  InvalidDurationError,
  InvalidKeyError,
  InvalidOptionsError,
  TooManyRecordsError,
  UnsupportedError,
} from './errors.js'

/** What a record is for: a per-key override, an allow-list entry, a deny-list entry. */
export type RecordKind = 'override' | 'allow' | 'deny'

/** The record kinds, in a fixed order. */
export const RECORD_KINDS: readonly RecordKind[] = ['override', 'allow', 'deny']

/** One record as a store answers it. */
export interface StoreRecord {
  /** What the record is about: a caller's key, an IP range, ... */
  subject: string
  /** The record's content, opaque to the store (overrides keep JSON here). */
  value: string
  /** When the record stops applying, ms since the epoch on the store's clock; absent: never. */
  expiresAt?: number
}

/**
 * The records of a store, one set per (kind, policy id). A record past its `expiresAt` is never
 * answered by `get` or `list`, and does not count towards the bound.
 */
export interface StoreRecords {
  /**
   * Write (or replace) the record of `subject`; with `ttlMs` it expires by itself. Rejects with
   * `TooManyRecordsError` when (kind, policy id) already holds MAX_RECORDS_PER_POLICY live records
   * and `subject` is not one of them.
   */
  put(kind: RecordKind, policyId: string, subject: string, value: string, ttlMs?: number): Promise<void>
  /** Remove the record of `subject`; true when there was one. */
  delete(kind: RecordKind, policyId: string, subject: string): Promise<boolean>
  get(kind: RecordKind, policyId: string, subject: string): Promise<StoreRecord | undefined>
  /** Every live record of (kind, policy id), in no particular order. */
  list(kind: RecordKind, policyId: string): Promise<StoreRecord[]>
  /**
   * Changes whenever any record of the store changes (put, or a delete that removed one): what
   * instances poll. `''` only while no record was ever put: a poller then has nothing to read.
   */
  version(): Promise<string>
}

/** The most live records one (kind, policy id) may hold: every instance keeps them all in memory. */
export const MAX_RECORDS_PER_POLICY = 10_000
/** The longest record value, in UTF-16 code units. */
export const MAX_RECORD_VALUE_LENGTH = 4096
/** The longest record subject, in UTF-16 code units. */
export const MAX_RECORD_SUBJECT_LENGTH = 1024

const POLICY_ID = /^[A-Za-z0-9_.-]{1,64}$/
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/** Check a set of records (kind, policy id): bad input throws a typed error and touches nothing. */
export function checkRecordSet(operation: string, kind: unknown, policyId: unknown): void {
  if (!RECORD_KINDS.includes(kind as RecordKind))
    throw new InvalidOptionsError(
      `records.${operation}: kind must be one of ${RECORD_KINDS.map((k) => `'${k}'`).join(', ')}, got ${JSON.stringify(kind)}`,
    )
  if (typeof policyId !== 'string' || !POLICY_ID.test(policyId))
    throw new InvalidOptionsError(
      `records.${operation}: policy id must be 1-64 letters, digits, '_', '-' or '.', got ${JSON.stringify(policyId)}`,
    )
}

/**
 * Check the address of a record (kind, policy id, subject), as every store does before it reads or
 * writes: bad input throws a typed error and touches nothing.
 */
export function checkRecordAddress(
  operation: string,
  kind: unknown,
  policyId: unknown,
  subject: unknown,
): void {
  checkRecordSet(operation, kind, policyId)
  if (typeof subject !== 'string' || subject.length === 0 || subject.length > MAX_RECORD_SUBJECT_LENGTH)
    throw new InvalidKeyError(
      `records.${operation}: subject must be a non-empty string of at most ${MAX_RECORD_SUBJECT_LENGTH} characters`,
    )
  if (LONE_SURROGATE.test(subject))
    throw new InvalidKeyError(`records.${operation}: subject must be well-formed text (no lone surrogates)`)
}

/** Check a put's arguments: its address, its value and its ttl (a positive whole number of ms). */
export function checkRecordPut(
  kind: unknown,
  policyId: unknown,
  subject: unknown,
  value: unknown,
  ttlMs: unknown,
): void {
  checkRecordAddress('put', kind, policyId, subject)
  if (typeof value !== 'string' || value.length > MAX_RECORD_VALUE_LENGTH || LONE_SURROGATE.test(value))
    throw new InvalidOptionsError(
      `records.put: value must be well-formed text of at most ${MAX_RECORD_VALUE_LENGTH} characters`,
    )
  if (ttlMs !== undefined && (!Number.isSafeInteger(ttlMs) || (ttlMs as number) <= 0))
    throw new InvalidDurationError(
      `records.put: ttlMs must be a positive whole number of ms, got ${JSON.stringify(ttlMs)}`,
    )
}

/** The error for a put refused at the bound. */
export function tooManyRecords(kind: RecordKind, policyId: string): TooManyRecordsError {
  return new TooManyRecordsError(
    `records.put: ${kind} records of policy ${policyId} are at the limit of ${MAX_RECORDS_PER_POLICY}; delete some first`,
  )
}

/** A record as answered: `expiresAt` only when it has one (0 and absent both mean never). */
export function storeRecord(subject: string, value: string, expiresAt: number): StoreRecord {
  return expiresAt > 0 ? { subject, value, expiresAt } : { subject, value }
}

/**
 * Records for a store that cannot keep them: every method rejects with `UnsupportedError`
 * (`SLUICE_UNSUPPORTED`). For a custom store without records.
 * @example
 * const store: Store = { name: 'mine', ..., records: unsupportedRecords('mine') }
 */
export function unsupportedRecords(storeName: string): StoreRecords {
  const refuse = async (): Promise<never> => {
    throw new UnsupportedError(
      `${storeName} store: no records (per-key overrides, run-time allow and deny lists); use memory, Redis or PostgreSQL`,
    )
  }
  return { put: refuse, delete: refuse, get: refuse, list: refuse, version: refuse }
}

interface Held {
  value: string
  /** 0: never. */
  expiresAt: number
}

/** Records kept in this process, on the clock `now` (the memory store's). */
export function memoryRecords(now: () => number): StoreRecords & { clear(): void } {
  const sets = new Map<string, Map<string, Held>>()
  // A fresh prefix per instance: a version seen from another store never equals one of this one.
  const origin = randomUUID()
  let changes = 0
  const live = (held: Held, at: number): boolean => held.expiresAt === 0 || held.expiresAt > at
  const setOf = (kind: RecordKind, policyId: string) => sets.get(`${kind}\0${policyId}`)
  return {
    async put(kind, policyId, subject, value, ttlMs) {
      checkRecordPut(kind, policyId, subject, value, ttlMs)
      const at = now()
      const id = `${kind}\0${policyId}`
      let set = sets.get(id)
      if (set === undefined) {
        set = new Map()
        sets.set(id, set)
      }
      if (!set.has(subject) && set.size >= MAX_RECORDS_PER_POLICY) {
        for (const [s, held] of set) if (!live(held, at)) set.delete(s)
        if (set.size >= MAX_RECORDS_PER_POLICY) throw tooManyRecords(kind, policyId)
      }
      set.set(subject, { value, expiresAt: ttlMs === undefined ? 0 : at + ttlMs })
      changes++
    },
    async delete(kind, policyId, subject) {
      checkRecordAddress('delete', kind, policyId, subject)
      const removed = setOf(kind, policyId)?.delete(subject) ?? false
      if (removed) changes++
      return removed
    },
    async get(kind, policyId, subject) {
      checkRecordAddress('get', kind, policyId, subject)
      const held = setOf(kind, policyId)?.get(subject)
      return held !== undefined && live(held, now())
        ? storeRecord(subject, held.value, held.expiresAt)
        : undefined
    },
    async list(kind, policyId) {
      checkRecordSet('list', kind, policyId)
      const at = now()
      const out: StoreRecord[] = []
      for (const [subject, held] of setOf(kind, policyId) ?? [])
        if (live(held, at)) out.push(storeRecord(subject, held.value, held.expiresAt))
      return out
    },
    async version() {
      return `${origin}:${changes}`
    },
    clear() {
      if (sets.size > 0) changes++
      sets.clear()
    },
  }
}
