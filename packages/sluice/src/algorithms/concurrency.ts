// Concurrency: at most `limit` units in flight per key. Each acquire holds a lease that ends when
// released or, if never released (a crashed worker), after the policy's timeout (`windowMs`).
import type { Algorithm } from './types.js'

export interface Lease {
  id: string
  /** When the lease ends by itself (ms). */
  expiresAt: number
  cost: number
}

export interface ConcurrencyState {
  leases: Lease[]
}

function live(state: ConcurrencyState | undefined, nowMs: number): Lease[] {
  if (state === undefined) return []
  return state.leases.filter((lease) => lease.expiresAt > nowMs)
}

export const concurrency: Algorithm<ConcurrencyState> = {
  consume(state, policy, nowMs, cost, peek, leaseId) {
    const leases = live(state, nowMs)
    let inUse = 0
    for (const lease of leases) inUse += lease.cost
    const allowed = inUse + cost <= policy.limit
    let next = leases
    if (allowed && !peek) {
      next = leases.concat({ id: leaseId ?? '', expiresAt: nowMs + policy.windowMs, cost })
      inUse += cost
    }
    let retryAfterMs = 0
    if (!allowed) {
      // At the latest, enough leases time out: earliest expiries first.
      const byExpiry = leases.slice().sort((a, b) => a.expiresAt - b.expiresAt)
      let free = policy.limit - inUse
      for (const lease of byExpiry) {
        free += lease.cost
        if (free >= cost) {
          retryAfterMs = lease.expiresAt - nowMs
          break
        }
      }
    }
    let lastExpiry = nowMs
    for (const lease of next) lastExpiry = Math.max(lastExpiry, lease.expiresAt)
    return {
      allowed,
      state: { leases: next },
      remaining: Math.max(0, policy.limit - inUse),
      retryAfterMs,
      resetMs: lastExpiry - nowMs,
    }
  },
  charge(state, policy, nowMs, cost) {
    // An anonymous lease (like consume's) taken past the limit; it ends with the policy's timeout.
    const leases = live(state, nowMs).concat({ id: '', expiresAt: nowMs + policy.windowMs, cost })
    let inUse = 0
    for (const lease of leases) inUse += lease.cost
    let lastExpiry = nowMs
    for (const lease of leases) lastExpiry = Math.max(lastExpiry, lease.expiresAt)
    return {
      allowed: true,
      state: { leases },
      remaining: Math.max(0, policy.limit - inUse),
      retryAfterMs: 0,
      resetMs: lastExpiry - nowMs,
    }
  },
  refund(state, _policy, nowMs, amount, leaseId) {
    const leases = live(state, nowMs)
    if (leaseId !== undefined && leaseId !== '') {
      const kept = leases.filter((lease) => lease.id !== leaseId)
      return kept.length === 0 ? undefined : { leases: kept }
    }
    // Leases taken by consume (no lease id) share the id '': give back `amount` units of them, the
    // newest first (a refund usually follows the consume it undoes). Named leases are left alone.
    const kept = leases.slice()
    let left = amount
    for (let i = kept.length - 1; i >= 0 && left > 0; i--) {
      const lease = kept[i]!
      if (lease.id !== '') continue
      if (lease.cost <= left) {
        left -= lease.cost
        kept.splice(i, 1)
      } else {
        kept[i] = { id: lease.id, expiresAt: lease.expiresAt, cost: lease.cost - left }
        left = 0
      }
    }
    return kept.length === 0 ? undefined : { leases: kept }
  },
}
