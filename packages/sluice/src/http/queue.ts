// The adapters' `queue: { maxWaitMs, maxQueued }`: a request that would be refused waits for
// capacity instead (limiter.wait) when it can fit within `maxWaitMs`, the express-slow-down use
// case. Past `maxQueued` requests waiting at once (or the limiter's per-key bound) a request gets
// the plain answer at once: the queue never grows without bound.
import { InvalidOptionsError, SluiceError } from '../errors.js'
import type { Check, Decision, LayeredDecision, Limiter } from '../limiter.js'
import { checkKnownKeys, isOptionsObject, keysOf } from '../options.js'

export interface QueueOptions {
  /** The longest a request is queued, in ms. A request that cannot fit within it is answered 429 at once. */
  maxWaitMs: number
  /** Requests queued at once by this middleware, all keys together. Default 1,000. */
  maxQueued?: number
}

const QUEUE_KEYS = keysOf<QueueOptions>({ maxWaitMs: true, maxQueued: true })

export interface RequestQueue {
  consume(checks: readonly Check[]): Promise<Decision | LayeredDecision>
  /** Requests queued now. */
  readonly size: number
}

/** The queue for `options.queue`, checked once; undefined without one. */
export function requestQueue(limiter: Limiter, options: QueueOptions | undefined): RequestQueue | undefined {
  if (options === undefined) return undefined
  if (!isOptionsObject(options))
    throw new InvalidOptionsError('createHttpLimiter: queue must be { maxWaitMs, maxQueued? }')
  checkKnownKeys('createHttpLimiter: queue', options, QUEUE_KEYS)
  const { maxWaitMs, maxQueued = 1_000 } = options
  if (typeof maxWaitMs !== 'number' || !Number.isSafeInteger(maxWaitMs) || maxWaitMs < 0)
    throw new InvalidOptionsError(
      `createHttpLimiter: queue.maxWaitMs must be a whole number of ms >= 0, got ${String(maxWaitMs)}`,
    )
  if (!Number.isSafeInteger(maxQueued) || maxQueued < 0)
    throw new InvalidOptionsError(
      `createHttpLimiter: queue.maxQueued must be a whole number >= 0, got ${String(maxQueued)}`,
    )
  let queued = 0
  const plain = (checks: readonly Check[]) =>
    checks.length === 1
      ? limiter.consume(checks[0]!.policy, checks[0]!.key, { cost: checks[0]!.cost ?? 1 })
      : limiter.consume(checks)
  return {
    get size() {
      return queued
    },
    async consume(checks) {
      if (queued >= maxQueued) return plain(checks)
      queued++
      try {
        const d =
          checks.length === 1
            ? await limiter.wait(checks[0]!.policy, checks[0]!.key, { cost: checks[0]!.cost ?? 1, maxWaitMs })
            : await limiter.wait(checks, { maxWaitMs })
        // To the client a request that could not wait is refused by the limit, like any other.
        if (d.reason === 'timeout') d.reason = 'limit'
        return d
      } catch (error) {
        // The limiter's own bound on waiters of one key: answer now, as without a queue.
        if (error instanceof SluiceError && error.code === 'SLUICE_TOO_MANY_WAITERS') return plain(checks)
        throw error
      } finally {
        queued--
      }
    },
  }
}
