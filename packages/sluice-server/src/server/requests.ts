// Request bodies of the decision API: read (bounded), parsed and checked before the limiter sees them.
// Every client mistake becomes a ClientError with a stable code and a 400; nothing stored changes.
import type { IncomingMessage } from 'node:http'
import type { Check } from 'sluice'
import type { PolicyEntry, ServiceConfig } from './config.js'
import { isRecord } from './config-errors.js'

const MAX_BODY_BYTES = 16 * 1024
export const MAX_KEY_BYTES = 1024
const MAX_CHECKS = 32

/** Stable error codes of the HTTP API (the `error` field of every error body). */
export type ClientErrorCode =
  | 'invalid_json'
  | 'invalid_body'
  | 'body_too_large'
  | 'unknown_field'
  | 'unknown_policy'
  | 'unknown_tier'
  | 'invalid_cost'
  | 'invalid_key'
  | 'key_too_long'
  | 'duplicate_check'
  | 'invalid_duration'
  | 'missing_key'
  | 'not_found'
  | 'method_not_allowed'
  | 'unauthorized'
  | 'admin_disabled'
  | 'invalid_utf8'
  | 'duplicate_parameter'
  | 'unsupported_media_type'
  | 'origin_not_allowed'
  | 'bad_request'
  | 'headers_too_large'
  | 'request_timeout'
  | 'too_many_streams'
  // /v1/wait, /v1/reserve, /v1/settle/{id} (waiting.ts)
  | 'invalid_wait'
  | 'too_many_waiters'
  | 'too_many_reservations'
  | 'unknown_reservation'
  | 'reservation_settled'
  | 'reservation_expired'
  | 'unsupported'
  // /v1/lists (lists.ts)
  | 'invalid_entry'
  | 'too_many_entries'
  // /v1/overrides (overrides.ts)
  | 'invalid_override'
  | 'too_many_overrides'
  // POST /v1/outcome (outcomes.ts)
  | 'invalid_ticket'
  | 'invalid_status'
  | 'unknown_ticket'

/** A mistake of the caller: answered with `status` and `{"error": code, "message": ...}`. */
export class ClientError extends Error {
  constructor(
    readonly code: ClientErrorCode,
    message: string,
    readonly status = 400,
  ) {
    super(message)
    this.name = 'ClientError'
  }
}

// Fatal: a replacement character would let `\xff\xfe` and `\xff\xfd` decode to one key (one budget).
const utf8 = new TextDecoder('utf-8', { fatal: true })

/** The body as text; bytes that are not UTF-8 are a ClientError, never replaced by U+FFFD. */
function decodeUtf8(bytes: Buffer): string {
  try {
    return utf8.decode(bytes)
  } catch {
    throw new ClientError('invalid_utf8', 'the body is not valid UTF-8; send the key as UTF-8 text')
  }
}

/**
 * Read a request body of at most MAX_BODY_BYTES; larger bodies are refused without buffering them,
 * bodies that are not UTF-8 are refused, and a connection that closes mid-body rejects.
 */
function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length'])
    if (declared > MAX_BODY_BYTES) {
      reject(tooLarge())
      return
    }
    const chunks: Buffer[] = []
    let size = 0
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size > MAX_BODY_BYTES) {
        req.off('data', onData)
        reject(tooLarge())
        return
      }
      chunks.push(chunk)
    }
    req.on('data', onData)
    req.once('end', () => {
      try {
        resolve(decodeUtf8(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)))
      } catch (error) {
        reject(error)
      }
    })
    req.once('error', reject)
    // A connection cut mid-body (a body timeout, a client gone) must settle the request too.
    req.once('close', () => {
      if (!req.complete)
        reject(new ClientError('request_timeout', 'the connection closed before the body ended', 408))
    })
  })
}

function tooLarge(): ClientError {
  return new ClientError('body_too_large', `the body is over ${MAX_BODY_BYTES} bytes`)
}

/** JSON.parse that turns a syntax error into `invalid_json`. */
function parseJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch (error) {
    throw new ClientError('invalid_json', `the body is not valid JSON: ${(error as Error).message}`)
  }
}

/** `application/json`, with parameters or not, in any case; nothing else (no `+json`, no lookalikes). */
function isJsonType(type: string | undefined): boolean {
  if (type === 'application/json') return true
  if (type === undefined) return false
  const semicolon = type.indexOf(';')
  return (semicolon < 0 ? type : type.slice(0, semicolon)).trim().toLowerCase() === 'application/json'
}

/**
 * The request body (bounded by readBody) parsed as JSON. Only an `application/json` body is read:
 * text/plain, form and multipart bodies are what a web page can send cross-site without a CORS
 * preflight, so taking them would let any page a user visits spend budgets (415, nothing read).
 */
export async function jsonBody(req: IncomingMessage): Promise<unknown> {
  if (!isJsonType(req.headers['content-type']))
    throw new ClientError(
      'unsupported_media_type',
      'send the body as JSON with content-type: application/json',
      415,
    )
  return parseJson(await readBody(req))
}

function rejectUnknown(body: Record<string, unknown>, allowed: ReadonlySet<string>, where: string): void {
  for (const field in body) {
    if (!allowed.has(field)) {
      throw new ClientError(
        'unknown_field',
        `${where}: unknown field ${JSON.stringify(field)}; allowed: ${[...allowed].join(', ')}`,
      )
    }
  }
}

/** The policy entry for (policy, tier), or a ClientError naming what is wrong. */
export function entryFor(config: ServiceConfig, policy: unknown, tier: unknown, where: string): PolicyEntry {
  if (typeof policy !== 'string' || policy.length === 0)
    throw new ClientError('invalid_body', `${where}: policy must be a non-empty string`)
  if (tier !== undefined && typeof tier !== 'string')
    throw new ClientError('invalid_body', `${where}: tier must be a string`)
  if (tier !== undefined && !config.tierNames.includes(tier)) {
    throw new ClientError(
      'unknown_tier',
      `${where}: unknown tier ${JSON.stringify(tier)}; configured: ${config.tierNames.join(', ') || '(none)'}`,
    )
  }
  const entry = config.lookup(policy, tier)
  if (entry === undefined) {
    throw new ClientError(
      'unknown_policy',
      `${where}: unknown policy ${JSON.stringify(policy)}; configured: ${config.policyNames.join(', ')}`,
    )
  }
  return entry
}

// With the u flag a well-formed pair is one code point, so only unpaired surrogates match.
const LONE_SURROGATE = /\p{Cs}/u

export function validateKey(key: unknown, where: string): string {
  if (typeof key !== 'string' || key.length === 0)
    throw new ClientError('invalid_key', `${where}: key must be a non-empty string`)
  // Cheap bound first: a UTF-8 string takes at most 3 bytes per UTF-16 unit.
  if (key.length * 3 > MAX_KEY_BYTES && Buffer.byteLength(key) > MAX_KEY_BYTES)
    throw new ClientError('key_too_long', `${where}: key is over ${MAX_KEY_BYTES} bytes`)
  // A lone surrogate (`"\ud800"` in JSON) has no UTF-8 form: a Redis store would write U+FFFD, so
  // every such key would share one budget.
  if (LONE_SURROGATE.test(key))
    throw new ClientError(
      'invalid_key',
      `${where}: key holds a lone UTF-16 surrogate; send valid Unicode text`,
    )
  return key
}

export function validateCost(cost: unknown, entry: PolicyEntry, where: string): number {
  if (cost === undefined) return 1
  if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost <= 0)
    throw new ClientError(
      'invalid_cost',
      `${where}: cost must be a positive whole number, got ${JSON.stringify(cost)}`,
    )
  if (cost > entry.resolved.capacity) {
    throw new ClientError(
      'invalid_cost',
      `${where}: cost ${cost} can never be admitted by policy ${entry.name} (capacity ${entry.resolved.capacity})`,
    )
  }
  return cost
}

const SINGLE_FIELDS = new Set(['policy', 'key', 'cost', 'tier'])
const LAYERED_FIELDS = new Set(['checks', 'tier'])

/** A validated decision request: limiter checks (display names, `api.pro`) and the entries they use. */
export interface DecisionRequest {
  readonly layered: boolean
  readonly checks: Check[]
  readonly entries: PolicyEntry[]
}

/**
 * `{"policy","key","cost"?,"tier"?}` or `{"checks":[...],"tier"?}` (a check's own tier wins).
 * Throws ClientError for every mistake.
 */
export function parseDecisionRequest(config: ServiceConfig, body: unknown): DecisionRequest {
  if (!isRecord(body))
    throw new ClientError('invalid_body', 'the body must be a JSON object: {"policy":"api","key":"user-42"}')
  if (body.checks === undefined) {
    rejectUnknown(body, SINGLE_FIELDS, 'body')
    const entry = entryFor(config, body.policy, body.tier, 'body')
    const key = validateKey(body.key, 'body')
    const cost = validateCost(body.cost, entry, 'body')
    return { layered: false, checks: [{ policy: entry.displayName, key, cost }], entries: [entry] }
  }
  rejectUnknown(body, LAYERED_FIELDS, 'body')
  const list = body.checks
  if (!Array.isArray(list) || list.length === 0 || list.length > MAX_CHECKS) {
    throw new ClientError(
      'invalid_body',
      `checks must be an array of 1 to ${MAX_CHECKS} {"policy","key","cost"?,"tier"?}`,
    )
  }
  const checks: Check[] = []
  const entries: PolicyEntry[] = []
  const seen = new Set<string>()
  for (let i = 0; i < list.length; i++) {
    const where = `checks[${i}]`
    const item: unknown = list[i]
    if (!isRecord(item)) throw new ClientError('invalid_body', `${where}: must be an object {"policy","key"}`)
    rejectUnknown(item, SINGLE_FIELDS, where)
    // Only a missing tier falls back to the body's: `"tier": null` is a mistake, not "the outer tier".
    const entry = entryFor(config, item.policy, item.tier === undefined ? body.tier : item.tier, where)
    const key = validateKey(item.key, where)
    const cost = validateCost(item.cost, entry, where)
    const id = `${entry.name}\u0000${key}`
    if (seen.has(id)) {
      throw new ClientError(
        'duplicate_check',
        `${where}: policy ${entry.name} with key ${JSON.stringify(key)} is already checked; merge them into one check with the summed cost`,
      )
    }
    seen.add(id)
    checks.push({ policy: entry.displayName, key, cost })
    entries.push(entry)
  }
  return { layered: true, checks, entries }
}

const ADMIN_FIELDS = { reset: new Set(['policy', 'key']), block: new Set(['policy', 'key', 'duration']) }

/** `/v1/reset` `{"policy","key"}` and `/v1/block` `{"policy","key","duration"}`: every tier of the policy. */
export function parseAdminRequest(
  config: ServiceConfig,
  body: unknown,
  kind: 'reset' | 'block',
): { entries: PolicyEntry[]; key: string; duration: unknown } {
  if (!isRecord(body))
    throw new ClientError('invalid_body', 'the body must be a JSON object: {"policy","key"}')
  rejectUnknown(body, ADMIN_FIELDS[kind], 'body')
  const base = entryFor(config, body.policy, undefined, 'body')
  const key = validateKey(body.key, 'body')
  if (kind === 'block' && body.duration === undefined)
    throw new ClientError('invalid_duration', 'body: duration is required, e.g. "15m"')
  const entries = [...config.entries.values()].filter((e) => e.name === base.name)
  return { entries, key, duration: body.duration }
}
