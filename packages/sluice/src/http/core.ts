// The HTTP core every adapter shares: from a framework-neutral request to "continue with these
// headers" or "answer with this response". Knows no framework and no store. Its steps, one file each:
// options.ts (validated once), checks.ts (request -> checks), outcome.ts (decision -> outcome); this
// file spends the checks on the limiter and hands the outcome over.
import type { Decision, LayeredDecision } from '../limiter.js'
import { isPending, type MaybePromise } from '../store.js'
import { checksReader, RequestChecks, type RequestRead } from './checks.js'
import { countIfAfterResponse } from './count-if.js'
import { defaultLogger, resolveHttpOptions } from './options.js'
import { failureOutcome, outcomeWriter } from './outcome.js'
import { type CountingContext, countAfterResponse } from './outcome-counting.js'
import type { HttpLimiterOptions, HttpOutcome, HttpRequestInfo, RouteOptions } from './types.js'

/** An HTTP core; `Raw` is the framework request its callbacks see as `request.raw` (see `HttpRequestInfo`). */
export interface HttpLimiter<Raw = unknown> {
  /**
   * Decide one request. Never throws and never rejects: failures become a 500 (or, with
   * `onError: 'open'`, a pass). Returns the outcome directly when no I/O was needed (memory store,
   * one layer, no tier look-up), a promise otherwise; `await` works on both.
   */
  check(request: HttpRequestInfo<Raw>, routeOptions?: RouteOptions<Raw>): HttpOutcome | Promise<HttpOutcome>
  /** Validate per-route options now (at route registration) rather than on the first request. Returns them. */
  prepare(routeOptions: RouteOptions<Raw>, where?: string): RouteOptions<Raw>
  readonly options: Readonly<HttpLimiterOptions<Raw>>
}

/**
 * What an adapter does with a request's outcome. `a` and `b` are its per-request values (Fastify's
 * reply and `next`, Express's response and `next`), passed along so that no closure is made per
 * request. `check` is the delivery whose receiver returns the outcome itself.
 */
export type OutcomeReceiver<A, B, R = void> = (outcome: HttpOutcome, a: A, b: B) => R

/**
 * How every adapter gets a request's outcome: `receive(outcome, a, b)`, called exactly once, at once
 * when nothing waits (the memory store), otherwise from the core's own continuation of the store's
 * promise, so a request that waits costs the HTTP side no promise of its own. Every failure on the
 * way is an outcome (a 500, or a pass with `onError: 'open'`); only what `receive` throws reaches the
 * caller. Returns what `receive` returns, or a promise of it.
 */
export type Delivery = <A, B, R>(
  request: HttpRequestInfo,
  routeOptions: RouteOptions | undefined,
  receive: OutcomeReceiver<A, B, R>,
  a: A,
  b: B,
) => R | Promise<R>

/** The delivery of each core `createHttpLimiter` made; any other core is delivered through its `check`. */
const deliveries = new WeakMap<HttpLimiter, Delivery>()

/** The receiver of `check` (and of an adapter that awaits): the outcome is the answer. */
export const returnOutcome = (outcome: HttpOutcome): HttpOutcome => outcome

/** The options of a plain cost-1 check, shared: the limiter only reads them. */
const COST_ONE: { readonly cost: number } = Object.freeze({ cost: 1 })

/**
 * Build the HTTP core over a limiter. Options are validated here, once. Name the framework's request
 * type (`createHttpLimiter<Request>(...)` for Express) to type `request.raw` in the callbacks; the
 * adapters do it for options handed to them directly.
 * @example
 * const http = createHttpLimiter({ limiter, rules: [{ policy: 'perIp', key: 'ip' }, { policy: 'perUser', key: 'user' }] })
 */
export function createHttpLimiter<Raw = unknown>(options: HttpLimiterOptions<Raw>): HttpLimiter<Raw> {
  return createCore(options as HttpLimiterOptions)
}

/** `createHttpLimiter` over the framework-neutral types: the core reads `raw` only through user callbacks. */
function createCore(options: HttpLimiterOptions): HttpLimiter {
  const resolved = resolveHttpOptions(options)
  const { limiter, queue, rules } = resolved
  const readRequest = checksReader(resolved)
  const outcomes = outcomeWriter(resolved)
  const counting: CountingContext = { limiter, logger: resolved.logger, now: resolved.now }

  /** Hand a request's checks to the limiter (or to the queue): the decision, or a promise of it. */
  function spend(checks: RequestChecks): MaybePromise<Decision | LayeredDecision> {
    if (queue !== undefined) return queue.consume(checks.list())
    if (checks.all !== undefined) return limiter.decide(checks.all)
    // One check: the plain decision, synchronous when the chain answers in-process (the memory store).
    const cost = checks.firstCost
    return limiter.decide(checks.firstPolicy, checks.firstKey, cost === 1 ? COST_ONE : { cost })
  }

  /**
   * The outcome of a decision; on a route that counts by outcome (a rule's countIf, or the skip
   * options: never both, see rules.ts), marked to settle after the response.
   */
  function ofDecision(read: RequestChecks, decision: Decision | LayeredDecision): HttpOutcome {
    const outcome = outcomes.ofDecision(read, decision)
    if (read.conditional !== undefined)
      return countIfAfterResponse(counting, read.conditional, read.request, read.list(), decision, outcome)
    if (read.counting === undefined) return outcome
    return countAfterResponse(counting, read.counting, read.request, () => read.list(), decision, outcome)
  }

  /** The outcome of a request read, into `receive`: now, or from the core's one continuation of the decision. */
  function spendAndDeliver<A, B, R>(
    request: HttpRequestInfo,
    read: RequestRead,
    receive: OutcomeReceiver<A, B, R>,
    a: A,
    b: B,
  ): R | Promise<R> {
    if (!(read instanceof RequestChecks)) return receive(read, a, b)
    let decision: MaybePromise<Decision | LayeredDecision>
    try {
      decision = spend(read)
    } catch (error) {
      return receive(outcomes.ofFailure(request, error), a, b)
    }
    if (isPending(decision))
      return decision.then(
        (d) => receive(ofDecision(read, d), a, b),
        (error: unknown) => receive(outcomes.ofFailure(request, error), a, b),
      )
    return receive(ofDecision(read, decision), a, b)
  }

  /** See `Delivery`. A named function: bench/budgets/adapter-allocations.mjs tells the core's frames by it. */
  function deliver<A, B, R>(
    request: HttpRequestInfo,
    routeOptions: RouteOptions | undefined,
    receive: OutcomeReceiver<A, B, R>,
    a: A,
    b: B,
  ): R | Promise<R> {
    let read: RequestRead | Promise<RequestRead>
    try {
      read = readRequest(request, routeOptions)
    } catch (error) {
      return receive(outcomes.ofFailure(request, error), a, b)
    }
    // Only a tier look-up makes reading the request wait.
    if (isPending(read))
      return read.then(
        (r) => spendAndDeliver(request, r, receive, a, b),
        (error: unknown) => receive(outcomes.ofFailure(request, error), a, b),
      )
    return spendAndDeliver(request, read, receive, a, b)
  }

  const core: HttpLimiter = {
    options,
    prepare(routeOptions, where = 'route options') {
      rules.prepare(routeOptions, where)
      return routeOptions
    },
    check: (request, routeOptions) => deliver(request, routeOptions, returnOutcome, undefined, undefined),
  }
  deliveries.set(core, deliver)
  return core
}

/**
 * The delivery of a core (see `Delivery`): its own when `createHttpLimiter` made it; for any other
 * object with the public members, one built on its `check`, where a throw or a rejection, against
 * `check`'s contract, is answered as the core's own failures are (logged, then a 500 or a pass).
 */
export function deliveryOf(http: HttpLimiter): Delivery {
  const own = deliveries.get(http)
  if (own !== undefined) return own
  const logger = http.options.logger ?? defaultLogger
  const onError = http.options.onError
  return (request, routeOptions, receive, a, b) => {
    let outcome: HttpOutcome | Promise<HttpOutcome>
    try {
      outcome = http.check(request, routeOptions)
    } catch (error) {
      return receive(failureOutcome(logger, onError, request, error), a, b)
    }
    if (isPending(outcome))
      return outcome.then(
        (o) => receive(o, a, b),
        (error: unknown) => receive(failureOutcome(logger, onError, request, error), a, b),
      )
    return receive(outcome, a, b)
  }
}

/** Adapters accept either a ready core or its options, typed with their framework's request. */
export function asHttpLimiter<Raw>(value: HttpLimiter<Raw> | HttpLimiterOptions<Raw>): HttpLimiter {
  return typeof (value as HttpLimiter<Raw> | undefined)?.check === 'function'
    ? (value as unknown as HttpLimiter)
    : createCore(value as HttpLimiterOptions)
}
