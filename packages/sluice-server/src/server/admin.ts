// Endpoints for operators: POST /v1/reset and /v1/block behind the admin bearer token, and GET /readyz
// (does the store answer, and if not, does some policy's failure mode still serve decisions).
import { createHash, timingSafeEqual } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { InvalidDurationError } from 'sluice'
import { send, settlesWithin } from './plumbing.js'
import { ClientError, jsonBody, parseAdminRequest } from './requests.js'
import type { ServiceContext } from './types.js'

const READY_TIMEOUT_MS = 1000

const digest = (text: string): Buffer => createHash('sha256').update(text).digest()

/**
 * True when `given` is the secret `expected` (admin and dashboard tokens). The compare is of SHA-256
 * digests (always 32 bytes), so neither its time nor its answer depends on either length.
 */
export function sameSecret(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected))
}

/**
 * Throw 403 when admin endpoints are off, 401 unless the request carries the admin bearer token
 * (compared with sameSecret). A failure is logged with the peer address.
 */
export function authorize(ctx: ServiceContext, req: IncomingMessage, id: string): void {
  if (ctx.adminToken === undefined)
    throw new ClientError(
      'admin_disabled',
      'admin endpoints are off: set admin.token or SLUICE_ADMIN_TOKEN',
      403,
    )
  const header = req.headers.authorization ?? ''
  const given = header.startsWith('Bearer ') ? header.slice(7) : ''
  if (!sameSecret(given, ctx.adminToken)) {
    ctx.logger.warn(
      {
        event: 'admin_auth_failed',
        reqId: id,
        peer: req.socket.remoteAddress,
        path: req.url?.split('?')[0],
        sent: header === '' ? 'no authorization header' : 'a wrong token',
      },
      'admin request refused: missing or wrong bearer token',
    )
    throw new ClientError('unauthorized', 'send Authorization: Bearer <admin token>', 401)
  }
}

/** `/v1/reset` `{"policy","key"}` or `/v1/block` `{"policy","key","duration"}`, on every tier. */
export async function admin(
  ctx: ServiceContext,
  req: IncomingMessage,
  res: ServerResponse,
  kind: 'reset' | 'block',
  id: string,
): Promise<void> {
  authorize(ctx, req, id)
  const { entries, key, duration } = parseAdminRequest(ctx.config, await jsonBody(req), kind)
  try {
    for (const entry of entries) {
      if (kind === 'reset') await ctx.limiter.reset(entry.displayName, key)
      else await ctx.limiter.block(entry.displayName, key, duration as string)
    }
  } catch (error) {
    if (error instanceof InvalidDurationError) throw new ClientError('invalid_duration', error.message)
    throw error
  }
  ctx.logger.info({ reqId: id, action: kind, policy: entries[0]!.name, key, duration }, `admin ${kind}`)
  send(ctx, res, 200, JSON.stringify({ ok: true, action: kind, policy: entries[0]!.name, key }))
}

/**
 * Ready when the store answers within a second, or when some policy does not fail closed. A
 * multi-region store adds each region's health: another region stale does not make this instance
 * unready (it decides on the local Redis, global limits on the last totals read).
 */
export async function ready(ctx: ServiceContext, res: ServerResponse): Promise<void> {
  const { handle } = ctx
  const regions = handle.regions === undefined ? {} : { regions: handle.regions() }
  try {
    if (!(await settlesWithin(handle.ping(), READY_TIMEOUT_MS)))
      throw new Error(`no answer within ${READY_TIMEOUT_MS}ms`)
    send(
      ctx,
      res,
      200,
      JSON.stringify({ ready: true, store: handle.description, reachable: true, ...regions }),
    )
  } catch (error) {
    // The store does not answer: ready only while some policy's failure mode still serves decisions.
    const modes = [...new Set([...ctx.config.entries.values()].map((entry) => entry.onStoreError))]
    const serving = modes.some((mode) => mode !== 'closed')
    send(
      ctx,
      res,
      serving ? 200 : 503,
      JSON.stringify({
        ready: serving,
        store: handle.description,
        reachable: false,
        serving: serving
          ? `failure modes: ${modes.join(', ')}`
          : 'nothing: every policy is onStoreError closed',
        health: ctx.limiter.health(),
        message: (error as Error).message,
        ...regions,
      }),
    )
  }
}
