// Outcome counting: a request is charged when it arrives (so concurrent requests are still limited);
// once its response has ended, its route's rule looks at the outcome and either leaves the units
// spent or gives them back with the store's refund, on every layer the request was charged on.
// `skipFailedRequests` / `skipSuccessfulRequests` / `requestWasSuccessful` are one such rule. Only a
// route with a rule pays for any of this: its admitted outcomes carry a `CountedRequest`, which the
// adapter tells when the response has ended.
import { InvalidOptionsError } from '../errors.js'
import type { Check, Decision, LayeredDecision, Limiter } from '../limiter.js'
import { isPending } from '../store.js'
import type {
  HttpLogger,
  HttpOutcome,
  HttpRequestInfo,
  HttpResponseInfo,
  OutcomeCountingOptions,
} from './types.js'

/** What happens to a request's units once its response has ended. */
export type AfterResponse = 'keep' | 'give-back'

/** A response's end as an adapter saw it; `completed` is false when the connection closed first. */
export interface ResponseEnd extends HttpResponseInfo {
  readonly completed: boolean
}

/** From a request and its response's end, what happens to its units. */
export type OutcomeRule = (
  request: HttpRequestInfo,
  end: ResponseEnd,
) => AfterResponse | Promise<AfterResponse>

const KEEP: AfterResponse = 'keep'
const GIVE_BACK: AfterResponse = 'give-back'

/** express-rate-limit's default, kept: a status below 400 is a success. */
const statusBelow400 = (_request: HttpRequestInfo, response: HttpResponseInfo): boolean =>
  response.statusCode < 400

/**
 * The outcome rule of a route: its own options over the limiter-wide ones, field by field; undefined
 * when neither `skipFailedRequests` nor `skipSuccessfulRequests` is on (nothing is counted after the
 * response then). Throws `InvalidOptionsError` for a value of the wrong type in `own`.
 */
export function outcomeRule(
  own: OutcomeCountingOptions,
  where: string,
  limiterWide?: OutcomeCountingOptions,
): OutcomeRule | undefined {
  for (const name of ['skipFailedRequests', 'skipSuccessfulRequests'] as const) {
    const value = own[name]
    if (value !== undefined && typeof value !== 'boolean')
      throw new InvalidOptionsError(`${where}.${name}: true or false`)
  }
  if (own.requestWasSuccessful !== undefined && typeof own.requestWasSuccessful !== 'function')
    throw new InvalidOptionsError(
      `${where}.requestWasSuccessful: a function (request, response) => boolean, such as (req, res) => res.statusCode < 400`,
    )
  const skipFailed = own.skipFailedRequests ?? limiterWide?.skipFailedRequests ?? false
  const skipSuccessful = own.skipSuccessfulRequests ?? limiterWide?.skipSuccessfulRequests ?? false
  if (!skipFailed && !skipSuccessful) return undefined
  const wasSuccessful = own.requestWasSuccessful ?? limiterWide?.requestWasSuccessful ?? statusBelow400
  const verdict = (success: boolean): AfterResponse =>
    (success ? skipSuccessful : skipFailed) ? GIVE_BACK : KEEP
  return (request, end) => {
    // A response the client did not wait for failed, whatever its status says.
    if (!end.completed) return skipFailed ? GIVE_BACK : KEEP
    const success = wasSuccessful(request, end)
    return isPending(success) ? success.then((s) => verdict(Boolean(s))) : verdict(Boolean(success))
  }
}

/** The outcome's request, when its units are counted after the response. */
const COUNTED: unique symbol = Symbol('sluice.counted')

/** What an adapter tells when an admitted request's response has ended. */
export interface ResponseCounter {
  /** The response has ended (`completed`: sent whole; false: the connection closed first). Never throws. */
  ended(statusCode: number, raw: unknown, completed: boolean): void
}

/** The request an admitted outcome counts after its response, if its route counts by outcome. */
export function countedOf(outcome: HttpOutcome): ResponseCounter | undefined {
  return (outcome as { [COUNTED]?: ResponseCounter })[COUNTED]
}

/** `outcome`, marked to tell `counter` when its response has ended. */
export function markCounted(outcome: HttpOutcome, counter: ResponseCounter): HttpOutcome {
  return Object.assign(outcome, { [COUNTED]: counter })
}

/** What a counted request gives back through: the core's limiter, logger and clock. */
export interface CountingContext {
  readonly limiter: Limiter
  readonly logger: HttpLogger
  readonly now: () => number
}

/**
 * An admitted request whose units wait on its response. The adapter calls `ended` once the response
 * has ended (later calls are ignored); the rule decides, and a give-back refunds each layer's units,
 * except a layer whose units have already expired (its reset has passed: giving back then would free
 * units of a later window) or that the store-failure fallback decided (nothing of it is stored).
 */
export class CountedRequest implements ResponseCounter {
  #ended = false
  constructor(
    private readonly context: CountingContext,
    private readonly rule: OutcomeRule,
    private readonly request: HttpRequestInfo,
    private readonly charged: readonly Check[],
    private readonly layers: readonly Decision[],
    private readonly decidedAt: number,
  ) {}

  /** The response has ended (`completed`: sent whole; false: the connection closed first). Never throws. */
  ended(statusCode: number, raw: unknown, completed: boolean): void {
    if (this.#ended) return
    this.#ended = true
    let after: AfterResponse | Promise<AfterResponse>
    try {
      after = this.rule(this.request, { statusCode, raw, completed })
    } catch (error) {
      this.#failed(error)
      return
    }
    if (isPending(after))
      after.then(
        (s) => this.#apply(s),
        (error: unknown) => this.#failed(error),
      )
    else this.#apply(after)
  }

  #apply(after: AfterResponse): void {
    if (after !== GIVE_BACK) return
    const elapsedMs = this.context.now() - this.decidedAt
    for (let i = 0; i < this.charged.length; i++) {
      const check = this.charged[i]!
      const layer = this.layers[i]
      if (layer === undefined || layer.degraded === true || elapsedMs >= layer.resetMs) continue
      this.context.limiter
        .refund(check.policy, check.key, check.cost ?? 1)
        .catch((error: unknown) => this.#failed(error))
    }
  }

  #failed(error: unknown): void {
    const { method, route } = this.request
    this.context.logger.error({ err: error, method, route }, 'sluice: counting a response failed')
  }
}

/**
 * Mark `outcome` (of `decision` on `charged`) as counted after its response, when `rule` is set and
 * the request was admitted and charged: a refused request took nothing, so it gives nothing back.
 */
export function countAfterResponse(
  context: CountingContext,
  rule: OutcomeRule | undefined,
  request: HttpRequestInfo,
  charged: () => readonly Check[],
  decision: Decision | LayeredDecision,
  outcome: HttpOutcome,
): HttpOutcome {
  if (rule === undefined || outcome.action !== 'continue' || !decision.allowed) return outcome
  const layers = (decision as Partial<LayeredDecision>).results ?? [decision]
  return markCounted(outcome, new CountedRequest(context, rule, request, charged(), layers, context.now()))
}
