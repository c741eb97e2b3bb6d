// A circuit breaker for the store: after `failures` consecutive failed calls, spread over at least
// `minSpanMs`, it opens and no call reaches the store for `cooldownMs`; then one probe call is let
// through (half-open). The probe's success closes it, its failure opens it for another cool-down.
// Pure state, clock passed in.

export type CircuitState = 'closed' | 'open' | 'half-open'

export interface BreakerOptions {
  /** Consecutive failures that open the circuit. */
  failures: number
  /** How long the circuit stays open before a probe, ms. */
  cooldownMs: number
  /**
   * The consecutive failures must span at least this long (ms; default 0). A burst of timeouts that
   * all fire at once after our own process stalled (a GC pause, a starved CPU) is one event, not
   * evidence that the store is down; a store that is really down keeps failing past the span.
   */
  minSpanMs?: number
}

/** What a caller may do now: call the store normally, call it as the one probe, or not call it. */
export type Admission = 'call' | 'probe' | 'reject'

export interface Breaker {
  readonly state: CircuitState
  /** Consecutive failures seen while closed (reset by any success). */
  readonly consecutiveFailures: number
  /** Ask before calling the store. A `probe` admission must be followed by success() or failure(). */
  admit(nowMs: number): Admission
  /** A call (or the probe) succeeded. Returns true when this closed an open circuit. */
  success(probe: boolean): boolean
  /** A call (or the probe) failed. Returns true when this opened the circuit. */
  failure(probe: boolean, nowMs: number): boolean
  /** Ms until the next probe is allowed; 0 when closed or a probe may go now. */
  retryInMs(nowMs: number): number
}

export function createBreaker(options: BreakerOptions): Breaker {
  let state: CircuitState = 'closed'
  let consecutiveFailures = 0
  let firstFailureAt = 0
  let probeAt = 0
  const minSpanMs = options.minSpanMs ?? 0
  let probing = false

  return {
    get state() {
      return state
    },
    get consecutiveFailures() {
      return consecutiveFailures
    },
    admit(nowMs) {
      if (state === 'closed') return 'call'
      if (state === 'open' && nowMs >= probeAt) {
        state = 'half-open'
        probing = true
        return 'probe'
      }
      // Open and cooling down, or half-open with the probe still out.
      return 'reject'
    },
    success(probe) {
      if (probe) {
        probing = false
        state = 'closed'
        consecutiveFailures = 0
        return true
      }
      // A late success of a call made before the circuit opened says little; only the probe closes it.
      if (state === 'closed') consecutiveFailures = 0
      return false
    },
    failure(probe, nowMs) {
      if (probe) {
        probing = false
        state = 'open'
        probeAt = nowMs + options.cooldownMs
        return false
      }
      if (state !== 'closed') return false
      if (consecutiveFailures === 0) firstFailureAt = nowMs
      consecutiveFailures++
      if (consecutiveFailures < options.failures || nowMs - firstFailureAt < minSpanMs) return false
      state = 'open'
      probeAt = nowMs + options.cooldownMs
      return true
    },
    retryInMs(nowMs) {
      if (state === 'closed') return 0
      if (state === 'half-open') return probing ? options.cooldownMs : 0
      return Math.max(0, probeAt - nowMs)
    },
  }
}
