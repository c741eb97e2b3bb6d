// throttle: wrap an async function so its calls keep to a policy shared by every process on the
// store. A call first takes one of this throttle's `concurrency` slots (FIFO), then waits for the
// limit (wait(), so it shares the key's queue), then runs; what the function throws passes through.
import { InvalidOptionsError, RateLimitedError, ThrottleStoppedError, WaitAbortedError } from '../errors.js'
import type { AcquireDecision } from '../limiter/types.js'
import type { Throttled, ThrottleOptions, WaitOptions } from './types.js'

type WaitFn = (policy: string, key: string, options: WaitOptions) => Promise<AcquireDecision>

export function throttle<A extends unknown[], R>(
  wait: WaitFn,
  policy: string,
  fn: (...args: A) => Promise<R>,
  options: ThrottleOptions<A>,
): Throttled<A, R> {
  if (typeof fn !== 'function') throw new InvalidOptionsError('throttle: pass the async function to wrap')
  if (options === null || typeof options !== 'object')
    throw new InvalidOptionsError('throttle: pass { key, cost?, maxWaitMs?, concurrency? }')
  const { key, cost, maxWaitMs, concurrency = Number.POSITIVE_INFINITY } = options
  if (typeof key !== 'string' && typeof key !== 'function')
    throw new InvalidOptionsError('throttle: key must be a string or a function of the call arguments')
  if (concurrency !== Number.POSITIVE_INFINITY && (!Number.isSafeInteger(concurrency) || concurrency < 1))
    throw new InvalidOptionsError(
      `throttle: concurrency must be a whole number >= 1, got ${String(concurrency)}`,
    )
  const stopper = new AbortController()
  let running = 0
  /** Calls waiting for a slot, in order. */
  const slots: { start: () => void; fail: (error: unknown) => void }[] = []
  let waitingForLimit = 0

  const stoppedError = () => new ThrottleStoppedError(`throttle ${policy}: stopped; the call was not made`)

  function takeSlot(): Promise<void> {
    if (running < concurrency) {
      running++
      return Promise.resolve()
    }
    return new Promise((start, fail) => slots.push({ start, fail }))
  }
  function freeSlot(): void {
    const next = slots.shift()
    // The slot passes straight to the next call: `running` stays the same.
    if (next !== undefined) next.start()
    else running--
  }

  async function call(...args: A): Promise<R> {
    if (stopper.signal.aborted) throw stoppedError()
    const k = typeof key === 'function' ? key(...args) : key
    const units = typeof cost === 'function' ? cost(...args) : cost
    await takeSlot()
    try {
      const waitOptions: WaitOptions = { signal: stopper.signal }
      if (units !== undefined) waitOptions.cost = units
      if (maxWaitMs !== undefined) waitOptions.maxWaitMs = maxWaitMs
      let d: AcquireDecision
      waitingForLimit++
      try {
        d = await wait(policy, k, waitOptions)
      } catch (error) {
        throw error instanceof WaitAbortedError && stopper.signal.aborted ? stoppedError() : error
      } finally {
        waitingForLimit--
      }
      if (!d.allowed)
        throw new RateLimitedError(
          `throttle ${policy}: the call cannot run within ${maxWaitMs ?? 'the policy window'} ms (${d.reason ?? 'limit'}; retry after ${d.retryAfterMs} ms)`,
          d,
        )
      try {
        return await fn(...args)
      } finally {
        await d.lease?.release()
      }
    } finally {
      freeSlot()
    }
  }

  const throttled = call as Throttled<A, R>
  Object.defineProperties(throttled, {
    stop: {
      value: () => {
        stopper.abort()
        for (const queued of slots.splice(0)) queued.fail(stoppedError())
      },
    },
    queued: { get: () => slots.length + waitingForLimit },
    running: { get: () => running - waitingForLimit },
  })
  return throttled
}
