// The options of `createHttpLimiter`, validated once and compiled into what the request path reads:
// plain settings with their defaults, the rule book, the key maker, skip and deny matchers, the
// queue and the tier resolver. Every mistake is an `InvalidOptionsError` here, at construction.
import { InvalidOptionsError } from '../errors.js'
import type { Limiter } from '../limiter.js'
import { boolean, object, oneOf, optional, text, wholeNumber } from '../option-checks.js'
import { checkKnownKeys, isOptionsObject, keysOf } from '../options.js'
import { type HeaderFamilies, type HeaderWriter, headerWriter } from './headers.js'
import { ipMatcher } from './ip.js'
import { DEFAULT_KEY_SETTINGS, KeyMaker, validateKey } from './keys.js'
import { type RequestQueue, requestQueue } from './queue.js'
import { compileRules, type RuleBook, routeMatcher } from './rules.js'
import { type TierResolver, tierResolver } from './tiers.js'
import type { HttpLimiterOptions, HttpLogger, TierOptions } from './types.js'

/** The plain-value options of one HTTP core, with their defaults applied. */
export interface HttpSettings {
  headers: HeaderFamilies
  body: 'json' | 'problem'
  ipv6Prefix: number
  missingIp: 'shared' | 'reject'
  maxKeyLength: number
  shadow: boolean
  onError: 'fail' | 'open'
  apiKeyHeader: string
  proxyHeader: 'x-forwarded-for' | 'forwarded' | 'x-real-ip'
  storeUnavailableStatus: 503 | 429
}

const DEFAULT_SETTINGS: HttpSettings = {
  headers: 'both',
  body: 'json',
  ipv6Prefix: DEFAULT_KEY_SETTINGS.ipv6Prefix,
  missingIp: 'shared',
  maxKeyLength: DEFAULT_KEY_SETTINGS.maxKeyLength,
  shadow: false,
  onError: 'fail',
  apiKeyHeader: DEFAULT_KEY_SETTINGS.apiKeyHeader,
  proxyHeader: DEFAULT_KEY_SETTINGS.proxyHeader,
  storeUnavailableStatus: 503,
}

// Not strict: the other keys are functions and objects, validated where they are compiled.
const settingsShape = object({
  headers: optional(oneOf(['legacy', 'draft', 'both', 'none', 'draft-6', 'draft-7', 'draft-8'])),
  body: optional(oneOf(['json', 'problem'])),
  ipv6Prefix: optional(wholeNumber(1, 128)),
  missingIp: optional(oneOf(['shared', 'reject'])),
  maxKeyLength: optional(wholeNumber(32, 4096)),
  shadow: optional(boolean()),
  onError: optional(oneOf(['fail', 'open'])),
  apiKeyHeader: optional(text(/^[A-Za-z0-9-]{1,64}$/)),
  proxyHeader: optional(oneOf(['x-forwarded-for', 'forwarded', 'x-real-ip'])),
  storeUnavailableStatus: optional(oneOf([503, 429], 'Invalid input')),
} satisfies Record<keyof HttpSettings, unknown>)

// Every key the options (and their nested objects) may hold: anything else is a misspelling.
const OPTION_KEYS = keysOf<HttpLimiterOptions>({
  limiter: true,
  rules: true,
  routes: true,
  tiers: true,
  user: true,
  apiKeyHeader: true,
  trustProxy: true,
  proxyHeader: true,
  ipv6Prefix: true,
  missingIp: true,
  maxKeyLength: true,
  skip: true,
  deny: true,
  shadow: true,
  headers: true,
  body: true,
  storeUnavailableStatus: true,
  onLimited: true,
  message: true,
  statusCode: true,
  onDecision: true,
  onError: true,
  logger: true,
  now: true,
  queue: true,
  skipFailedRequests: true,
  skipSuccessfulRequests: true,
  requestWasSuccessful: true,
})
const SKIP_KEYS = keysOf<NonNullable<HttpLimiterOptions['skip']>>({
  ips: true,
  paths: true,
  routes: true,
  when: true,
})
const DENY_KEYS = keysOf<NonNullable<HttpLimiterOptions['deny']>>({ ips: true, when: true })
const TIER_KEYS = keysOf<TierOptions>({
  resolve: true,
  default: true,
  cacheMs: true,
  cacheBy: true,
  cacheSize: true,
  onError: true,
})

/** Unknown keys anywhere in the options, reported with the key meant. */
function validateOptionKeys(options: HttpLimiterOptions): void {
  checkKnownKeys('createHttpLimiter', options, OPTION_KEYS)
  const nested: [string, unknown, readonly string[]][] = [
    ['skip', options.skip, SKIP_KEYS],
    ['deny', options.deny, DENY_KEYS],
    ['tiers', options.tiers, TIER_KEYS],
  ]
  for (const [name, value, keys] of nested)
    if (isOptionsObject(value)) checkKnownKeys(`createHttpLimiter: ${name}`, value, keys)
}

/**
 * The options of `createHttpLimiter` that are plain values, validated (unknown keys anywhere in the
 * options included) and with their defaults. Throws `InvalidOptionsError`.
 */
export function httpSettings(options: HttpLimiterOptions): HttpSettings {
  validateOptionKeys(options)
  const problem = settingsShape(options)
  if (problem !== undefined)
    throw new InvalidOptionsError(`createHttpLimiter: ${problem.path.join('.')}: ${problem.message}`)
  const given = options as unknown as Record<string, unknown>
  const settings: Record<string, unknown> = {}
  for (const [key, fallback] of Object.entries(DEFAULT_SETTINGS)) settings[key] = given[key] ?? fallback
  return settings as unknown as HttpSettings
}

/** The logger when none is given: one JSON line per message on stderr (adapters log through it too). */
export const defaultLogger: HttpLogger = { warn: logTo('warn'), error: logTo('error') }

function logTo(level: 'warn' | 'error'): HttpLogger['warn'] {
  return (details, message) =>
    process.stderr.write(`${JSON.stringify({ level, msg: message, ...describe(details) })}\n`)
}

function describe(details: object): object {
  const err = (details as { err?: unknown }).err
  return err instanceof Error
    ? { ...details, err: { message: err.message, code: (err as { code?: unknown }).code } }
    : details
}

/** Everything one HTTP core reads per request, built from its options once. */
export interface ResolvedHttpOptions {
  /** As given: the user's callbacks (`user`, `skip.when`, `deny.when`, `onLimited`, `onDecision`) are read from here. */
  readonly options: HttpLimiterOptions
  readonly settings: HttpSettings
  readonly limiter: Limiter
  readonly logger: HttpLogger
  /** The wall clock of `X-RateLimit-Reset`. */
  readonly now: () => number
  readonly rules: RuleBook
  readonly keyMaker: KeyMaker
  readonly writeHeaders: HeaderWriter
  readonly skipIp: ((ip: string | undefined) => boolean) | undefined
  readonly skipPaths: ReadonlySet<string>
  readonly skipRoutes: ((routeId: string) => boolean) | undefined
  readonly denyIp: ((ip: string | undefined) => boolean) | undefined
  /** `queue: { maxWaitMs }`: queued instead of refused. Never in shadow mode. */
  readonly queue: RequestQueue | undefined
  readonly tiers: TierResolver | undefined
}

/** Validate the options of `createHttpLimiter` and build what the request path reads. Throws `InvalidOptionsError`. */
export function resolveHttpOptions(options: HttpLimiterOptions): ResolvedHttpOptions {
  if (options === null || typeof options !== 'object' || typeof options.limiter?.consume !== 'function')
    throw new InvalidOptionsError('createHttpLimiter: pass { limiter: createLimiter(...), rules: [...] }')
  const settings = httpSettings(options)
  const { limiter } = options
  const logger = options.logger ?? defaultLogger
  const policies = limiter.policies as Readonly<Record<string, (typeof limiter.policies)[string]>>
  const rules = compileRules(options, policies)
  const keyMaker = new KeyMaker(options, settings)
  const writeHeaders = headerWriter(policies, settings.headers)
  const skipIp = options.skip?.ips === undefined ? undefined : ipMatcher(options.skip.ips, 'skip.ips')
  const skipPaths = new Set(options.skip?.paths ?? [])
  const skipRoutes =
    options.skip?.routes === undefined ? undefined : routeMatcher(options.skip.routes, 'skip.routes')
  const denyIp = options.deny?.ips === undefined ? undefined : ipMatcher(options.deny.ips, 'deny.ips')
  // A queued request is admitted; in shadow mode nothing is refused, so nothing is queued.
  const queue = settings.shadow ? undefined : requestQueue(limiter, options.queue)
  let tiers: TierResolver | undefined
  if (options.tiers !== undefined) {
    if (typeof options.tiers.resolve !== 'function' || typeof options.tiers.default !== 'string')
      throw new InvalidOptionsError('tiers: pass { resolve(request), default: "free" }')
    if (options.tiers.cacheBy !== undefined) validateKey(options.tiers.cacheBy, 'tiers.cacheBy')
    tiers = tierResolver(options.tiers, rules.tierNames, logger)
  }
  return {
    options,
    settings,
    limiter,
    logger,
    now: options.now ?? Date.now,
    rules,
    keyMaker,
    writeHeaders,
    skipIp,
    skipPaths,
    skipRoutes,
    denyIp,
    queue,
    tiers,
  }
}
