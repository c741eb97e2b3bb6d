// Waiting for capacity, reserve/settle and throttle, attached to a limiter by createLimiter. Built
// on the limiter's public methods plus one store capability: the forced charge of `settle`.
import { parseDuration } from '../duration.js'
import { InvalidOptionsError } from '../errors.js'
import type { Limiter, WaitingMethod } from '../limiter/types.js'
import { checkKnownKeys, isOptionsObject, keysOf } from '../options.js'
import { type Charge, reserve } from './reserve.js'
import { throttle } from './throttle.js'
import type { WaitingOptions } from './types.js'
import { type WaitBounds, WaitQueues } from './wait.js'

export type { Charge } from './reserve.js'
export type * from './types.js'

const OPTION_KEYS = keysOf<WaitingOptions>({
  maxWaitersPerKey: true,
  maxWaiters: true,
  concurrencyRecheck: true,
})

/** The `waiting` option of createLimiter, checked once. */
export function waitBounds(options: WaitingOptions | undefined): WaitBounds {
  if (options === undefined) return { maxWaitersPerKey: 1000, maxWaiters: 10_000, concurrencyRecheckMs: 100 }
  if (!isOptionsObject(options))
    throw new InvalidOptionsError(
      'createLimiter: waiting must be { maxWaitersPerKey?, maxWaiters?, concurrencyRecheck? }',
    )
  checkKnownKeys('createLimiter waiting', options, OPTION_KEYS)
  const whole = (value: number | undefined, name: string, fallback: number): number => {
    if (value === undefined) return fallback
    if (!Number.isSafeInteger(value) || value < 1)
      throw new InvalidOptionsError(
        `createLimiter: waiting.${name} must be a whole number >= 1, got ${String(value)}`,
      )
    return value
  }
  return {
    maxWaitersPerKey: whole(options.maxWaitersPerKey, 'maxWaitersPerKey', 1000),
    maxWaiters: whole(options.maxWaiters, 'maxWaiters', 10_000),
    concurrencyRecheckMs:
      options.concurrencyRecheck === undefined
        ? 100
        : parseDuration(options.concurrencyRecheck, 'waiting.concurrencyRecheck'),
  }
}

/** The methods createLimiter adds to a limiter (see Limiter.wait, .reserve, .throttle). */
export function createWaiting<Name extends string>(
  limiter: Omit<Limiter<Name>, WaitingMethod>,
  charge: Charge,
  bounds: WaitBounds,
) {
  const queues = new WaitQueues(limiter, bounds)
  return {
    queues,
    wait: queues.wait.bind(queues),
    reserve: ((a: never, b?: never, c?: never) =>
      reserve(limiter, charge, a, b, c)) as Limiter<Name>['reserve'],
    throttle: ((policy: Name, fn: never, options: never) =>
      throttle(queues.wait.bind(queues) as never, policy, fn, options)) as Limiter<Name>['throttle'],
  }
}
