// What every store's kill-under-load fault test reads from its samples, and the rule each
// onStoreError mode must hold during the outage: shared by the Redis, memcached and PostgreSQL tests.
import { expect } from 'vitest'
import type { StoreErrorMode } from '../../packages/sluice/src/policy.js'
import type { Sample } from './load.js'
import { percentile } from './results.js'

/**
 * Latency figures of a run. `late` counts decisions over the timeout + 10 ms plus two event-loop
 * stalls (one stall before the timer fires and one after): on a shared 2-core machine a stalled
 * loop delays every decision, whatever the limiter does.
 */
export function latencyStats(samples: readonly Sample[], timeoutMs: number, loopDelayMaxMs: number) {
  const latencies = samples.map((s) => s.latencyMs)
  const bound = timeoutMs + 10 + 2 * loopDelayMaxMs
  return {
    p99: percentile(latencies, 99),
    max: latencies.reduce((m, l) => Math.max(m, l), 0),
    overTimeoutPlus10: latencies.filter((l) => l > timeoutMs + 10).length,
    late: latencies.filter((l) => l > bound).length,
    bound,
  }
}

/** The degraded, unavailable and thrown decisions of a run, and the mode's rule in words. */
export function outageSummary(samples: readonly Sample[], mode: StoreErrorMode, shareNote: string) {
  const degraded = samples.filter((s) => s.degraded)
  const threw = samples.filter((s) => s.reason === 'threw')
  const unavailable = samples.filter((s) => s.reason === 'store_unavailable')
  const admittedInMemory = new Map<string, number>()
  for (const s of degraded) if (s.allowed) admittedInMemory.set(s.key, (admittedInMemory.get(s.key) ?? 0) + 1)
  const rule =
    mode === 'open'
      ? `all ${degraded.length} degraded decisions admitted`
      : mode === 'closed'
        ? `all ${degraded.length} degraded decisions denied with store_unavailable (503)`
        : `memory fallback admitted at most ${Math.max(0, ...admittedInMemory.values())} per key (${shareNote})`
  return { degraded, threw, unavailable, admittedInMemory, rule }
}

/**
 * The mode held: `open` admitted every degraded decision, `closed` denied each with
 * store_unavailable, `memory` kept each key within its share (and, with `memoryDenies`, denied some
 * on its own limit); and health said so during the outage.
 */
export function expectModeHeld(
  mode: StoreErrorMode,
  run: ReturnType<typeof outageSummary>,
  outageHealth: { status: string },
  memoryShare: number,
  memoryDenies: boolean,
): void {
  const { degraded, unavailable, admittedInMemory } = run
  if (mode === 'open') {
    expect(degraded.every((s) => s.allowed)).toBe(true)
    expect(unavailable).toEqual([])
    expect(outageHealth.status).toBe('degraded')
  } else if (mode === 'closed') {
    expect(degraded.every((s) => !s.allowed && s.reason === 'store_unavailable')).toBe(true)
    expect(outageHealth.status).toBe('down')
  } else {
    expect(unavailable).toEqual([])
    for (const count of admittedInMemory.values()) expect(count).toBeLessThanOrEqual(memoryShare)
    if (memoryDenies) expect(degraded.some((s) => !s.allowed && s.reason === 'limit')).toBe(true)
    expect(outageHealth.status).toBe('degraded')
  }
}
