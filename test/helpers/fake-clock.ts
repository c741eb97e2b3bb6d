// Shared test helpers: a fake clock and a snapshot of what a store holds, to prove nothing changed.
import type { Limiter } from '../../packages/sluice/src/limiter.js'
import { type MemoryStore, memoryStore } from '../../packages/sluice/src/stores/memory.js'

export interface FakeClock {
  now: () => number
  advance(ms: number): void
  set(ms: number): void
}

export function fakeClock(start = 1_700_000_000_000): FakeClock {
  let t = start
  return {
    now: () => t,
    advance(ms) {
      t += ms
    },
    set(ms) {
      t = ms
    },
  }
}

export function fakeStore(clock: FakeClock, maxKeys?: number): MemoryStore {
  return memoryStore(maxKeys === undefined ? { now: clock.now } : { now: clock.now, maxKeys })
}

/**
 * Everything observable about the given (policy, key) pairs: store size and a peek of each. With a
 * fake clock that does not move, two equal snapshots mean nothing stored changed in between.
 */
export async function snapshot<N extends string>(
  limiter: Limiter<N>,
  pairs: readonly (readonly [N, string])[],
): Promise<unknown> {
  const size = (limiter.store as MemoryStore).size
  const peeks = []
  for (const [policy, key] of pairs) peeks.push(await limiter.peek(policy, key))
  return { size, peeks }
}
