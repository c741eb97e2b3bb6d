// Hybrid mode's lease counts (src/scale/hybrid.ts) as metric series: one place that turns the
// counts every hybrid policy keeps into (policy, kind) totals, read by the Prometheus and
// OpenTelemetry exporters when they collect (nothing is done per decision).
import { type HybridBackend, type HybridStats, noHybridStats } from '../scale/hybrid.js'

/** What a lease series counts: leases taken and ended, and the units they moved. */
export const LEASE_SERIES = {
  leases: { taken: 'leasesTaken', ended: 'leasesEnded' },
  units: {
    leased: 'unitsLeased',
    spent: 'unitsSpent',
    returned: 'unitsReturned',
    lost: 'unitsLost',
    under_admitted: 'unitsUnderAdmitted',
  },
} as const satisfies Record<string, Record<string, keyof HybridStats>>

export type LeaseCountKind = keyof typeof LEASE_SERIES.leases
export type LeaseUnitKind = keyof typeof LEASE_SERIES.units

/** Totals by policy name over every hybrid policy of every limiter using `backend`. */
export function leaseTotals(backend: Pick<HybridBackend, 'stats'>): Map<string, HybridStats> {
  const totals = new Map<string, HybridStats>()
  for (const [policy, all] of backend.stats ?? []) {
    const sum = noHybridStats()
    for (const s of all) for (const k of Object.keys(sum) as (keyof HybridStats)[]) sum[k] += s[k]
    totals.set(policy, sum)
  }
  return totals
}
