// Decision -> outcome: what a request gets back. An admitted request continues with the rate-limit
// headers; a refused one gets a 429 (503 when the store is unavailable) with its body, or what
// `onLimited` returns instead; shadow mode continues either way. Refusals that are not a rate limit
// (403 deny, 400 unknown client, 500 failure) are plain JSON answers.
import type { Decision, LayeredDecision } from '../limiter.js'
import { DENIED_MESSAGE, rateLimitBody } from './headers.js'
import type { LimitedShorthand } from './limited.js'
import type { ResolvedHttpOptions } from './options.js'
import type { DecisionInfo, HttpLogger, HttpOutcome, HttpRequestInfo, HttpResponseSpec } from './types.js'

/** A plain pass: no limit applied, nothing to add to the response. */
export function pass(): HttpOutcome {
  return { action: 'continue', headers: {} }
}

/** A refusal that is not a rate limit (403 deny list, 400 unknown client, 500 limiter failure). */
export function refusal(status: number, error: string, message: string): HttpOutcome {
  return {
    action: 'respond',
    status,
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ error, message }),
  }
}

/**
 * The outcome of a failure anywhere on a request's way (a key callback, a tier resolver with
 * `onError: 'fail'`, the store, `onLimited`): logged, then a 500, or a pass with `onError: 'open'`.
 */
export function failureOutcome(
  logger: HttpLogger,
  onError: 'fail' | 'open' | undefined,
  request: HttpRequestInfo,
  error: unknown,
): HttpOutcome {
  logger.error({ err: error, method: request.method, route: request.route }, 'sluice: rate limiting failed')
  if (onError === 'open') return pass()
  return refusal(500, 'rate_limiter_error', 'The rate limiter failed; the error is in the server log.')
}

/** What the outcome of a decision names besides the decision: the request, its route id and tier. */
export interface DecidedRequest {
  readonly request: HttpRequestInfo
  readonly routeId: string
  readonly tier: string | undefined
  /** The `message` / `statusCode` that answer a rate-limit refusal of this request. */
  readonly limited: LimitedShorthand | undefined
}

export interface OutcomeWriter {
  /** The outcome of a decision. Never throws: a failing `onLimited` is answered as a failure. */
  ofDecision(decided: DecidedRequest, decision: Decision | LayeredDecision): HttpOutcome
  /** The outcome of a failure (logged). */
  ofFailure(request: HttpRequestInfo, error: unknown): HttpOutcome
}

/** The outcomes of one HTTP core, with its header families, body format, shadow mode and callbacks. */
export function outcomeWriter(resolved: ResolvedHttpOptions): OutcomeWriter {
  const { options, settings, logger, now, writeHeaders } = resolved
  const { shadow, onError } = settings
  const bodyOptions = { storeUnavailableStatus: settings.storeUnavailableStatus }

  function notify(info: DecisionInfo): void {
    try {
      options.onDecision?.(info)
    } catch {
      // A broken listener must never break a request.
    }
  }

  function outcomeOf(decided: DecidedRequest, decision: Decision | LayeredDecision): HttpOutcome {
    const { request, routeId, tier } = decided
    const headers = writeHeaders(decision, now())
    if (options.onDecision !== undefined) notify({ request, route: routeId, tier, decision, shadow })
    if (decision.allowed) return { action: 'continue', headers, decision }
    if (shadow) {
      delete headers['Retry-After']
      const policy = (decision as LayeredDecision).deniedBy ?? decision.policy
      logger.warn({ route: routeId, policy, key: decision.key }, 'sluice: shadow mode would refuse')
      return { action: 'continue', headers, decision, wouldDeny: true }
    }
    // A deny list of the policy: the HTTP core's 403 for a denied client, not a rate limit.
    if (decision.reason === 'denied') return { ...refusal(403, 'forbidden', DENIED_MESSAGE), decision }
    // A `closed` policy whose store failed: 503 (or 429) with Retry-After, not a plain 429.
    const body = rateLimitBody(decision, settings.body, bodyOptions)
    // The shorthands speak for rate limits; a store that failed keeps its own answer (503 or
    // storeUnavailableStatus), which clients tell apart from a limit.
    const shorthand = decision.reason === 'store_unavailable' ? undefined : decided.limited
    const response: HttpResponseSpec = {
      status: shorthand?.status ?? body.status,
      headers: { ...headers, 'Content-Type': shorthand?.body?.contentType ?? body.contentType },
      body: shorthand?.body?.text ?? body.body,
    }
    const custom = options.onLimited?.({ request, decision, headers, response })
    return { action: 'respond', decision, ...(custom ?? response) }
  }

  return {
    ofDecision(decided, decision) {
      try {
        return outcomeOf(decided, decision)
      } catch (error) {
        return failureOutcome(logger, onError, decided.request, error)
      }
    },
    ofFailure: (request, error) => failureOutcome(logger, onError, request, error),
  }
}
