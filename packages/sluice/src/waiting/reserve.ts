// reserve/settle: consume an estimate now (an ordinary consume, so it never takes a key past its
// limit), then settle the true cost once it is known: a refund when it was less, a forced charge of
// the difference when it was more (the work is done; later requests pay for the overshoot).
import { randomUUID } from 'node:crypto'
import { parseDuration } from '../duration.js'
import {
  InvalidCostError,
  InvalidOptionsError,
  ReservationExpiredError,
  ReservationSettledError,
  UnknownPolicyError,
} from '../errors.js'
import type { Check, Decision, LayeredDecision, Limiter, WaitingMethod } from '../limiter/types.js'
import type { ResolvedPolicy } from '../policy.js'
import type { LayeredReserveDecision, ReserveDecision, ReserveOptions, Settlement } from './types.js'

/** A forced charge of the store (commit whether it fits or not); the limiter supplies it. */
export type Charge = (checks: readonly Required<Check>[]) => Promise<void>

export function reserve<Name extends string>(
  limiter: Omit<Limiter<Name>, WaitingMethod>,
  charge: Charge,
  a: Name | readonly Check<Name>[],
  b?: string | ReserveOptions,
  c?: ReserveOptions,
): Promise<ReserveDecision | LayeredReserveDecision> {
  try {
    const layered = Array.isArray(a)
    const options = (layered ? b : c) as ReserveOptions | undefined
    if (options !== undefined && (typeof options !== 'object' || options === null))
      throw new InvalidOptionsError('reserve: options must be { cost?, settleWithin? }')
    const checks: Required<Check<Name>>[] = layered
      ? (a as readonly Check<Name>[]).map((check) => ({
          policy: check?.policy,
          key: check?.key,
          cost: check?.cost ?? 1,
        }))
      : [{ policy: a as Name, key: b as string, cost: options?.cost ?? 1 }]
    if (checks.length === 0)
      throw new InvalidOptionsError('reserve: pass a non-empty array of { policy, key, cost? }')
    const policies = checks.map((check) => policyOf(limiter, check.policy))
    const odd = policies.find((p) => p.algorithm === 'concurrency' || p.syncEveryMs !== undefined)
    if (odd !== undefined)
      throw new InvalidOptionsError(
        `reserve: policy ${odd.name} is ${odd.algorithm === 'concurrency' ? 'a concurrency policy; use acquire and release' : 'hybrid; reserve needs an exact policy'}`,
      )
    const settleWithinMs =
      options?.settleWithin === undefined
        ? Math.min(...policies.map((p) => p.windowMs))
        : parseDuration(options.settleWithin, 'reserve settleWithin')
    const decided: Promise<Decision | LayeredDecision> = layered
      ? limiter.consume(checks)
      : limiter.consume(checks[0]!.policy, checks[0]!.key, { cost: checks[0]!.cost })
    return decided.then((d) => {
      const settlement = settlementFor(limiter, charge, d, checks, Date.now() + settleWithinMs)
      return Object.assign(d, settlement)
    })
  } catch (error) {
    return Promise.reject(error)
  }
}

function policyOf<Name extends string>(
  limiter: Omit<Limiter<Name>, WaitingMethod>,
  name: unknown,
): ResolvedPolicy {
  if (typeof name !== 'string' || !Object.hasOwn(limiter.policies, name))
    throw new UnknownPolicyError(
      `unknown policy ${JSON.stringify(name)}; configured: ${Object.keys(limiter.policies).join(', ')}`,
    )
  return (limiter.policies as Record<string, ResolvedPolicy>)[name]!
}

function settlementFor<Name extends string>(
  limiter: Omit<Limiter<Name>, WaitingMethod>,
  charge: Charge,
  d: Decision,
  checks: readonly Required<Check<Name>>[],
  settleBy: number,
): Settlement {
  const id = randomUUID()
  let state: 'open' | 'settling' | 'settled' = d.allowed ? 'open' : 'settled'
  return {
    id,
    estimate: checks[0]!.cost,
    settleBy,
    async settle(actual: number) {
      if (!d.allowed)
        throw new InvalidOptionsError(
          'settle: the reservation was denied; nothing was charged, nothing to settle',
        )
      if (typeof actual !== 'number' || !Number.isSafeInteger(actual) || actual < 0)
        throw new InvalidCostError(`settle: actual must be a whole number >= 0, got ${String(actual)}`)
      if (state !== 'open') throw new ReservationSettledError(`settle: reservation ${id} is already settled`)
      if (Date.now() > settleBy)
        throw new ReservationExpiredError(
          `settle: reservation ${id} expired ${Date.now() - settleBy} ms ago; its estimate stays charged (raise settleWithin)`,
        )
      state = 'settling'
      try {
        const more = checks.filter((check) => actual > check.cost)
        const less = checks.filter((check) => actual < check.cost)
        await Promise.all([
          more.length === 0
            ? undefined
            : charge(
                more.map((check) => ({ policy: check.policy, key: check.key, cost: actual - check.cost })),
              ),
          ...less.map((check) => limiter.refund(check.policy, check.key, check.cost - actual)),
        ])
        state = 'settled'
      } catch (error) {
        // Nothing was settled for sure: the caller may try again.
        state = 'open'
        throw error
      }
    },
  }
}
