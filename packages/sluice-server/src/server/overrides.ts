// The admin endpoints of per-key overrides (docs/service.md#per-key-overrides), behind the admin
// token: PUT, GET and DELETE /v1/overrides/{policy}/{key}, GET /v1/overrides/{policy}. `{policy}` is
// the configured policy name; without `?tier=` a change applies to the policy and every tier of it
// (each has its own counters), a read answers for the policy as written. Each change is logged as
// one line: who, when, policy, key, before, after.
import type { IncomingMessage, ServerResponse } from 'node:http'
import { type Override, type OverrideOptions, SluiceError } from 'sluice'
import { authorize } from './admin.js'
import type { PolicyEntry } from './config.js'
import { isRecord } from './config-errors.js'
import { send } from './plumbing.js'
import { ClientError, entryFor, jsonBody, validateKey } from './requests.js'
import type { ServiceContext } from './types.js'

const PREFIX = '/v1/overrides/'
const MAX_ACTOR_LENGTH = 128

/** A limiter error for bad override input, as the HTTP API's error code and status. */
function clientErrorOf(error: unknown): unknown {
  if (!(error instanceof SluiceError) || error.code.startsWith('SLUICE_STORE')) return error
  switch (error.code) {
    case 'SLUICE_INVALID_DURATION':
      return new ClientError('invalid_duration', `${error.code}: ${error.message}`)
    case 'SLUICE_INVALID_KEY':
      return new ClientError('invalid_key', `${error.code}: ${error.message}`)
    case 'SLUICE_UNSUPPORTED':
      return new ClientError('unsupported', `${error.code}: ${error.message}`, 501)
    case 'SLUICE_TOO_MANY_RECORDS':
      return new ClientError('too_many_overrides', `${error.code}: ${error.message}`, 409)
    default:
      return new ClientError('invalid_override', `${error.code}: ${error.message}`)
  }
}

/** `{policy}` and `{key}` of the path, URL-decoded (a key may hold an encoded `/`). */
function parsePath(path: string): { policy: string; key: string | undefined } {
  const rest = path.slice(PREFIX.length)
  const slash = rest.indexOf('/')
  const decode = (part: string, what: string): string => {
    try {
      return decodeURIComponent(part)
    } catch {
      throw new ClientError('invalid_key', `path: the ${what} is not valid percent-encoding`)
    }
  }
  if (slash === -1) return { policy: decode(rest, 'policy'), key: undefined }
  return { policy: decode(rest.slice(0, slash), 'policy'), key: decode(rest.slice(slash + 1), 'key') }
}

/** The entries a request names: one tier with `?tier=`, else the policy (reads) or it and its tiers (changes). */
function targets(
  ctx: ServiceContext,
  policy: string,
  tier: string | undefined,
  change: boolean,
): PolicyEntry[] {
  let base: PolicyEntry
  try {
    base = entryFor(ctx.config, policy, tier, 'path')
  } catch (error) {
    if (error instanceof ClientError && error.code === 'unknown_policy')
      throw new ClientError('unknown_policy', error.message, 404)
    throw error
  }
  if (tier !== undefined || !change) return [base]
  return [...ctx.config.entries.values()].filter((e) => e.name === base.name)
}

/** Who asked: the caller's `X-Sluice-Actor` (bounded) and the peer address. */
function actorOf(req: IncomingMessage): { actor?: string; peer: string | undefined } {
  const header = req.headers['x-sluice-actor']
  const actor = typeof header === 'string' ? header.trim().slice(0, MAX_ACTOR_LENGTH) : ''
  return actor === '' ? { peer: req.socket.remoteAddress } : { actor, peer: req.socket.remoteAddress }
}

/** An override as the API answers it: the configured policy name and tier, the window as ms. */
function shown(entry: PolicyEntry, o: Override): Record<string, unknown> {
  const { policy: _limiterName, ...rest } = o
  return { policy: entry.name, ...(entry.tier === undefined ? {} : { tier: entry.tier }), ...rest }
}

export async function overrides(
  ctx: ServiceContext,
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  query: URLSearchParams,
  id: string,
): Promise<void> {
  const method = req.method ?? 'GET'
  const { policy, key } = parsePath(path)
  const tier = query.get('tier') ?? undefined
  if (key === undefined) {
    if (method !== 'GET' && method !== 'HEAD')
      throw new ClientError('method_not_allowed', `use GET on ${PREFIX}{policy}, not ${method}`, 405)
    authorize(ctx, req, id)
    const [entry] = targets(ctx, policy, tier, false)
    const list = await ctx.limiter.listOverrides(entry!.displayName).catch((e: unknown) => {
      throw clientErrorOf(e)
    })
    send(ctx, res, 200, JSON.stringify({ policy: entry!.name, overrides: list.map((o) => shown(entry!, o)) }))
    return
  }
  if (!['GET', 'HEAD', 'PUT', 'DELETE'].includes(method))
    throw new ClientError('method_not_allowed', `use GET, PUT or DELETE here, not ${method}`, 405)
  authorize(ctx, req, id)
  validateKey(key, 'path')
  const change = method === 'PUT' || method === 'DELETE'
  const entries = targets(ctx, policy, tier, change)
  const first = entries[0]!
  const limiter = ctx.limiter
  try {
    if (!change) {
      const found = await limiter.getOverride(first.displayName, key)
      if (found === undefined)
        throw new ClientError('not_found', `no override for key ${JSON.stringify(key)} of ${first.name}`, 404)
      send(ctx, res, 200, JSON.stringify(shown(first, found)))
      return
    }
    const body = method === 'PUT' ? await jsonBody(req) : undefined
    if (method === 'PUT' && !isRecord(body))
      throw new ClientError(
        'invalid_body',
        'the body must be a JSON object of override options, e.g. {"limit":1000}',
      )
    const before = await limiter.getOverride(first.displayName, key)
    let after: Override | undefined
    let removed = false
    for (const entry of entries) {
      if (method === 'PUT') {
        const set = await limiter.setOverride(entry.displayName, key, body as OverrideOptions)
        if (entry === first) after = set
      } else if (await limiter.clearOverride(entry.displayName, key)) removed = true
    }
    ctx.logger.info(
      {
        event: 'override_changed',
        reqId: id,
        action: method === 'PUT' ? 'set' : 'clear',
        ...actorOf(req),
        at: new Date().toISOString(),
        policy: first.name,
        ...(tier === undefined ? {} : { tier }),
        key,
        before: before === undefined ? null : shown(first, before),
        after: after === undefined ? null : shown(first, after),
      },
      method === 'PUT' ? 'override set' : 'override cleared',
    )
    send(
      ctx,
      res,
      200,
      JSON.stringify(
        method === 'PUT'
          ? { ok: true, action: 'set', override: shown(first, after!) }
          : { ok: true, action: 'clear', policy: first.name, key, removed },
      ),
    )
  } catch (error) {
    throw clientErrorOf(error)
  }
}
