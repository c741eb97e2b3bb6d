// How the service answers: decisions in the configured names and the header helper's policy table.
// Pure functions of their arguments.
import type { Decision, LayeredDecision } from '../limiter.js'
import type { ResolvedPolicy } from '../policy.js'
import type { PolicyEntry, ServiceConfig } from './config.js'

/** The decision in the service's words: configured policy names, the tier when one applied. */
export function present(d: Decision, entry: PolicyEntry): Record<string, unknown> {
  const out: Record<string, unknown> = {
    allowed: d.allowed,
    limit: d.limit,
    remaining: d.remaining,
    resetMs: d.resetMs,
    retryAfterMs: d.retryAfterMs,
    policy: entry.name,
  }
  if (entry.tier !== undefined) out.tier = entry.tier
  if (d.reason !== undefined) out.reason = d.reason
  if (d.degraded === true) out.degraded = true
  return out
}

/** A layered decision in the service's words; `deniedBy` names the configured policy. */
export function presentLayered(d: LayeredDecision, entries: readonly PolicyEntry[]): Record<string, unknown> {
  const results = d.results.map((r, i) => present(r, entries[i]!))
  const headline = d.results.findIndex((r) => r.policy === d.policy && r.key === d.key)
  const out: Record<string, unknown> = { ...present(d, entries[Math.max(0, headline)]!) }
  if (d.deniedBy !== undefined) {
    const denied = d.results.findIndex((r) => !r.allowed)
    out.deniedBy = entries[denied]?.name ?? d.deniedBy
  }
  out.results = results
  return out
}

/**
 * Per limiter policy, the policy table the header helper gets: one entry under the configured
 * name (`api`, not `api.pro.9d8f4c`), built once per config so the helper's memo keeps working.
 */
export function policiesForHeaders(
  next: ServiceConfig,
): Map<string, Readonly<Record<string, ResolvedPolicy>>> {
  const out = new Map<string, Readonly<Record<string, ResolvedPolicy>>>()
  for (const entry of next.entries.values()) {
    const named: ResolvedPolicy = Object.freeze({ ...entry.resolved, name: entry.name })
    out.set(entry.internalName, Object.freeze({ [entry.name]: named }))
  }
  return out
}
