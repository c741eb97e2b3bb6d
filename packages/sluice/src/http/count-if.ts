// Counting by outcome per rule: a rule's `countIf(status)` says, once the response has ended,
// whether the units that rule charged stay spent. The request is charged on arrival like any other
// (a key over its limit is refused before the handler runs); the units of each rule whose countIf
// says no go back with the store's refund, the other rules keep theirs.
import { InvalidOptionsError } from '../errors.js'
import type { Check, Decision } from '../limiter.js'
import { type CountingContext, markCounted, type ResponseCounter } from './outcome-counting.js'
import type { HttpOutcome, HttpRequestInfo } from './types.js'

/** Whether a response of this status counts against the rule's budget. */
export type CountIf = (status: number) => boolean

/** One rule's share of a request's charge, given back unless its countIf says the response counts. */
export interface ConditionalCharge {
  readonly policy: string
  readonly key: string
  readonly cost: number
  readonly countIf: CountIf
}

/** The status countIf sees for a response the client did not wait for (the connection closed first). */
export const ABORTED_STATUS = 0

/** `countIf` as written on a rule at `where`; throws `InvalidOptionsError` when it is not a function. */
export function validateCountIf(value: unknown, where: string): CountIf | undefined {
  if (value === undefined) return undefined
  if (typeof value !== 'function')
    throw new InvalidOptionsError(
      `${where}.countIf: a function (status) => boolean, such as (status) => status === 401 to count only failed logins`,
    )
  return value as CountIf
}

/** The refusal of a route that has both a rule's countIf and the skip options. */
export function countIfWithSkipOptions(where: string): InvalidOptionsError {
  return new InvalidOptionsError(
    `${where}: a rule with countIf and skipFailedRequests or skipSuccessfulRequests on the same route would both decide what is given back; use countIf on each rule instead (skipSuccessfulRequests is countIf: (status) => status >= 400)`,
  )
}

/**
 * An admitted request's conditional charges, settled when the adapter reports the response's end
 * (once; later calls are ignored). A charge is not given back on a layer whose units have already
 * expired (its reset has passed) or that the store-failure fallback decided (nothing was stored).
 */
class ConditionalCount implements ResponseCounter {
  #ended = false
  constructor(
    private readonly context: CountingContext,
    private readonly request: HttpRequestInfo,
    private readonly charges: readonly ConditionalCharge[],
    private readonly charged: readonly Check[],
    private readonly layers: readonly Decision[],
    private readonly decidedAt: number,
  ) {}

  ended(statusCode: number, _raw: unknown, completed: boolean): void {
    if (this.#ended) return
    this.#ended = true
    const status = completed ? statusCode : ABORTED_STATUS
    const elapsedMs = this.context.now() - this.decidedAt
    for (const charge of this.charges) {
      let counts: boolean
      try {
        counts = charge.countIf(status)
      } catch (error) {
        this.#failed(error)
        continue
      }
      if (counts) continue
      const i = this.charged.findIndex((c) => c.policy === charge.policy && c.key === charge.key)
      const layer = this.layers[i]
      if (layer === undefined || layer.degraded === true || elapsedMs >= layer.resetMs) continue
      this.context.limiter
        .refund(charge.policy, charge.key, charge.cost)
        .catch((error: unknown) => this.#failed(error))
    }
  }

  #failed(error: unknown): void {
    const { method, route } = this.request
    this.context.logger.error({ err: error, method, route }, 'sluice: counting a response failed')
  }
}

/**
 * Mark `outcome` to settle `charges` after its response, when the request was admitted: a refused
 * request took nothing, so it gives nothing back.
 */
export function countIfAfterResponse(
  context: CountingContext,
  charges: readonly ConditionalCharge[],
  request: HttpRequestInfo,
  charged: readonly Check[],
  decision: Decision & { readonly results?: readonly Decision[] },
  outcome: HttpOutcome,
): HttpOutcome {
  if (outcome.action !== 'continue' || !decision.allowed) return outcome
  const layers = decision.results ?? [decision]
  return markCounted(outcome, new ConditionalCount(context, request, charges, charged, layers, context.now()))
}
