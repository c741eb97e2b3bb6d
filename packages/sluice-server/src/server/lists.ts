// The run-time allow and deny lists behind the admin token: PUT and DELETE
// /v1/lists/{policy}/{allow|deny}/{entry} (the entry URL-encoded: a CIDR is 10.0.0.0%2F8), GET
// /v1/lists/{policy}. A configured policy's entry goes to every tier of it; each change is logged
// with who asked (the peer address, the request id), when (the log line's time) and what.
import type { IncomingMessage, ServerResponse } from 'node:http'
import { SluiceError } from 'sluice'
import { authorize } from './admin.js'
import { send } from './plumbing.js'
import { ClientError, entryFor, jsonBody } from './requests.js'
import type { ServiceContext } from './types.js'

const PUT_FIELDS = new Set(['ttl', 'reason'])

/** A library error about the caller's input, as the service answers it. */
function clientErrorOf(error: unknown): unknown {
  if (!(error instanceof SluiceError)) return error
  switch (error.code) {
    case 'SLUICE_INVALID_LIST':
    case 'SLUICE_INVALID_KEY':
    case 'SLUICE_INVALID_OPTIONS':
      return new ClientError('invalid_entry', error.message)
    case 'SLUICE_INVALID_DURATION':
      return new ClientError('invalid_duration', error.message)
    case 'SLUICE_TOO_MANY_RECORDS':
      return new ClientError('too_many_entries', error.message, 409)
    case 'SLUICE_UNSUPPORTED':
      return new ClientError('unsupported', error.message, 501)
    default:
      return error
  }
}

/** `{ ttl?, reason? }` of a PUT: no body at all is none. */
async function putOptions(req: IncomingMessage): Promise<{ ttl?: string | number; reason?: string }> {
  const length = req.headers['content-length']
  if (req.headers['content-type'] === undefined && (length === undefined || length === '0')) return {}
  const body = await jsonBody(req)
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw new ClientError('invalid_body', 'the body is a JSON object: {"ttl"?: "1h", "reason"?: "..."}')
  for (const field of Object.keys(body))
    if (!PUT_FIELDS.has(field))
      throw new ClientError(
        'unknown_field',
        `body: unknown field ${JSON.stringify(field)}; allowed: ttl, reason`,
      )
  const { ttl, reason } = body as { ttl?: unknown; reason?: unknown }
  if (ttl !== undefined && typeof ttl !== 'string' && typeof ttl !== 'number')
    throw new ClientError('invalid_duration', 'body: ttl is a duration like "1h" or a number of ms')
  if (reason !== undefined && typeof reason !== 'string')
    throw new ClientError('invalid_entry', 'body: reason is text')
  return { ...(ttl === undefined ? {} : { ttl }), ...(reason === undefined ? {} : { reason }) }
}

function decoded(part: string): string {
  try {
    return decodeURIComponent(part)
  } catch {
    throw new ClientError('invalid_entry', `the entry ${JSON.stringify(part)} is not URL-encoded text`)
  }
}

/** One request under /v1/lists/. */
export async function lists(
  ctx: ServiceContext,
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  id: string,
): Promise<void> {
  authorize(ctx, req, id)
  const method = req.method ?? 'GET'
  const parts = path.slice('/v1/lists/'.length).split('/')
  const { config, limiter } = ctx
  const base = entryFor(config, decoded(parts[0] ?? ''), undefined, 'path')
  if (parts.length === 1) {
    if (method !== 'GET' && method !== 'HEAD')
      throw new ClientError('method_not_allowed', `use GET here, not ${method}`, 405)
    try {
      const listed = await limiter.getLists(base.displayName)
      send(ctx, res, 200, JSON.stringify({ ...listed, policy: base.name }))
    } catch (error) {
      throw clientErrorOf(error)
    }
    return
  }
  if (parts.length !== 3)
    throw new ClientError(
      'not_found',
      'use /v1/lists/{policy} or /v1/lists/{policy}/{allow|deny}/{entry}',
      404,
    )
  const list = parts[1]
  if (list !== 'allow' && list !== 'deny')
    throw new ClientError('not_found', `no list ${JSON.stringify(list)}: use allow or deny`, 404)
  const entry = decoded(parts[2]!)
  if (method !== 'PUT' && method !== 'DELETE')
    throw new ClientError('method_not_allowed', `use PUT or DELETE here, not ${method}`, 405)
  // Every tier of the configured policy: one budget per tier, one list for the policy.
  const entries = [...config.entries.values()].filter((e) => e.name === base.name)
  const who = { reqId: id, peer: req.socket.remoteAddress }
  try {
    if (method === 'PUT') {
      const options = await putOptions(req)
      let added: unknown
      for (const e of entries) added = await limiter.addListEntry(e.displayName, list, entry, options)
      ctx.logger.info(
        { ...who, action: 'list_add', policy: base.name, list, entry, ...options },
        `admin list add: ${list} ${entry}`,
      )
      send(ctx, res, 200, JSON.stringify({ ok: true, policy: base.name, list, entry: added }))
      return
    }
    let removed = false
    for (const e of entries) removed = (await limiter.removeListEntry(e.displayName, list, entry)) || removed
    ctx.logger.info(
      { ...who, action: 'list_remove', policy: base.name, list, entry, removed },
      `admin list remove: ${list} ${entry}`,
    )
    send(ctx, res, 200, JSON.stringify({ ok: true, policy: base.name, list, entry, removed }))
  } catch (error) {
    throw clientErrorOf(error)
  }
}
