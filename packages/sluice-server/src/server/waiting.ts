// The service's waiting endpoints: POST /v1/wait (a long poll, capped by `waiting.maxWait`),
// POST /v1/reserve and POST /v1/settle/{id}. Bodies are checked like /v1/check's (requests.ts); the
// config's `waiting:` section is config-waiting.ts.
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Decision, LayeredDecision, Settlement } from 'sluice'
import { parseDuration, SluiceError } from 'sluice'
import { isRecord } from './config-errors.js'
import { send } from './plumbing.js'
import { ClientError, type DecisionRequest, jsonBody, parseDecisionRequest } from './requests.js'
import { present, presentLayered } from './responses.js'
import type { ServiceContext } from './types.js'

interface Open {
  readonly settlement: Settlement
  /** Forgotten after this (ms): until then a late settle answers 410, not 404. */
  readonly forgetAt: number
}

/** How long an expired reservation is still known (to answer 410 rather than 404). */
const REMEMBER_EXPIRED_MS = 60_000
const reservationsOf = new WeakMap<ServiceContext, Map<string, Open>>()

function reservations(ctx: ServiceContext): Map<string, Open> {
  let map = reservationsOf.get(ctx)
  if (map === undefined) {
    map = new Map()
    reservationsOf.set(ctx, map)
  }
  return map
}

/** Drop reservations past their memory; oldest first (insertion order), stopping at the first live one. */
function sweep(map: Map<string, Open>, now: number): void {
  for (const [id, open] of map) {
    if (open.forgetAt > now) return
    map.delete(id)
  }
}

/** A body with the endpoint's own field taken out, for parseDecisionRequest's strict check. */
function without(body: unknown, field: string): { rest: unknown; value: unknown } {
  if (!isRecord(body) || !(field in body)) return { rest: body, value: undefined }
  const { [field]: value, ...rest } = body
  return { rest, value }
}

function presented(d: Decision | LayeredDecision, request: DecisionRequest): Record<string, unknown> {
  return request.layered
    ? presentLayered(d as LayeredDecision, request.entries)
    : present(d, request.entries[0]!)
}

/** POST /v1/wait and /v1/reserve. */
export async function waiting(
  ctx: ServiceContext,
  req: IncomingMessage,
  res: ServerResponse,
  path: '/v1/wait' | '/v1/reserve',
): Promise<void> {
  const body = await jsonBody(req)
  const settings = ctx.config.waiting
  if (path === '/v1/wait') {
    const { rest, value } = without(body, 'maxWaitMs')
    if (value !== undefined && (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0))
      throw new ClientError(
        'invalid_wait',
        `body: maxWaitMs must be a whole number of ms >= 0, got ${JSON.stringify(value)}`,
      )
    const request = parseDecisionRequest(ctx.config, rest)
    const maxWaitMs = Math.min(value ?? settings.maxWaitMs, settings.maxWaitMs)
    // A client that hangs up stops waiting: its place in the queue goes to the next one.
    const gone = new AbortController()
    const onClose = () => {
      if (!res.writableFinished) gone.abort()
    }
    res.once('close', onClose)
    const limiter = ctx.limiter
    try {
      const d = request.layered
        ? await limiter.wait(request.checks, { maxWaitMs, signal: gone.signal })
        : await limiter.wait(request.checks[0]!.policy, request.checks[0]!.key, {
            cost: request.checks[0]!.cost ?? 1,
            maxWaitMs,
            signal: gone.signal,
          })
      send(ctx, res, 200, JSON.stringify(presented(d, request)))
    } catch (error) {
      throw waitingError(error)
    } finally {
      res.off('close', onClose)
    }
    return
  }
  const { rest, value } = without(body, 'settleWithin')
  let settleWithin: number | undefined
  if (value !== undefined) {
    try {
      settleWithin = parseDuration(value, 'body: settleWithin')
    } catch (error) {
      throw new ClientError('invalid_duration', (error as Error).message)
    }
  }
  const request = parseDecisionRequest(ctx.config, rest)
  const open = reservations(ctx)
  const now = Date.now()
  sweep(open, now)
  if (open.size >= settings.maxReservations)
    throw new ClientError(
      'too_many_reservations',
      `${open.size} reservations are open (waiting.maxReservations ${settings.maxReservations}); settle some or retry later`,
      503,
    )
  const options = settleWithin === undefined ? {} : { settleWithin }
  const d = request.layered
    ? await ctx.limiter.reserve(request.checks, options)
    : await ctx.limiter.reserve(request.checks[0]!.policy, request.checks[0]!.key, {
        ...options,
        cost: request.checks[0]!.cost ?? 1,
      })
  const out = presented(d, request)
  if (d.allowed) {
    open.set(d.id, { settlement: d, forgetAt: d.settleBy + REMEMBER_EXPIRED_MS })
    out.reservation = d.id
    out.settleBy = d.settleBy
  }
  send(ctx, res, 200, JSON.stringify(out))
}

const RESERVATION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** POST /v1/settle/{id} `{"actual": n}`. */
export async function settle(ctx: ServiceContext, req: IncomingMessage, res: ServerResponse, path: string) {
  const id = path.slice('/v1/settle/'.length)
  const body = await jsonBody(req)
  if (!isRecord(body))
    throw new ClientError('invalid_body', 'the body must be a JSON object: {"actual": 1234}')
  for (const field in body)
    if (field !== 'actual')
      throw new ClientError('unknown_field', `body: unknown field ${JSON.stringify(field)}; allowed: actual`)
  const actual = body.actual
  if (typeof actual !== 'number' || !Number.isSafeInteger(actual) || actual < 0)
    throw new ClientError(
      'invalid_cost',
      `body: actual must be a whole number >= 0 (the true cost), got ${JSON.stringify(actual)}`,
    )
  const open = reservations(ctx)
  const found = RESERVATION_ID.test(id) ? open.get(id) : undefined
  if (found === undefined)
    throw new ClientError(
      'unknown_reservation',
      'no such reservation (never made, or forgotten a minute after it expired)',
      404,
    )
  try {
    await found.settlement.settle(actual)
  } catch (error) {
    throw waitingError(error)
  }
  send(
    ctx,
    res,
    200,
    JSON.stringify({ settled: true, reservation: id, actual, estimate: found.settlement.estimate }),
  )
}

/** The limiter's typed errors of waiting, as the API's error codes. */
function waitingError(error: unknown): unknown {
  if (!(error instanceof SluiceError)) return error
  switch (error.code) {
    case 'SLUICE_TOO_MANY_WAITERS':
      return new ClientError('too_many_waiters', error.message, 503)
    case 'SLUICE_WAIT_ABORTED':
      return new ClientError('request_timeout', 'the client closed the connection while waiting', 408)
    case 'SLUICE_RESERVATION_SETTLED':
      return new ClientError('reservation_settled', error.message, 409)
    case 'SLUICE_RESERVATION_EXPIRED':
      return new ClientError('reservation_expired', error.message, 410)
    case 'SLUICE_UNSUPPORTED':
      return new ClientError('unsupported', error.message, 501)
    default:
      return error
  }
}
