// The differential test's machinery, shared by every store's differential test: a seeded PRNG,
// a policy of each algorithm, and one random sequence of consume, peek, refund, block and reset
// (layered steps included) run on the memory store and on the store under test.
import { expect } from 'vitest'
import { type Policy, type ResolvedPolicy, resolvePolicy } from '../../packages/sluice/src/policy.js'
import type { Step, Store } from '../../packages/sluice/src/store.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'

/** Small deterministic PRNG (mulberry32) so a failure can be replayed from its seed. */
export function random(seed: number): () => number {
  let a = seed
  return () => {
    a = (a + 0x6d2b79f5) | 0
    let t = Math.imul(a ^ (a >>> 15), 1 | a)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

export const policies: Record<string, Policy> = {
  fw: { algorithm: 'fixed-window', limit: 5, window: 1000 },
  swl: { algorithm: 'sliding-window-log', limit: 6, window: 1000 },
  swc: { algorithm: 'sliding-window-counter', limit: 7, window: 1000 },
  tb: { algorithm: 'token-bucket', limit: 10, window: 1000, burst: 4 },
  tb3: { algorithm: 'token-bucket', limit: 3, window: 700, burst: 5 },
  gcra: { algorithm: 'gcra', limit: 10, window: 1000, burst: 3 },
  gcra7: { algorithm: 'gcra', limit: 7, window: 333, burst: 7 },
  conc: { algorithm: 'concurrency', limit: 3, timeout: 500 },
}
const resolved: Record<string, ResolvedPolicy> = Object.fromEntries(
  Object.entries(policies).map(([name, p]) => [name, resolvePolicy(name, p)]),
)

/**
 * Run one random sequence (seeded) on a memory store and on `makeStore`'s store, same fake clock;
 * every StepResult must match. `keys` are the subjects the sequence picks from.
 */
export async function compareWithMemory(
  label: string,
  makeStore: (now: () => number) => Store | Promise<Store>,
  seed: number,
  names: readonly string[],
  keys: readonly string[] = ['a', 'b', 'user:{x}'],
): Promise<void> {
  const rand = random(seed)
  let clock = 1_700_000_000_000 + Math.floor(rand() * 5000)
  const now = () => clock
  const memory = memoryStore({ now })
  const other = await makeStore(now)
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!
  const log: string[] = []
  for (let i = 0; i < 120; i++) {
    const r = rand()
    // The clock only moves forward here: after a state expires, a clock stepping back behind its
    // expiry finds it gone in Redis but possibly not yet swept in memory. The conformance vectors
    // pin the backward-clock behaviour of each transition.
    clock += Math.floor(r * r * 300)
    const count = rand() < 0.2 ? 2 : 1
    const steps: Step[] = []
    const used = new Set<string>()
    for (let s = 0; s < count; s++) {
      const name = pick(names)
      const key = pick(keys)
      if (used.has(`${name}/${key}`)) continue
      used.add(`${name}/${key}`)
      const policy = resolved[name]!
      const cost = rand() < 0.2 ? 2 : 1
      steps.push(
        policy.algorithm === 'concurrency'
          ? { policy, key, cost, leaseId: `l${Math.floor(rand() * 4)}` }
          : { policy, key, cost },
      )
    }
    const op = rand()
    const where = `${label} seed ${seed} op ${i}`
    if (op < 0.6) {
      const mode = rand() < 0.2 ? 'peek' : 'consume'
      log.push(
        `${where}: ${mode} ${steps.map((s) => `${s.policy.name}/${JSON.stringify(s.key)}x${s.cost}`).join(',')} at ${clock}`,
      )
      const expected = await memory.apply(steps, mode)
      const actual = await other.apply(steps, mode)
      expect(actual, log.slice(-15).join('\n')).toEqual(expected)
    } else if (op < 0.8) {
      log.push(
        `${where}: refund ${steps.map((s) => `${s.policy.name}/${JSON.stringify(s.key)}x${s.cost}`).join(',')} at ${clock}`,
      )
      await memory.refund(steps)
      await other.refund(steps)
    } else if (op < 0.88) {
      const ms = 1 + Math.floor(rand() * 600)
      log.push(`${where}: block ${ms} at ${clock}`)
      await memory.block(steps, ms)
      await other.block(steps, ms)
    } else {
      log.push(`${where}: reset at ${clock}`)
      await memory.reset(steps)
      await other.reset(steps)
    }
  }
}
