// The conformance suite as cases any test runner can run: every vector (policy, clock steps, costs ->
// expected results) applied to a fresh store, plus the cases that hold only through a limiter. Every
// store Sluice ships passes them; a store written elsewhere proves itself against the same table.
import { createLimiter, type Limiter } from '../limiter.js'
import { type ResolvedPolicy, resolvePolicy } from '../policy.js'
import type { Step, StepResult, Store } from '../store.js'
import { recordCases } from './records.js'
import { vectors as allVectors, type ExpectedResult, type Vector, type VectorStep } from './vectors.js'

/** Builds a fresh, empty store whose clock is `now()` (ms since the epoch). Called once per case. */
export type StoreFactory = (now: () => number) => Store | Promise<Store>

/** One case: `run` resolves when the store behaves as the table says, and rejects saying where it did not. */
export interface ConformanceCase {
  readonly name: string
  run(): Promise<void>
}

export interface ConformanceOptions {
  /** The vectors to run (default: all of them); a store that lacks a capability runs a subset. */
  vectors?: readonly Vector[]
  /** The cases through a limiter (its deny cache, how it passes refunds down). Default true. */
  throughLimiter?: boolean
  /**
   * Whether the store keeps records (`store.records`). Default true: the records cases run. False:
   * one case checks that every records method rejects with `SLUICE_UNSUPPORTED`.
   */
  records?: boolean
}

/** A store answered otherwise than the table says. */
export class ConformanceError extends Error {
  override readonly name = 'ConformanceError'
}

const T0 = 1_700_000_000_000

function expectThat(condition: boolean, where: string, what: string): void {
  if (!condition) throw new ConformanceError(`${where}: ${what}`)
}

/** Each field `expected` names has exactly that value in `actual`. */
function matches(actual: object | undefined, expected: ExpectedResult, where: string): void {
  expectThat(actual !== undefined, where, 'no result')
  for (const [field, value] of Object.entries(expected)) {
    const got = (actual as Record<string, unknown>)[field]
    expectThat(got === value, where, `${field} is ${JSON.stringify(got)}, expected ${JSON.stringify(value)}`)
  }
}

/** What holds for every result of every store, whatever the vector expects. */
function checkInvariants(result: StepResult | undefined, capacity: number, where: string): void {
  expectThat(result !== undefined, where, 'no result')
  const r = result!
  for (const field of ['remaining', 'retryAfterMs', 'resetMs'] as const)
    expectThat(
      Number.isSafeInteger(r[field]) && r[field] >= 0,
      where,
      `${field} = ${r[field]}, not a whole number >= 0`,
    )
  expectThat(r.remaining <= capacity, where, `remaining ${r.remaining} is above the capacity ${capacity}`)
  if (r.allowed) expectThat(r.retryAfterMs === 0, where, `allowed with retryAfterMs ${r.retryAfterMs}`)
  else expectThat(r.retryAfterMs > 0, where, 'denied with retryAfterMs 0')
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
function expectBounded(
  result: StepResult,
  policy: ResolvedPolicy,
  used: ResolvedPolicy[],
  where: string,
): void {
  if (result.blocked) return
  const bound =
    policy.algorithm === 'concurrency' ? Math.max(...used.map(longestWaitMs)) : longestWaitMs(policy)
  expectThat(result.retryAfterMs <= bound, where, `retryAfterMs ${result.retryAfterMs} is above ${bound}`)
  expectThat(result.resetMs <= bound, where, `resetMs ${result.resetMs} is above ${bound}`)
}

async function runVector(makeStore: StoreFactory, vector: Vector): Promise<void> {
  const start = vector.start ?? T0
  let clock = start
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
      const where = `${vector.name}, step ${index} (${s.op ?? 'consume'} at +${clock - start}ms)`
      switch (s.op ?? 'consume') {
        case 'consume':
        case 'peek': {
          const results = await store.apply(steps, s.op === 'peek' ? 'peek' : 'consume')
          expectThat(
            results.length === steps.length,
            where,
            `${results.length} results for ${steps.length} steps`,
          )
          for (const [i, result] of results.entries()) {
            checkInvariants(result, steps[i]!.policy.capacity, `${where}, layer ${i}`)
            if (changed) expectBounded(result, steps[i]!.policy, used, `${where}, layer ${i}`)
          }
          if (s.expect !== undefined) matches(results[0], s.expect, where)
          for (const [i, expected] of (s.expectLayers ?? []).entries())
            matches(results[i], expected, `${where}, layer ${i}`)
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
}

/** Cases that hold only through a limiter: its local deny cache (on, as by default) and the way it passes refunds down. */
function limiterCases(makeStore: StoreFactory): ConformanceCase[] {
  const policies = {
    slots: { algorithm: 'concurrency', limit: 3, timeout: '10s' },
    once: { algorithm: 'fixed-window', limit: 1, window: '1s' },
  } as const
  const withLimiter =
    (body: (limiter: Limiter<keyof typeof policies>, advance: (ms: number) => void) => Promise<void>) =>
    async () => {
      let clock = T0
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
  return [
    {
      name: 'through a limiter, deny cache on: a refund of 1 after three consumes of a concurrency policy frees exactly one slot',
      run: withLimiter(async (limiter) => {
        const where = 'concurrency refund'
        for (let i = 0; i < 3; i++) matches(await limiter.consume('slots', 'k'), { allowed: true }, where)
        matches(await limiter.consume('slots', 'k'), { allowed: false, remaining: 0 }, `${where}, 4th`)
        await limiter.refund('slots', 'k', 1)
        matches(
          await limiter.peek('slots', 'k'),
          { allowed: true, remaining: 1 },
          `${where}, peek after refund`,
        )
        matches(
          await limiter.consume('slots', 'k'),
          { allowed: true, remaining: 0 },
          `${where}, after refund`,
        )
        matches(await limiter.consume('slots', 'k'), { allowed: false, remaining: 0 }, `${where}, full again`)
      }),
    },
    {
      name: "through a limiter, deny cache on: the deny cache keeps the store's clock, denied until its retry time, admitted at it",
      run: withLimiter(async (limiter, advance) => {
        const where = 'deny cache clock'
        matches(await limiter.consume('once', 'k'), { allowed: true }, where)
        matches(await limiter.consume('once', 'k'), { allowed: false, retryAfterMs: 1000 }, `${where}, at 0`)
        advance(999)
        matches(await limiter.consume('once', 'k'), { allowed: false, retryAfterMs: 1 }, `${where}, at 999`)
        advance(1)
        matches(await limiter.consume('once', 'k'), { allowed: true, remaining: 0 }, `${where}, at 1000`)
        matches(await limiter.consume('once', 'k'), { allowed: false, retryAfterMs: 1000 }, `${where}, again`)
      }),
    },
  ]
}

/**
 * The conformance cases for the stores `makeStore` builds, for any test runner.
 * @example
 * import { test } from 'node:test'
 * import { conformanceCases } from 'sluice/store'
 * for (const c of conformanceCases((now) => myStore({ now }))) test(c.name, c.run)
 */
export function conformanceCases(
  makeStore: StoreFactory,
  options: ConformanceOptions = {},
): ConformanceCase[] {
  const cases = options.throughLimiter === false ? [] : limiterCases(makeStore)
  cases.push(...recordCases(makeStore, options.records !== false))
  for (const vector of options.vectors ?? allVectors)
    cases.push({ name: vector.name, run: () => runVector(makeStore, vector) })
  return cases
}

/** Run every case, one after another, and list the ones that failed (an empty list: the store conforms). */
export async function checkStore(
  makeStore: StoreFactory,
  options: ConformanceOptions = {},
): Promise<{ passed: number; failed: { name: string; error: unknown }[] }> {
  const failed: { name: string; error: unknown }[] = []
  let passed = 0
  for (const c of conformanceCases(makeStore, options)) {
    try {
      await c.run()
      passed++
    } catch (error) {
      failed.push({ name: c.name, error })
    }
  }
  return { passed, failed }
}
