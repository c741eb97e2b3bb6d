// The service's YAML config: parsed with `yaml` (for line numbers), validated with zod and the
// library's own resolvePolicy, and turned into the limiter policy table (one entry per policy x tier).
import { createHash } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import type { Policy, StoreUnavailableStatus, TrustProxy } from 'sluice'
import { InvalidConfigError, InvalidDurationError, SluiceError } from 'sluice'
import type { ResolvedPolicy } from 'sluice/internal'
import { clientIpResolver, closest, ipMatcher, resolvePolicy } from 'sluice/internal'
import { z } from 'zod'
import { grpcPeerMatcher, namesSubjects } from '../envoy/peers.js'
import type { EnvoySettings, GrpcSettings } from '../envoy/settings.js'
import { envoySchema, grpcSchema, resolveEnvoy, resolveGrpc } from '../envoy/settings.js'
import type { AbuseSettings } from './config-abuse.js'
import { abuseSchema, resolveAbuse } from './config-abuse.js'
import type { Path } from './config-errors.js'
import {
  dotted,
  isRecord,
  type Locator,
  parseYamlDocument,
  suggestDuration,
  toPlain,
} from './config-errors.js'
import type { DashboardSettings, HttpSettings } from './config-http.js'
import { dashboardSchema, httpSchema, resolveDashboard, resolveHttp } from './config-http.js'
import { type OutcomesSettings, outcomesSchema, resolveOutcomes } from './config-outcomes.js'
import { describePenalty } from './config-penalty.js'
import { describeRegions, type RegionsSettings, resolveRegions } from './config-regions.js'
import { describeStoreCompactValues, describeStoreTls, resolveStoreSettings } from './config-store.js'
import type { TelemetrySettings } from './config-telemetry.js'
import { describeTelemetry, resolveTelemetry, telemetrySchema } from './config-telemetry.js'
import { resolveWaiting, type WaitingSettings, waitingSchema } from './config-waiting.js'
import { describeListenerTls } from './listener-tls.js'
import type { StoreTlsSettings } from './store-tls.js'
import { redactStoreUrl } from './store-url.js'

const FAIL_MODES = ['open', 'closed', 'memory'] as const
/** What to do when the store cannot answer: allow, deny, or decide on an in-process store. */
export type FailMode = (typeof FAIL_MODES)[number]

/** One limiter policy: a configured policy, either as written or with one tier's overrides. */
export interface PolicyEntry {
  /** The policy name as configured (`api`). */
  readonly name: string
  /** The tier whose overrides apply, or undefined for the policy as written. */
  readonly tier: string | undefined
  /**
   * The limiter policy's name, shown by decisions, events, headers and metrics: `api`, or `api.pro`
   * for a tier.
   */
  readonly displayName: string
  /**
   * The storage id the store keeps its counters under: `api._.f3a9c2`, `api.pro.77b0e1` (policy,
   * tier, a hash of algorithm and window), so a reshaped policy starts fresh counters and an
   * unchanged one keeps them across reloads and upgrades.
   */
  readonly id: string
  /** The policy as written, without `onStoreError` (limiterPolicies adds the id and the effective mode). */
  readonly policy: Policy
  readonly resolved: ResolvedPolicy
  /** Per-policy failure mode (or the top-level one): what the limiter does when the store fails. */
  readonly onStoreError: FailMode
}

export interface ServiceConfig {
  /** Where the config came from (a path, or a label for text configs). */
  readonly file: string
  /**
   * The store as written in the config (`memory`, `redis://...`), already checked by parseStoreUrl.
   * It may hold a password: print only `redactStoreUrl(store)`. CLI flags and env override it.
   */
  readonly store: string
  /** True when the file has a `store:` line (then it wins over REDIS_URL; docs/service.md). */
  readonly storeWritten: boolean
  /**
   * `store.tls`: the CA, client certificate and key files and the server name for the store the
   * service opens (joined to the URL's own `tls_*` parameters). Paths, not contents.
   */
  readonly storeTls: StoreTlsSettings | undefined
  /** `store.compactValues`: the Redis store's option of that name; undefined leaves its default. */
  readonly storeCompactValues: boolean | undefined
  /**
   * `store: { region, regions, syncEvery }`: a multiRegionStore over one Redis per region
   * (config-regions.ts); `store` is then the local region's URL. Undefined for a single store.
   */
  readonly regions: RegionsSettings | undefined
  readonly prefix: string
  readonly onStoreError: FailMode
  /** Configured policy names, in file order. */
  readonly policyNames: readonly string[]
  readonly tierNames: readonly string[]
  /** Every limiter policy, by display name (`api`, `api.pro`). */
  readonly entries: ReadonlyMap<string, PolicyEntry>
  /** Bearer token for /v1/reset and /v1/block; undefined turns them off. */
  readonly adminToken: string | undefined
  readonly authz: {
    /** Header holding the key for /v1/authz; undefined means the client IP. */
    readonly keyHeader: string | undefined
    /** Header naming the caller's tier for /v1/authz; undefined means no tiers there. */
    readonly tierHeader: string | undefined
    /**
     * Peers whose keyHeader and tierHeader are believed (addresses, CIDRs, loopback, private,
     * linklocal). Default: trustProxy when it is a list, else `['loopback']`. From any other peer
     * both headers are ignored: the key is the peer's address and the tier the default.
     */
    readonly trustedPeers: readonly string[]
    /** Peers whose forwarding header is believed (the HTTP core's rules). Default `['loopback']`. */
    readonly trustProxy: TrustProxy
    /** The header those proxies write. Default `x-real-ip` (what examples/nginx/sluice.conf sends). */
    readonly proxyHeader: 'x-real-ip' | 'x-forwarded-for' | 'forwarded'
    /** IPv6 clients share one key per network of this prefix. Default 64. */
    readonly ipv6Prefix: number
    /** Status when a `closed` policy denies because the store failed. Default 503. */
    readonly storeUnavailableStatus: StoreUnavailableStatus
  }
  /** Browser origins, timeouts and the connection cap of the HTTP server (config-http.ts). */
  readonly http: HttpSettings
  /** The dashboard's token and optional listener of its own (config-http.ts). */
  readonly dashboard: DashboardSettings
  /** The gRPC listener for Envoy (src/envoy/settings.ts); no port: none. */
  readonly grpc: GrpcSettings
  /** The envoyproxy/ratelimit config the gRPC listener answers from, and how it charges. */
  readonly envoy: EnvoySettings
  /** The abuse patterns' window, thresholds and policy kinds (config-abuse.ts). */
  readonly abuse: AbuseSettings
  /** /v1/wait's cap and the open reservations' bound (waiting.ts). */
  readonly waiting: WaitingSettings
  /** OpenTelemetry export (config-telemetry.ts); undefined: off. */
  readonly telemetry: TelemetrySettings | undefined
  /** Counting /v1/authz requests by their response's status, and its tickets (config-outcomes.ts). */
  readonly outcomes: OutcomesSettings
  /** Find the limiter policy for a configured policy and an optional tier. */
  lookup(name: string, tier?: string): PolicyEntry | undefined
}

// Dots separate policy, tier and shape in display names and ids, so configured names cannot hold them.
const NAME = /^[A-Za-z][A-Za-z0-9_-]{0,31}$/
const TIER = /^[A-Za-z][A-Za-z0-9_-]{0,15}$/
const BASE_TIER = '_'

const failMode = z.enum(FAIL_MODES, { error: `must be one of ${FAIL_MODES.join(', ')}` })
const headerName = z.string().regex(/^[A-Za-z0-9-]{1,64}$/, { error: 'must be an HTTP header name' })

const topSchema = z.strictObject({
  // A URL, or a block checked key by key in its own function: `{ url, tls }` (config-store.ts) or
  // `{ region, regions, syncEvery }` (config-regions.ts).
  store: z.unknown().optional(),
  prefix: z
    .string()
    .regex(/^[A-Za-z0-9_:.-]{1,64}$/, { error: "must be 1-64 letters, digits, '_', ':', '.' or '-'" })
    .optional(),
  onStoreError: failMode.optional(),
  policies: z.record(z.string(), z.unknown(), { error: 'must be a map of policy name to policy' }),
  tiers: z
    .record(
      z.string(),
      z.record(z.string(), z.unknown(), { error: 'must be a map of policy name to overrides' }),
      { error: 'must be a map of tier name to policy overrides' },
    )
    .optional(),
  admin: z
    .strictObject({
      token: z.string().superRefine((token, ctx) => {
        const problem = adminTokenProblem(token)
        if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem })
      }),
    })
    .optional(),
  authz: z
    .strictObject({
      keyHeader: headerName.optional(),
      tierHeader: headerName.optional(),
      trustedPeers: z.array(z.string(), { error: 'must be a list like [loopback, 10.0.0.5]' }).optional(),
      trustProxy: z
        .union([z.literal(false), z.number().int().min(0), z.array(z.string())], {
          error: 'must be false, a number of proxy hops, or a list like [loopback, 10.0.0.0/8]',
        })
        .optional(),
      proxyHeader: z
        .enum(['x-real-ip', 'x-forwarded-for', 'forwarded'], {
          error: 'must be x-real-ip, x-forwarded-for or forwarded',
        })
        .optional(),
      ipv6Prefix: z
        .number()
        .int()
        .min(1)
        .max(128, { error: 'must be a whole number from 1 to 128' })
        .optional(),
      storeUnavailableStatus: z
        .union([z.literal(503), z.literal(429)], { error: 'must be 503 or 429' })
        .optional(),
    })
    .optional(),
  http: httpSchema,
  dashboard: dashboardSchema,
  grpc: grpcSchema,
  envoy: envoySchema,
  abuse: abuseSchema,
  waiting: waitingSchema,
  telemetry: telemetrySchema,
  outcomes: outcomesSchema,
})

/** The admin token's rule, the same for `admin.token`, the adminToken option and SLUICE_ADMIN_TOKEN. */
const MIN_ADMIN_TOKEN_LENGTH = 16

/** What is wrong with an admin token (never quoting it), or undefined when it is acceptable. */
function adminTokenProblem(token: string): string | undefined {
  if (token.length < MIN_ADMIN_TOKEN_LENGTH)
    return `must be at least ${MIN_ADMIN_TOKEN_LENGTH} characters (e.g. openssl rand -hex 24)`
  // A header value loses its surrounding whitespace on the way in: such a token could never match.
  if (/^\s|\s$/.test(token)) return 'must not start or end with whitespace'
  return undefined
}

/**
 * Throw `InvalidConfigError` naming `where` (`SLUICE_ADMIN_TOKEN`, `adminToken`) unless `token`
 * follows the admin token rule. The token itself is never in the message.
 */
export function validateAdminToken(token: string | undefined, where: string): void {
  if (token === undefined) return
  const problem = adminTokenProblem(token)
  if (problem !== undefined) throw new InvalidConfigError(`${where}: ${problem}`)
}

/** The keys the config allows in the map at `path` (the top level, `authz`, `admin`). */
function knownKeys(path: Path): string[] {
  let schema: z.ZodType = topSchema
  for (const segment of path) {
    const inner: z.ZodType = schema instanceof z.ZodOptional ? (schema.unwrap() as z.ZodType) : schema
    if (!(inner instanceof z.ZodObject)) return []
    const next = (inner.shape as Record<string, z.ZodType>)[String(segment)]
    if (next === undefined) return []
    schema = next
  }
  const inner = schema instanceof z.ZodOptional ? (schema.unwrap() as z.ZodType) : schema
  return inner instanceof z.ZodObject ? Object.keys(inner.shape) : []
}

/** `grpc.trustedPeers`: addresses, or subjects, which only a verified client certificate can show. */
function checkGrpcPeers(loc: Locator, grpc: GrpcSettings): void {
  try {
    grpcPeerMatcher(grpc.trustedPeers, 'grpc.trustedPeers')
  } catch (error) {
    const message = error instanceof SluiceError ? error.message : String(error)
    throw loc.error(['grpc', 'trustedPeers'], message, error)
  }
  if (namesSubjects(grpc.trustedPeers) && grpc.tls?.requireClientCert !== true)
    throw loc.error(
      ['grpc', 'trustedPeers'],
      'grpc.trustedPeers: a subject: entry needs client certificates; set grpc.tls with ca and requireClientCert: true',
    )
}

/**
 * Shape of the stored state: a changed algorithm or window starts fresh counters, limit changes do
 * not. Calendar windows (and their zone) are a shape of their own.
 */
function shapeTag(resolved: ResolvedPolicy): string {
  const calendar = resolved.calendar === undefined ? '' : `|calendar ${resolved.calendar.timeZone}`
  return createHash('sha1')
    .update(`${resolved.algorithm}|${resolved.windowMs}${calendar}`)
    .digest('hex')
    .slice(0, 6)
}

/** How `sluice check` names a calendar policy's windows: `, calendar month in Europe/Berlin`. */
function calendarText(resolved: ResolvedPolicy): string {
  const calendar = resolved.calendar
  return calendar === undefined ? '' : `, calendar ${calendar.unit} in ${calendar.timeZone}`
}

/**
 * Resolve one policy (as written, or merged with a tier's overrides). `where` is the config path of
 * the policy (`policies.api` or `tiers.pro.api`); errors are rewritten to name it and its line.
 */
function resolveEntry(
  loc: Locator,
  where: Path,
  name: string,
  tier: string | undefined,
  policy: Record<string, unknown>,
  onStoreError: FailMode,
): PolicyEntry {
  try {
    resolvePolicy(name, policy)
  } catch (error) {
    if (!(error instanceof SluiceError)) throw error
    // resolvePolicy's messages start with `policies.<name>[.<field>]: `; point at `where` instead.
    const prefix = `policies.${name}`
    let message = error.message.startsWith(prefix)
      ? `${dotted(where)}${error.message.slice(prefix.length)}`
      : error.message
    const rest = error.message.slice(prefix.length)
    const field = /^\.([A-Za-z]+)[:.]/.exec(rest)?.[1] ?? /^: unknown option '([A-Za-z]+)'/.exec(rest)?.[1]
    const path = field === undefined ? where : [...where, field]
    if (error instanceof InvalidDurationError && field !== undefined) {
      const value = policy[field]
      const suggestion = suggestDuration(value)
      if (suggestion !== undefined)
        message = `${dotted(path)}: ${JSON.stringify(value)} is not a duration, use ${suggestion}`
    }
    throw loc.error(path, message, error)
  }
  const probe = resolvePolicy(name, policy)
  // Counters are keyed on the id, not the name: a reload that keeps the policy's shape keeps its
  // counters, and a changed algorithm or window starts fresh ones (shapeTag).
  const id = `${name}.${tier ?? BASE_TIER}.${shapeTag(probe)}`
  const displayName = tier === undefined ? name : `${name}.${tier}`
  return {
    name,
    tier,
    displayName,
    id,
    policy: policy as unknown as Policy,
    resolved: resolvePolicy(displayName, { ...policy, id }),
    onStoreError,
  }
}

/** A map (a YAML mapping or a JSON object), not null, not a list. */
/** A `store:` block naming regions (config-regions.ts) rather than one store's URL and TLS files. */
function isRegionsBlock(value: unknown): value is Record<string, unknown> {
  return isRecord(value) && ('regions' in value || 'region' in value || 'syncEvery' in value)
}

/**
 * Parse and validate a config from YAML text. Throws `InvalidConfigError` naming file, line and path.
 * @example parseConfig('policies:\n  api: { algorithm: token-bucket, limit: 10, window: 1s }\n', 'inline')
 */
export function parseConfig(text: string, file: string): ServiceConfig {
  const { doc, loc } = parseYamlDocument(text, file)
  const raw = toPlain(loc, doc)
  if (!isRecord(raw)) throw loc.error([], 'the config must be a YAML map with at least `policies:`')

  const parsed = topSchema.safeParse(raw)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!
    if (issue.code === 'unrecognized_keys') {
      const at = issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))
      const key = issue.keys[0]!
      const path = [...at, key]
      const meant = closest(key, knownKeys(at))
      const hint =
        meant === undefined ? 'check the spelling (see docs/service.md)' : `did you mean '${meant}'?`
      throw loc.error(path, `${dotted(path)}: unknown key; ${hint}`)
    }
    const path = issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))
    const label = path.length === 0 ? 'config' : dotted(path)
    const given = path.reduce<unknown>(
      (node, key) =>
        typeof node === 'object' && node !== null
          ? (node as Record<string, unknown>)[String(key)]
          : undefined,
      raw,
    )
    const message = given === undefined ? 'is required' : issue.message
    throw loc.error(path, `${label}: ${message}`)
  }
  const top = parsed.data
  // Checked here so `sluice check` and a reload catch a bad URL; the message is already redacted.
  const regions = isRegionsBlock(top.store) ? resolveRegions(loc, top.store) : undefined
  const storeSettings =
    regions === undefined
      ? resolveStoreSettings(loc, top.store)
      : { url: regions.urls[regions.region], tls: undefined }
  const onStoreError: FailMode = top.onStoreError ?? 'open'
  const entries = new Map<string, PolicyEntry>()
  const byName = new Map<string, PolicyEntry>()
  const bases = new Map<string, { policy: Record<string, unknown>; onStoreError: FailMode }>()

  const policyNames = Object.keys(top.policies)
  if (policyNames.length === 0) throw loc.error(['policies'], 'policies: define at least one policy')
  for (const name of policyNames) {
    const where = ['policies', name]
    if (!NAME.test(name))
      throw loc.error(
        where,
        `policies.${name}: a policy name is a letter then up to 31 letters, digits, '_' or '-'`,
      )
    const written = top.policies[name]
    if (!isRecord(written))
      throw loc.error(
        where,
        `policies.${name}: must be a map like { algorithm: token-bucket, limit: 100, window: 1m }`,
      )
    const { onStoreError: own, ...policy } = written
    if ('id' in policy)
      throw loc.error(
        [...where, 'id'],
        `policies.${name}.id: the service gives each policy its storage id (name, tier and shape); remove id`,
      )
    let mode = onStoreError
    if (own !== undefined) {
      const checked = failMode.safeParse(own)
      if (!checked.success)
        throw loc.error(
          [...where, 'onStoreError'],
          `policies.${name}.onStoreError: ${checked.error.issues[0]!.message}`,
        )
      mode = checked.data
    }
    const entry = resolveEntry(loc, where, name, undefined, policy, mode)
    entries.set(entry.displayName, entry)
    byName.set(name, entry)
    bases.set(name, { policy, onStoreError: mode })
  }

  const tierNames = Object.keys(top.tiers ?? {})
  const tierEntries = new Map<string, PolicyEntry>()
  for (const tier of tierNames) {
    if (!TIER.test(tier))
      throw loc.error(
        ['tiers', tier],
        `tiers.${tier}: a tier name is a letter then up to 15 letters, digits, '_' or '-'`,
      )
    const overrides = top.tiers?.[tier] ?? {}
    for (const [name, override] of Object.entries(overrides)) {
      const where = ['tiers', tier, name]
      const base = bases.get(name)
      if (base === undefined)
        throw loc.error(
          where,
          `${dotted(where)}: no policy named ${name}; configured: ${policyNames.join(', ')}`,
        )
      if (!isRecord(override))
        throw loc.error(where, `${dotted(where)}: must be a map of overrides like { limit: 1000 }`)
      if ('id' in override)
        throw loc.error(
          [...where, 'id'],
          `${dotted(where)}.id: the service gives each policy its storage id (name, tier and shape); remove id`,
        )
      if ('onStoreError' in override)
        throw loc.error(
          [...where, 'onStoreError'],
          `${dotted(where)}.onStoreError: set onStoreError on policies.${name}, not per tier`,
        )
      const entry = resolveEntry(loc, where, name, tier, { ...base.policy, ...override }, base.onStoreError)
      entries.set(entry.displayName, entry)
      tierEntries.set(`${name}\u0000${tier}`, entry)
    }
  }
  const tierSet = new Set(tierNames)
  const trustProxy: TrustProxy = top.authz?.trustProxy ?? ['loopback']
  const proxyHeader = top.authz?.proxyHeader ?? 'x-real-ip'
  try {
    clientIpResolver({ trustProxy, header: proxyHeader })
  } catch (error) {
    const message = error instanceof SluiceError ? error.message : String(error)
    throw loc.error(['authz', 'trustProxy'], `authz.${message}`, error)
  }
  // The identity and tier headers come from the same peers as the forwarding header unless told.
  const trustedPeers =
    top.authz?.trustedPeers ??
    (Array.isArray(trustProxy) ? trustProxy.filter((entry) => entry !== 'unix') : ['loopback'])
  try {
    ipMatcher(trustedPeers, 'authz.trustedPeers')
  } catch (error) {
    const message = error instanceof SluiceError ? error.message : String(error)
    throw loc.error(['authz', 'trustedPeers'], message, error)
  }
  const grpc = resolveGrpc(loc, top.grpc)
  checkGrpcPeers(loc, grpc)
  const http = resolveHttp(loc, top.http)
  const dashboard = resolveDashboard(loc, top.dashboard)
  const abuse = resolveAbuse(loc, top.abuse, policyNames)

  return {
    file,
    store: storeSettings.url ?? 'memory',
    storeWritten: storeSettings.url !== undefined,
    storeTls: storeSettings.tls,
    storeCompactValues: storeSettings.compactValues,
    regions,
    prefix: top.prefix ?? 'sluice',
    onStoreError,
    policyNames,
    tierNames,
    entries,
    adminToken: top.admin?.token,
    authz: {
      keyHeader: top.authz?.keyHeader?.toLowerCase(),
      tierHeader: top.authz?.tierHeader?.toLowerCase(),
      trustedPeers,
      trustProxy,
      proxyHeader,
      ipv6Prefix: top.authz?.ipv6Prefix ?? 64,
      storeUnavailableStatus: top.authz?.storeUnavailableStatus ?? 503,
    },
    http,
    dashboard,
    grpc,
    envoy: resolveEnvoy(top.envoy, file),
    abuse,
    waiting: resolveWaiting(loc, top.waiting),
    telemetry: resolveTelemetry(loc, top.telemetry),
    outcomes: resolveOutcomes(loc, top.outcomes, policyNames),
    lookup(name, tier) {
      if (tier === undefined) return byName.get(name)
      if (!tierSet.has(tier)) return undefined
      return tierEntries.get(`${name}\u0000${tier}`) ?? byName.get(name)
    },
  }
}

/** Read and validate a config file. Throws `InvalidConfigError` (also when the file cannot be read). */
export async function loadConfig(file: string): Promise<ServiceConfig> {
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (error) {
    throw new InvalidConfigError(`${file}: cannot read the config file (${(error as Error).message})`, {
      cause: error,
    })
  }
  return parseConfig(text, file)
}

/** The limiter's policy table: display name (`api`, `api.pro`) -> the policy with its storage id. */
export function limiterPolicies(config: ServiceConfig): Record<string, Policy> {
  const out: Record<string, Policy> = {}
  for (const [displayName, entry] of config.entries) {
    out[displayName] = { ...entry.policy, id: entry.id, onStoreError: entry.onStoreError }
  }
  return out
}

function authzClient(config: ServiceConfig): string {
  const { trustProxy, proxyHeader, ipv6Prefix } = config.authz
  const trusted =
    trustProxy === false
      ? 'no proxy trusted'
      : typeof trustProxy === 'number'
        ? `${proxyHeader} through ${trustProxy} hops`
        : trustProxy.length === 0
          ? 'no proxy trusted'
          : `${proxyHeader} from ${trustProxy.join(', ')}`
  return `client IP (${trusted}; IPv6 per /${ipv6Prefix})`
}

function describeHttp(config: ServiceConfig): string {
  const { http, dashboard } = config
  const origins = http.allowedOrigins.size === 0 ? 'none' : [...http.allowedOrigins].join(', ')
  const where = dashboard.port === undefined ? 'main port' : `${dashboard.host}:${dashboard.port}`
  return `  http: browser origins ${origins}; headers ${http.headersTimeoutMs}ms, request ${http.requestTimeoutMs}ms, max ${http.maxConnections} connections; dashboard on ${where}, ${dashboard.token === undefined ? 'no token' : 'token required'}`
}

function describeListeners({ http, grpc }: ServiceConfig): string {
  const grpcLine =
    grpc.port === undefined && grpc.tls === undefined ? '' : `; gRPC ${describeListenerTls(grpc.tls)}`
  return `  listeners: HTTP ${describeListenerTls(http.tls)}${grpcLine}`
}

function describeGrpcBounds({ grpc }: ServiceConfig): string {
  return `  grpc: max ${grpc.maxConnections} connections; handshake ${grpc.handshakeTimeoutMs}ms, idle ${grpc.idleTimeoutMs}ms, call ${grpc.callTimeoutMs}ms; per connection ${grpc.maxConcurrentStreams} streams, ${grpc.maxSessionMemoryMb} MB`
}

/** A human summary of what the config says, for `sluice check`. */
export function describeConfig(config: ServiceConfig): string {
  const lines = [
    `${config.file}: ok`,
    `  store: ${config.regions === undefined ? redactStoreUrl(config.store) : 'multi-region'}  prefix: ${config.prefix}  onStoreError: ${config.onStoreError}`,
    ...describeStoreTls(config.storeTls),
    ...describeStoreCompactValues(config.storeCompactValues),
    ...(config.regions === undefined ? [] : [`  regions: ${describeRegions(config.regions)}`]),
    `  admin endpoints: ${config.adminToken === undefined ? 'off (no admin.token)' : 'on'}`,
    `  authz key: ${config.authz.keyHeader ?? authzClient(config)}${
      config.authz.tierHeader === undefined ? '' : `, tier from ${config.authz.tierHeader}`
    }${
      config.authz.keyHeader === undefined && config.authz.tierHeader === undefined
        ? ''
        : ` (headers believed from ${config.authz.trustedPeers.join(', ') || 'no peer'})`
    }; store unavailable -> ${config.authz.storeUnavailableStatus}`,
    describeHttp(config),
    describeListeners(config),
    ...(config.envoy.config === undefined && config.grpc.port === undefined
      ? []
      : [
          `  envoy: rules ${config.envoy.config ?? '(from --envoy-config)'}, charge ${config.envoy.charge}, gRPC on ${config.grpc.host}:${config.grpc.port ?? 8081} (peers ${config.grpc.trustedPeers.join(', ')})`,
          describeGrpcBounds(config),
        ]),
    ...describeTelemetry(config.telemetry),
    '  policies:',
  ]
  for (const entry of config.entries.values()) {
    const r = entry.resolved
    const label = entry.tier === undefined ? entry.name : `${entry.name} (tier ${entry.tier})`
    const shape =
      r.algorithm === 'concurrency'
        ? `${r.limit} at once, lease timeout ${r.windowMs}ms`
        : `${r.limit} per ${r.windowMs}ms, capacity ${r.capacity}`
    const scope = r.scope === 'global' ? ', scope global' : ''
    lines.push(
      `    ${label}: ${r.algorithm}, ${shape}${calendarText(r)}${scope}${describePenalty(r)}, onStoreError ${entry.onStoreError} [id ${entry.id}]`,
    )
  }
  return `${lines.join('\n')}\n`
}
