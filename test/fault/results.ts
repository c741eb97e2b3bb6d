// Fault tests record what they saw here (test/fault/.results/*.json, one file per test file);
// `npm run docs:reliability` turns the records into the table in docs/reliability.md.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const RESULTS_DIR = join(dirname(fileURLToPath(import.meta.url)), '.results')

/** One row of the reliability table. */
export interface FaultRecord {
  fault: string
  mode: string
  /** What clients saw, in words, with the numbers that back it. */
  clientsSaw: string
  decisions: number
  degraded: number
  /** Decisions denied as store_unavailable. */
  unavailable: number
  /** Decisions that failed (threw) or took longer than the bound: must be 0. */
  failed: number
  p99Ms: number
  maxMs: number
  /** From the fault being repaired to the first decision from the store again; null when not applicable. */
  recoveryMs: number | null
  notes?: string
  at: string
}

/** Add or replace (by fault + mode) a record in `file`. */
export function record(file: string, row: Omit<FaultRecord, 'at'>): void {
  mkdirSync(RESULTS_DIR, { recursive: true })
  const path = join(RESULTS_DIR, `${file}.json`)
  let rows: FaultRecord[] = []
  try {
    rows = JSON.parse(readFileSync(path, 'utf8')) as FaultRecord[]
  } catch {
    rows = []
  }
  rows = rows.filter((r) => !(r.fault === row.fault && r.mode === row.mode))
  rows.push({ ...row, at: new Date().toISOString() })
  writeFileSync(path, `${JSON.stringify(rows, null, 2)}\n`)
}

/** Percentile (0-100) of a list of numbers; 0 for an empty list. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return 0
  const sorted = [...values].sort((a, b) => a - b)
  const index = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)
  return sorted[Math.max(0, index)]!
}

export const round = (n: number, digits = 1): number => Math.round(n * 10 ** digits) / 10 ** digits
