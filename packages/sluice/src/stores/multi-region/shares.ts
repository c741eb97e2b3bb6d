// Shares of a global limit: which part of `limit` each region may admit, computed from the ledgers
// every region publishes in its own Redis. A region's ledger records what it has given to each
// other region (cumulative, only ever raised by that region), so capacity moves only when its
// holder hands it over: two regions can never both take the same released units. Pure functions;
// the exchange (exchange.ts) reads and writes the ledgers, index.ts decides against the share.

/** One region's ledger for one (policy, key): what it has handed to each other region, in total. */
export interface Ledger {
  /** Raised by one on every give: a give is applied only against the version it was planned on. */
  readonly version: number
  /** Cumulative units given, by receiving region. */
  readonly given: ReadonlyMap<string, number>
}

export const EMPTY_LEDGER: Ledger = { version: 0, given: new Map() }

/**
 * The starting shares: `limit / R` each, the remainder one unit apiece to the first regions in name
 * order, so every region computes the same split without asking.
 */
export function baseShares(limit: number, regions: readonly string[]): Map<string, number> {
  const sorted = [...regions].sort()
  const each = Math.floor(limit / sorted.length)
  const rest = limit - each * sorted.length
  return new Map(sorted.map((r, i) => [r, each + (i < rest ? 1 : 0)]))
}

/**
 * Every region's share as the given ledgers show it: base + received - given. With each ledger as
 * its owner last published it, the shares sum to `limit`; a receiver that has not yet read a
 * giver's ledger sees less than it holds, never more.
 */
export function sharesOf(
  limit: number,
  regions: readonly string[],
  ledgers: ReadonlyMap<string, Ledger>,
): Map<string, number> {
  const shares = baseShares(limit, regions)
  for (const [from, ledger] of ledgers)
    for (const [to, units] of ledger.given) {
      if (!shares.has(to) || !shares.has(from)) continue
      shares.set(from, shares.get(from)! - units)
      shares.set(to, shares.get(to)! + units)
    }
  return shares
}

/**
 * Where the shares should go: `limit` split in proportion to each region's demand (units asked
 * for in its last sync period). `undefined` when no region asks: nothing moves.
 */
export function targetsOf(
  limit: number,
  regions: readonly string[],
  demand: ReadonlyMap<string, number>,
): Map<string, number> | undefined {
  let total = 0
  for (const r of regions) total += Math.max(0, demand.get(r) ?? 0)
  if (total === 0) return undefined
  return new Map(regions.map((r) => [r, Math.floor((limit * Math.max(0, demand.get(r) ?? 0)) / total)]))
}

export interface GivePlan {
  /** Units to hand to each receiving region (all positive). */
  readonly to: Map<string, number>
  /** The version of this region's ledger the plan was made on. */
  readonly version: number
}

/**
 * What region `self` hands over now: what its share holds above both its target and what it has
 * already used (`usedUnits`, admissions under the share it still holds, in flight included), split
 * among the regions below their targets in proportion to how far below they are. Gives nothing
 * while the surplus is under `minUnits` (no churn of single units between busy regions).
 */
export function planGive(input: {
  readonly self: string
  readonly limit: number
  readonly regions: readonly string[]
  readonly ledgers: ReadonlyMap<string, Ledger>
  readonly demand: ReadonlyMap<string, number>
  readonly usedUnits: number
  readonly minUnits: number
}): GivePlan | undefined {
  const { self, limit, regions, ledgers } = input
  const targets = targetsOf(limit, regions, input.demand)
  if (targets === undefined) return undefined
  const shares = sharesOf(limit, regions, ledgers)
  const surplus = shares.get(self)! - Math.max(targets.get(self)!, Math.ceil(input.usedUnits))
  if (surplus < Math.max(1, input.minUnits)) return undefined
  const wanting: [string, number][] = []
  let wanted = 0
  for (const r of [...regions].sort()) {
    if (r === self) continue
    const below = targets.get(r)! - shares.get(r)!
    if (below > 0) {
      wanting.push([r, below])
      wanted += below
    }
  }
  if (wanted === 0) return undefined
  const giving = Math.min(surplus, wanted)
  const to = new Map<string, number>()
  let handed = 0
  for (const [r, below] of wanting) {
    const units = Math.floor((giving * below) / wanted)
    if (units > 0) to.set(r, units)
    handed += units
  }
  // Rounding leftovers go to the first wanting regions in name order, never past their want.
  for (const [r, below] of wanting) {
    if (handed >= giving) break
    const units = to.get(r) ?? 0
    if (units < below) {
      to.set(r, units + 1)
      handed++
    }
  }
  return to.size === 0 ? undefined : { to, version: ledgers.get(self)?.version ?? 0 }
}

/** A ledger after `plan` was applied to it (what the give script writes). */
export function applyGive(ledger: Ledger, plan: GivePlan): Ledger {
  const given = new Map(ledger.given)
  for (const [to, units] of plan.to) given.set(to, (given.get(to) ?? 0) + units)
  return { version: ledger.version + 1, given }
}
