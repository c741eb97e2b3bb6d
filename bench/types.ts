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
  /**
   * Set on the rows the summary table reads (bench/summary.ts), e.g. `http-fastify/sluice-memory
   * cpu-added`. Stable: the summary finds rows by it, not by subject text.
   */
  id?: string
}

export interface BenchOptions {
  /** A short run (CI smoke, iteration): fewer rounds and operations. */
  quick: boolean
  /** `--profile DIR`: the HTTP cases run their servers under `node --cpu-prof` into DIR. */
  profileDir?: string | undefined
  /**
   * `--variants a,b`: the HTTP cases run only these servers of http-server.mjs (plus `none`, the
   * baseline), e.g. `sluice-memory,fastify-rate-limit-memory` for one summary row.
   */
  variants?: readonly string[] | undefined
}

/** Every bench/cases/*.ts module exports `benchCase` of this type. */
export interface BenchCase {
  name: string
  /**
   * A case outside the summary. The default run is the list in bench/run.ts (DEFAULT_CASES), which
   * decides; every case runs with `--all`, or when `--only` names it.
   */
  extra?: boolean
  run(opts: BenchOptions): Promise<BenchRow[]>
}
