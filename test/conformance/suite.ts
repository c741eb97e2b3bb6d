// The conformance suite: every vector runs against any store handed to it. Memory and Redis stores
// (standalone and Cluster) all call runConformance with their own factory.
import { describe, expect, it } from 'vitest'
import { createLimiter, type Limiter } from '../../src/limiter.js'
import { type ResolvedPolicy, resolvePolicy } from '../../src/policy.js'
import type { Step, StepResult, Store } from '../../src/store.js'
import { type Vector, type VectorStep, vectors } from './vectors.js'

/** Builds a fresh, empty store whose clock is `now()` (ms). Called once per vector. */
export type StoreFactory = (now: () => number) => Store | Promise<Store>

/** What holds for every result of every store, whatever the vector expects. */
function checkInvariants(result: StepResult | undefined, capacity: number, where: string): void {
  expect(result, where).toBeDefined()
  const r = result!
  for (const field of ['remaining', 'retryAfterMs', 'resetMs'] as const) {
    expect(Number.isSafeInteger(r[field]) && r[field] >= 0, `${where}: ${field} = ${r[field]}`).toBe(true)
  }
  expect(r.remaining, `${where}: remaining <= capacity`).toBeLessThanOrEqual(capacity)
  if (r.allowed) expect(r.retryAfterMs, `${where}: allowed means no wait`).toBe(0)
  else expect(r.retryAfterMs, `${where}: denied means a wait`).toBeGreaterThan(0)
}

/**
 * The longest a key of `policy` can be made to wait by what it spent (blocks and forced charges
 * aside): a window for the windows (two for the counter, whose previous window still weighs), a full
 * refill from empty for the bucket algorithms, the lease timeout for concurrency.
 */
export function longestWaitMs(policy: ResolvedPolicy): number {
  switch (policy.algorithm) {
    case 'sliding-window-counter':
      return 2 * policy.windowMs
    case 'token-bucket':
    case 'gcra':
      return Math.ceil((policy.capacity * policy.windowMs) / policy.limit)
    default:
      return policy.windowMs
  }
}

/**
 * After a parameter change, what a decision reports never reaches past the longest wait of the
 * policy in force (a lease keeps the timeout it was taken with, so concurrency is held to the
 * longest timeout the vector used).
 */
function checkBounded(
  result: StepResult,
  policy: ResolvedPolicy,
  used: ResolvedPolicy[],
  where: string,
): void {
  if (result.blocked) return
  const bound =
    policy.algorithm === 'concurrency' ? Math.max(...used.map(longestWaitMs)) : longestWaitMs(policy)
  expect(result.retryAfterMs, `${where}: retryAfterMs <= ${bound}`).toBeLessThanOrEqual(bound)
  expect(result.resetMs, `${where}: resetMs <= ${bound}`).toBeLessThanOrEqual(bound)
}

/**
 * Cases that hold only through a limiter: its local deny cache (on, as by default) and the way it
 * passes refunds down. Every store's factory runs them, whatever vector subset it takes.
 */
function runThroughLimiter(makeStore: StoreFactory): void {
  const policies = {
    slots: { algorithm: 'concurrency', limit: 3, timeout: '10s' },
    once: { algorithm: 'fixed-window', limit: 1, window: '1s' },
  } as const
  async function withLimiter(
    body: (limiter: Limiter<keyof typeof policies>, advance: (ms: number) => void) => Promise<void>,
  ): Promise<void> {
    let clock = 1_700_000_000_000
    const store = await makeStore(() => clock)
    const limiter = createLimiter({ store, policies, localDenyCache: { maxKeys: 100 } })
    try {
      await body(limiter, (ms) => {
        clock += ms
      })
    } finally {
      await limiter.close()
    }
  }

  describe('through a limiter, deny cache on', () => {
    it('a refund of 1 after three consumes of a concurrency policy frees exactly one slot', async () => {
      await withLimiter(async (limiter) => {
        for (let i = 0; i < 3; i++) expect((await limiter.consume('slots', 'k')).allowed).toBe(true)
        expect(await limiter.consume('slots', 'k')).toMatchObject({ allowed: false, remaining: 0 })
        await limiter.refund('slots', 'k', 1)
        expect(await limiter.peek('slots', 'k')).toMatchObject({ allowed: true, remaining: 1 })
        expect(await limiter.consume('slots', 'k')).toMatchObject({ allowed: true, remaining: 0 })
        expect(await limiter.consume('slots', 'k')).toMatchObject({ allowed: false, remaining: 0 })
      })
    })

    it("the deny cache keeps the store's clock: denied until its retry time, admitted at it", async () => {
      await withLimiter(async (limiter, advance) => {
        expect((await limiter.consume('once', 'k')).allowed).toBe(true)
        expect(await limiter.consume('once', 'k')).toMatchObject({ allowed: false, retryAfterMs: 1000 })
        advance(999)
        expect(await limiter.consume('once', 'k')).toMatchObject({ allowed: false, retryAfterMs: 1 })
        advance(1)
        expect(await limiter.consume('once', 'k')).toMatchObject({ allowed: true, remaining: 0 })
        expect(await limiter.consume('once', 'k')).toMatchObject({ allowed: false, retryAfterMs: 1000 })
      })
    })
  })
}

export function runConformance(
  label: string,
  makeStore: StoreFactory,
  only: readonly Vector[] = vectors,
): void {
  describe(`conformance: ${label}`, () => {
    runThroughLimiter(makeStore)
    for (const vector of only) {
      it(vector.name, async () => {
        let clock = vector.start ?? 1_700_000_000_000
        const store = await makeStore(() => clock)
        try {
          const policy = resolvePolicy('p', vector.policy)
          const named = new Map([['p', policy]])
          // Every parameter set 'p' had, once one step changed it.
          const used: ResolvedPolicy[] = [policy]
          let changed = false
          for (const [name, extra] of Object.entries(vector.policies ?? {}))
            named.set(name, resolvePolicy(name, extra))
          const key = vector.key ?? `k-${vector.name}`
          for (const [index, s] of vector.steps.entries()) {
            clock += s.after ?? 0
            if (s.policy !== undefined) {
              const next = resolvePolicy('p', s.policy)
              named.set('p', next)
              used.push(next)
              changed = true
            }
            // One step, or several applied as one atomic unit (a layered check).
            const layers: NonNullable<VectorStep['layers']> = s.layers ?? [
              s.lease === undefined
                ? { policy: 'p', cost: s.cost ?? 1 }
                : { policy: 'p', cost: s.cost ?? 1, lease: s.lease },
            ]
            const steps: Step[] = layers.map((layer) => {
              const p = named.get(layer.policy)
              if (p === undefined) throw new Error(`${vector.name}: no policy ${layer.policy}`)
              const base = { policy: p, key: layer.key ?? key, cost: layer.cost ?? 1 }
              return layer.lease === undefined ? base : { ...base, leaseId: layer.lease }
            })
            const where = `${vector.name}, step ${index} (${s.op ?? 'consume'} at +${clock - (vector.start ?? 1_700_000_000_000)}ms)`
            switch (s.op ?? 'consume') {
              case 'consume':
              case 'peek': {
                const results = await store.apply(steps, s.op === 'peek' ? 'peek' : 'consume')
                expect(results, where).toHaveLength(steps.length)
                for (const [i, result] of results.entries()) {
                  checkInvariants(result, steps[i]!.policy.capacity, `${where}, layer ${i}`)
                  if (changed) checkBounded(result, steps[i]!.policy, used, `${where}, layer ${i}`)
                }
                if (s.expect !== undefined) expect(results[0], where).toMatchObject(s.expect)
                if (s.expectLayers !== undefined) expect(results, where).toMatchObject(s.expectLayers)
                break
              }
              case 'refund':
                await store.refund(steps)
                break
              case 'reset':
                await store.reset(steps)
                break
              case 'block':
                await store.block(steps, s.blockMs ?? 1000)
                break
            }
          }
        } finally {
          await store.close()
        }
      })
    }
  })
}
