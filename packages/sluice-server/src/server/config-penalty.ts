// How `sluice check` shows a policy's `penalty:` (validated by the library's resolvePolicy, like
// every other key of a policy).
import type { ResolvedPolicy } from 'sluice/internal'

/** `, penalty after 3 denials within 600000ms: block 3600000ms x4 up to 86400000ms`, or '' without one. */
export function describePenalty(r: ResolvedPolicy): string {
  const p = r.penalty
  if (p === undefined) return ''
  return `, penalty after ${p.after} denials within ${p.withinMs}ms: block ${p.blockMs}ms x${p.factor} up to ${p.maxMs}ms`
}
