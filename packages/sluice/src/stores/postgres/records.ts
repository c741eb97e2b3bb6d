// The PostgreSQL store's records (src/records.ts): one row per (kind, policy, subject) in the table
// `<table>_records` and a version row in `<table>_records_version` (schema.ts). Subjects and values
// are bytea (any text, NUL included); expiry is checked on the store's clock as rows are read, and
// expired rows of a set are deleted by the next put that finds the set at its bound.
import {
  checkRecordAddress,
  checkRecordPut,
  checkRecordSet,
  MAX_RECORDS_PER_POLICY,
  type StoreRecord,
  type StoreRecords,
  storeRecord,
  tooManyRecords,
} from '../../records.js'
import type { schemaNames } from './schema.js'

/** The statements of the records, for the store's prepared-statement table. */
export function recordStatements(names: ReturnType<typeof schemaNames>) {
  const live = `(expires_at = 0 OR expires_at > ${names.fn('now')}`
  return {
    recordPut: `SELECT ${names.fn('record_put')}($1, $2, $3, $4, $5, $6, $7) AS r`,
    recordDelete: `SELECT ${names.fn('record_delete')}($1, $2, $3) AS r`,
    recordGet: `SELECT json_build_array(encode(value, 'hex'), expires_at) AS r FROM ${names.records}
      WHERE kind = $1 AND policy = $2 AND subject = $3 AND ${live}($4))`,
    recordList: `SELECT coalesce(json_agg(json_build_array(encode(subject, 'hex'), encode(value, 'hex'), expires_at)), '[]'::json) AS r
      FROM ${names.records} WHERE kind = $1 AND policy = $2 AND ${live}($3))`,
    recordVersion: `SELECT v::text AS r FROM ${names.recordsVersion} WHERE id = 1`,
  }
}

const bytes = (text: string): Buffer => Buffer.from(text, 'utf8')
const text = (hex: unknown): string => Buffer.from(String(hex), 'hex').toString('utf8')

export function postgresRecords(
  query: (text: string, values: unknown[]) => Promise<unknown>,
  sql: ReturnType<typeof recordStatements>,
  clock: () => number | null,
): StoreRecords {
  return {
    async put(kind, policyId, subject, value, ttlMs) {
      checkRecordPut(kind, policyId, subject, value, ttlMs)
      const args = [
        kind,
        policyId,
        bytes(subject),
        bytes(value),
        ttlMs ?? null,
        clock(),
        MAX_RECORDS_PER_POLICY,
      ]
      if (Number(await query(sql.recordPut, args)) !== 1) throw tooManyRecords(kind, policyId)
    },
    async delete(kind, policyId, subject) {
      checkRecordAddress('delete', kind, policyId, subject)
      return Number(await query(sql.recordDelete, [kind, policyId, bytes(subject)])) === 1
    },
    async get(kind, policyId, subject) {
      checkRecordAddress('get', kind, policyId, subject)
      const row = await query(sql.recordGet, [kind, policyId, bytes(subject), clock()])
      if (!Array.isArray(row)) return undefined
      return storeRecord(subject, text(row[0]), Number(row[1]))
    },
    async list(kind, policyId) {
      checkRecordSet('list', kind, policyId)
      const rows = await query(sql.recordList, [kind, policyId, clock()])
      const out: StoreRecord[] = []
      for (const row of Array.isArray(rows) ? rows : [])
        out.push(storeRecord(text(row[0]), text(row[1]), Number(row[2])))
      return out
    },
    async version() {
      const v = await query(sql.recordVersion, [])
      return v === undefined || v === null ? '' : String(v)
    },
  }
}
