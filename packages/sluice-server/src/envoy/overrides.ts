// Envoy's per-request limits (a descriptor's `limit`) as policies of their own, in a limiter with the
// configured policies. A client can send any number of distinct limits, so at most
// `envoy.maxOverridePolicies` are kept: one more drops the least recently used, counted in
// sluice_envoy_override_policies_dropped_total. Counters do not depend on which are kept (an
// override's storage id leaves its requests_per_unit out: decide.ts), so a dropped one loses none.
import type { Registry } from 'prom-client'
import { Counter, Gauge } from 'prom-client'
import type { Limiter, Policy } from 'sluice'

export interface OverridePolicies {
  /**
   * A limiter with the configured policies and these override policies. All of one request's are
   * kept, even when they are more than the bound.
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
  // Override policy names kept, least recently used first (a use moves a name to the end).
  const kept = new Set<string>()
  // A limiter per set of names one request needed (building one costs about a millisecond, so
  // they are reused; one limiter for every name kept would be rebuilt for each new name), least
  // recently used first. Every name of a cached limiter is kept.
  let limiters = new Map<string, { limiter: Limiter; names: readonly string[] }>()
  const dropped = new Counter({
    name: 'sluice_envoy_override_policies_dropped_total',
    help: 'Policies made from Envoy per-request limits that were dropped to stay within envoy.maxOverridePolicies.',
    registers: [options.registry],
  })
  new Gauge({
    name: 'sluice_envoy_override_policies',
    help: 'Policies made from Envoy per-request limits kept now.',
    registers: [options.registry],
    collect() {
      this.set(kept.size)
    },
  })

  return {
    limiterWith(extra) {
      const names = Object.keys(extra).sort()
      for (const name of names) {
        kept.delete(name)
        kept.add(name)
      }
      const id = names.join('\u0000')
      const cached = limiters.get(id)
      if (cached !== undefined) {
        limiters.delete(id)
        limiters.set(id, cached)
        return cached.limiter
      }
      // This request's names are the most recent, so the oldest dropped are never among them.
      const max = Math.max(options.max(), names.length)
      const gone = new Set<string>()
      for (const name of kept) {
        if (kept.size <= max) break
        kept.delete(name)
        gone.add(name)
        dropped.inc()
      }
      if (gone.size > 0)
        limiters = new Map([...limiters].filter(([, entry]) => !entry.names.some((n) => gone.has(n))))
      const limiter = options.build(extra)
      limiters.set(id, { limiter, names })
      if (limiters.size > max) limiters.delete(limiters.keys().next().value!)
      return limiter
    },
    clear() {
      kept.clear()
      limiters = new Map()
    },
  }
}
