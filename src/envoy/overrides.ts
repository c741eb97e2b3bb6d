// Envoy's per-request limits (a descriptor's `limit`) as policies of their own, added to the
// configured ones in one limiter. A client can send any number of distinct limits, so at most
// `envoy.maxOverridePolicies` are kept: one more drops the least recently used, counted in
// sluice_envoy_override_policies_dropped_total. Counters do not depend on which are kept (an
// override's storage id leaves its requests_per_unit out: decide.ts), so a dropped one loses none.
import type { Registry } from 'prom-client'
import { Counter, Gauge } from 'prom-client'
import type { Limiter } from '../limiter.js'
import type { Policy } from '../policy.js'

export interface OverridePolicies {
  /**
   * The limiter to decide a request with these override policies: the configured policies, these,
   * and the others kept. All of one request's are kept, even when they are more than the bound.
   */
  limiterWith(extra: Readonly<Record<string, Policy>>): Limiter
  /** Forget every override (on reload: the configured policies change). */
  clear(): void
}

export interface OverridePoliciesOptions {
  /** Where the two metrics are registered. */
  registry: Registry
  /** The bound in force (read per call: a reload may change it). */
  max(): number
  /** A limiter holding the configured policies and `extra`. */
  build(extra: Readonly<Record<string, Policy>>): Limiter
}

export function overridePolicies(options: OverridePoliciesOptions): OverridePolicies {
  // By name, least recently used first (a use moves a name to the end).
  const kept = new Map<string, Policy>()
  let limiter: Limiter | undefined
  const dropped = new Counter({
    name: 'sluice_envoy_override_policies_dropped_total',
    help: 'Policies made from Envoy per-request limits that were dropped to stay within envoy.maxOverridePolicies.',
    registers: [options.registry],
  })
  const size = new Gauge({
    name: 'sluice_envoy_override_policies',
    help: 'Policies made from Envoy per-request limits kept now.',
    registers: [options.registry],
    collect() {
      this.set(kept.size)
    },
  })
  size.set(0)

  return {
    limiterWith(extra) {
      let added = false
      for (const [name, policy] of Object.entries(extra)) {
        if (!kept.delete(name)) added = true
        kept.set(name, policy)
      }
      if (!added && limiter !== undefined) return limiter
      // This request's names are the most recent, so the oldest dropped are never among them.
      const max = Math.max(options.max(), Object.keys(extra).length)
      for (const name of kept.keys()) {
        if (kept.size <= max) break
        kept.delete(name)
        dropped.inc()
      }
      limiter = options.build(Object.fromEntries(kept))
      return limiter
    },
    clear() {
      kept.clear()
      limiter = undefined
    },
  }
}
