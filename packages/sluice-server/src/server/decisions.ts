// The decision endpoints: POST /v1/check and /v1/peek (JSON in, the decision as JSON out) and
// GET /v1/authz (nginx auth_request, Traefik forwardAuth: the answer is the status and its headers).
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Decision } from 'sluice'
import { rateLimitBody, rateLimitHeaders } from 'sluice'
import { hashedApiKey, isPending } from 'sluice/internal'
import { issueTicket } from './outcomes.js'
import { send } from './plumbing.js'
import type { DecisionRequest } from './requests.js'
import { ClientError, entryFor, validateCost, validateKey } from './requests.js'
import { present, presentLayered } from './responses.js'
import type { ServiceContext } from './types.js'

/** The JSON answer to a validated /v1/check (`consume`) or /v1/peek (`peek`) request. */
export async function decisionJson(
  ctx: ServiceContext,
  request: DecisionRequest,
  mode: 'consume' | 'peek',
): Promise<string> {
  const { limiter } = ctx
  if (!request.layered) {
    const check = request.checks[0]!
    const options = { cost: check.cost ?? 1 }
    // The memory store decides in-process: no promise to wait for on the hot path.
    let d: Decision
    if (mode === 'peek') d = await limiter.peek(check.policy, check.key, options)
    else {
      const now = limiter.decide(check.policy, check.key, options)
      d = isPending(now) ? await now : now
    }
    return JSON.stringify(present(d, request.entries[0]!))
  }
  const d = mode === 'consume' ? await limiter.consume(request.checks) : await limiter.peek(request.checks)
  return JSON.stringify(presentLayered(d, request.entries))
}

const DECIMAL = /^[0-9]{1,16}$/

/** Only policy, tier and cost, each at most once (which of two values wins is nobody's guess). */
function validateQuery(query: URLSearchParams): void {
  const seen = new Set<string>()
  for (const name of query.keys()) {
    if (name !== 'policy' && name !== 'tier' && name !== 'cost')
      throw new ClientError(
        'unknown_field',
        `unknown query parameter ${JSON.stringify(name)}; use policy, tier, cost`,
      )
    if (seen.has(name))
      throw new ClientError('duplicate_parameter', `query parameter ${name} is given twice; give it once`)
    seen.add(name)
  }
}

/**
 * GET /v1/authz?policy=&tier=&cost=: consume for the client (its address, or authz.keyHeader) and
 * answer with the status and rate-limit headers the adapters give.
 */
export async function authz(
  ctx: ServiceContext,
  req: IncomingMessage,
  res: ServerResponse,
  query: URLSearchParams,
): Promise<void> {
  validateQuery(query)
  const { config } = ctx
  // The tier and key headers speak for the client: believed only from authz.trustedPeers (nginx),
  // never from whoever connects. From anyone else the tier is the default and the key the address.
  const trusted = ctx.authzTrusted(req)
  const tier = query.get('tier') ?? (trusted ? headerTier(ctx, req, res) : undefined)
  const entry = entryFor(config, query.get('policy') ?? undefined, tier, 'query')
  const keyHeader = trusted ? config.authz.keyHeader : undefined
  // The HTTP core's name for an address (`ip:203.0.113.7`, `ip:2001:db8:1:2::/64`): one client is
  // one key whether the middleware, /v1/check or /v1/authz counts it, and one name on the dashboard.
  const address = ctx.authzIp(req)
  const addressKey = address === undefined ? undefined : `ip:${address}`
  const rawKey = keyHeader === undefined ? addressKey : req.headers[keyHeader]
  if (typeof rawKey !== 'string' || rawKey === '') {
    throw new ClientError(
      'missing_key',
      keyHeader === undefined ? 'no client address to limit on' : `the ${keyHeader} header is missing`,
    )
  }
  // An API key is a secret: only its hash reaches the store, metrics, top keys and logs (the HTTP
  // core's `apikey:<hash>` form, so one key has one name everywhere).
  const key = keyHeader === undefined ? validateKey(rawKey, 'client address') : hashedApiKey(rawKey)
  const costText = query.get('cost')
  // Decimal digits only, like the JSON API's whole numbers: Number() would read 0x10, 1e1, +3 and " 5".
  if (costText !== null && !DECIMAL.test(costText))
    throw new ClientError(
      'invalid_cost',
      `query: cost must be a positive whole number, got ${JSON.stringify(costText)}`,
    )
  const cost = validateCost(costText === null ? undefined : Number(costText), entry, 'query')
  // The policies of the limiter this check was made under: a reload during the await may drop or
  // reshape the policy.
  const { limiter } = ctx
  const d = await limiter.consume(entry.displayName, key, { cost })
  // Limited on an API key from a known client address: that pair feeds the abuse patterns (the
  // decision alone names only the key). A key for an address limits on the address: no pair.
  if (keyHeader !== undefined && addressKey !== undefined)
    ctx.observability?.observePair(addressKey, key, !d.allowed)
  const headers = rateLimitHeaders(d, limiter.policies, {
    headers: 'both',
    nowMs: Date.now(),
  })
  // The adapters' body: nginx drops it, Traefik forwardAuth passes a denial's body to the client.
  // A `closed` policy whose store failed: 503 (or authz.storeUnavailableStatus) with Retry-After.
  // From ctx after the await: a config reloaded meanwhile sets the status of the answer.
  const body = rateLimitBody(d, 'json', {
    storeUnavailableStatus: ctx.config.authz.storeUnavailableStatus,
  })
  issueTicket(ctx, res, entry, key, cost, d)
  send(ctx, res, body.status, body.body, headers)
}

/**
 * The tier named by authz.tierHeader, or undefined. A tier the config does not define falls back
 * to the default tier (logged): a client-supplied header must not turn into an error.
 */
function headerTier(ctx: ServiceContext, req: IncomingMessage, res: ServerResponse): string | undefined {
  const { tierHeader } = ctx.config.authz
  if (tierHeader === undefined) return undefined
  const value = req.headers[tierHeader]
  if (typeof value !== 'string' || value === '') return undefined
  if (ctx.config.tierNames.includes(value)) return value
  ctx.logger.info(
    { reqId: res.getHeader('x-request-id'), tier: value.slice(0, 64), peer: req.socket.remoteAddress },
    `unknown tier in ${tierHeader}; using the default tier`,
  )
  return undefined
}
