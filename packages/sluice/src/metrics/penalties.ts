// The keys under a penalty, as the dashboard lists them: the last penalty of each (policy, key),
// bounded in entries, listed while its block lasts. Fed by decision events that carry `penalty`.
import type { Decision, LayeredDecision } from '../limiter.js'
import { keyFingerprint } from './topk.js'

/** One penalised key on the dashboard. Times are this process's clock (the observability's `now`). */
export interface PenalisedKey {
  /** The policy's name, as decisions show it. */
  policy: string
  /** The key as the limiter was given it. */
  key: string
  /** A short name for a hashed key (`apikey:I6L_xJKj…`), as the other dashboard lists show it. */
  fingerprint?: string
  /** The key's earlier penalties remembered when this one was applied. */
  level: number
  /** The block, in ms. */
  blockMs: number
  /** When the penalty was applied (ms since the epoch). */
  at: number
  /** When its block ends (ms since the epoch). */
  until: number
}

/** At most this many keys are remembered; the oldest penalty is forgotten first. */
const MAX_KEYS = 200

export class PenalisedKeys {
  // By policy and key, oldest penalty first (a new penalty moves its key to the end).
  private readonly keys = new Map<string, PenalisedKey>()

  /** Remember the penalties `decision` applied (its own, or each layer's). */
  record(decision: Decision | LayeredDecision, at: number): void {
    const layers = 'results' in decision ? decision.results : [decision]
    for (const d of layers) {
      if (d.penalty === undefined) continue
      const id = `${d.policy}\u0000${d.key}`
      this.keys.delete(id)
      const entry: PenalisedKey = {
        policy: d.policy,
        key: d.key,
        level: d.penalty.level,
        blockMs: d.penalty.blockMs,
        at,
        until: at + d.penalty.blockMs,
      }
      const fingerprint = keyFingerprint(d.key)
      if (fingerprint !== undefined) entry.fingerprint = fingerprint
      this.keys.set(id, entry)
      if (this.keys.size > MAX_KEYS) this.keys.delete(this.keys.keys().next().value!)
    }
  }

  /** The keys whose block has not ended at `at`, newest penalty first, at most `k`. */
  list(at: number, k: number): PenalisedKey[] {
    const out: PenalisedKey[] = []
    for (const [id, entry] of this.keys) if (entry.until <= at) this.keys.delete(id)
    for (const entry of [...this.keys.values()].reverse()) {
      if (out.length === k) break
      out.push({ ...entry })
    }
    return out
  }
}
