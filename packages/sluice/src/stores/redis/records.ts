// The Redis store's records (src/records.ts): one hash per (kind, policy id) and one version key, all
// under the hash tag `{#records}` so a write and its version change are one atomic script in Cluster
// too (no subject tag can be `#records`: subjectTag marks hashed subjects with `#` and 27 more
// characters). A record's expiry is kept in its value (`expiresAt:value`) and filtered on read; puts
// at the bound drop the expired ones first.
import { randomUUID } from 'node:crypto'
import {
  checkRecordAddress,
  checkRecordPut,
  checkRecordSet,
  MAX_RECORDS_PER_POLICY,
  type RecordKind,
  type StoreRecord,
  type StoreRecords,
  storeRecord,
  tooManyRecords,
} from '../../records.js'
import type { ClientAdapter } from './client.js'
import { type Script, type ScriptRunner, script } from './script.js'

const PUT = script('records/put')
const DELETE = script('records/delete')
const READ = script('records/read')

/** Every records script: what `ready()` loads with the store's own. */
export const RECORD_SCRIPTS: readonly Script[] = [PUT, DELETE, READ]

/** A stored value `expiresAt:value` as its two parts; undefined for anything else. */
function unpack(stored: unknown): { expiresAt: number; value: string } | undefined {
  if (stored === null || stored === undefined) return undefined
  const text = String(stored)
  const colon = text.indexOf(':')
  const expiresAt = Number(text.slice(0, colon))
  if (colon < 1 || !Number.isSafeInteger(expiresAt)) return undefined
  return { expiresAt, value: text.slice(colon + 1) }
}

const number = (reply: unknown): number => Number(reply)
const same = (reply: unknown): unknown => reply

export interface RedisRecordsContext {
  readonly adapter: ClientAdapter
  readonly runner: ScriptRunner
  readonly prefix: string
  /** The store's clock (ms): expiry is set and checked on it. */
  now(): number
  assertOpen(): void
  wrap(error: unknown): Error
}

export function redisRecords(context: RedisRecordsContext): StoreRecords {
  const { adapter, runner, prefix, now, assertOpen, wrap } = context
  const versionKey = `${prefix}:{#records}:version`
  const setKey = (kind: RecordKind, policyId: string): string => `${prefix}:{#records}:${kind}:${policyId}`
  const live = (expiresAt: number, at: number): boolean => expiresAt === 0 || expiresAt > at
  return {
    async put(kind, policyId, subject, value, ttlMs) {
      checkRecordPut(kind, policyId, subject, value, ttlMs)
      assertOpen()
      const at = Math.floor(now())
      const expiresAt = ttlMs === undefined ? 0 : at + ttlMs
      const args = [
        subject,
        `${expiresAt}:${value}`,
        String(at),
        String(MAX_RECORDS_PER_POLICY),
        randomUUID(),
      ]
      const written = await runner.run(PUT, [setKey(kind, policyId), versionKey], args, false, number)
      if (written !== 1) throw tooManyRecords(kind, policyId)
    },
    async delete(kind, policyId, subject) {
      checkRecordAddress('delete', kind, policyId, subject)
      assertOpen()
      const keys = [setKey(kind, policyId), versionKey]
      return (await runner.run(DELETE, keys, [subject, randomUUID()], false, number)) === 1
    },
    async get(kind, policyId, subject) {
      checkRecordAddress('get', kind, policyId, subject)
      assertOpen()
      const held = unpack(await runner.run(READ, [setKey(kind, policyId)], [subject], false, same))
      if (held === undefined || !live(held.expiresAt, Math.floor(now()))) return undefined
      return storeRecord(subject, held.value, held.expiresAt)
    },
    async list(kind, policyId) {
      checkRecordSet('list', kind, policyId)
      assertOpen()
      const reply = await runner.run(READ, [setKey(kind, policyId)], [], false, same)
      const flat = Array.isArray(reply) ? reply : []
      const at = Math.floor(now())
      const out: StoreRecord[] = []
      for (let i = 0; i + 1 < flat.length; i += 2) {
        const held = unpack(flat[i + 1])
        if (held !== undefined && live(held.expiresAt, at))
          out.push(storeRecord(String(flat[i]), held.value, held.expiresAt))
      }
      return out
    },
    async version() {
      assertOpen()
      try {
        return (await adapter.get(versionKey)) ?? ''
      } catch (error) {
        throw wrap(error)
      }
    },
  }
}
