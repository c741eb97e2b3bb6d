// How the service answers /v1/check and /v1/peek: the decision as JSON, the configured policy and
// the tier as fields of their own. Pure functions of their arguments.
import type { Decision, LayeredDecision } from 'sluice'
import type { PolicyEntry } from './config.js'

/** The decision in the service's words: the configured policy (`api`) and the tier when one applied. */
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
  if (d.listed !== undefined) out.listed = d.listed
  if (d.penalty !== undefined) out.penalty = d.penalty
  if (d.nearLimit === true) out.nearLimit = true
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
