// The contract between bench/run.ts and each bench/cases/*.ts module.

/** One line of the printed table. */
export interface BenchRow {
  /** What was measured, e.g. `sluice memory token-bucket consumeSync`. */
  subject: string
  /** e.g. `decisions/s`, `p99 latency`. */
  metric: string
  value: number
  unit: string
  /** value relative to the case's reference subject (named in `note` or the case's docs). */
  ratio?: number
  note?: string
}

export interface BenchOptions {
  /** A short run (CI smoke, iteration): fewer rounds and operations. */
  quick: boolean
}

/** Every bench/cases/*.ts module exports `benchCase` of this type. */
export interface BenchCase {
  name: string
  run(opts: BenchOptions): Promise<BenchRow[]>
}
