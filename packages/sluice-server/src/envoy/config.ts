// envoyproxy/ratelimit's YAML configuration, loaded as-is (one domain per file, a folder of files
// merged by domain), plus Sluice's extensions (`algorithm`, `window`, `burst` in `rate_limit`).
// The result is a matching tree per domain and the limiter policies its limits need.
import { createHash } from 'node:crypto'
import { readdir, readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import type { Policy } from 'sluice'
import { InvalidConfigError, parseDuration, SluiceError } from 'sluice'
import type { RateAlgorithmName } from 'sluice/internal'
import { closest, resolvePolicy } from 'sluice/internal'
import type { Document } from 'yaml'
import { isMap, isScalar, isSeq, visit } from 'yaml'
import type { Path } from '../server/config-errors.js'
import { isRecord, type Locator, parseYamlDocument, toPlain } from '../server/config-errors.js'

/**
 * Envoy's units (envoy.type.v3.RateLimitUnit) and their length. A month is 30 days and a year 365,
 * as envoyproxy/ratelimit counts them (fixed windows of that many seconds, not calendar months).
 */
export const UNITS = {
  second: 1_000,
  minute: 60_000,
  hour: 3_600_000,
  day: 86_400_000,
  month: 30 * 86_400_000,
  year: 365 * 86_400_000,
} as const
export type Unit = keyof typeof UNITS

const RATE_ALGORITHMS: readonly RateAlgorithmName[] = [
  'fixed-window',
  'sliding-window-log',
  'sliding-window-counter',
  'token-bucket',
  'gcra',
]

/** A limit a descriptor can reach. */
export interface EnvoyLimit {
  /** `rate_limit.name`, or the composite key (`domain.key_value.subkey`) when unnamed. */
  readonly name: string
  /**
   * Policy in the limiter, named by the composite key (`envoy:domain.key_value`; its storage id is
   * `envoy.<key hash>.<shape hash>`); undefined for `unlimited` and for `requests_per_unit: 0`.
   */
  readonly policyName: string | undefined
  readonly policy: Policy | undefined
  readonly unlimited: boolean
  readonly requestsPerUnit: number
  /** Envoy's unit when the window is one (the reply's `current_limit.unit`), else undefined. */
  readonly unit: Unit | undefined
  readonly algorithm: RateAlgorithmName
  readonly windowMs: number
  /** The most one request can spend (token bucket and GCRA: `burst`). */
  readonly capacity: number
  /** Limit names this one replaces when both apply to one request. */
  readonly replaces: readonly string[]
}

/** One descriptor entry of the configuration and what is below it. */
export interface EnvoyNode {
  readonly key: string
  /** Undefined: any value (a key-only entry); counters are per value. */
  readonly value: string | undefined
  /** `value` holds a `*`: its literal parts between the stars, matched as a glob (decide.ts). */
  readonly wildcard: readonly string[] | undefined
  readonly shadowMode: boolean
  /** Every value matching the wildcard shares one counter (the pattern is the key). */
  readonly shareThreshold: boolean
  readonly detailedMetric: boolean
  readonly limit: EnvoyLimit | undefined
  readonly children: EnvoyLevel
}

/** The entries of one level: exact values first, then wildcards in file order, then key-only. */
export interface EnvoyLevel {
  readonly exact: ReadonlyMap<string, EnvoyNode>
  readonly wildcards: ReadonlyMap<string, readonly EnvoyNode[]>
  readonly keyOnly: ReadonlyMap<string, EnvoyNode>
}

export interface EnvoyRules {
  /** The files loaded, in order. */
  readonly files: readonly string[]
  readonly domains: ReadonlyMap<string, EnvoyLevel>
  /**
   * Limiter policies by the composite key operators wrote (`envoy:domain.key_value`), each with
   * its storage id (`envoy.<key hash>.<shape hash>`: a changed window or algorithm starts fresh
   * counters).
   */
  readonly policies: Readonly<Record<string, Policy>>
}

const TOP_KEYS = ['domain', 'descriptors']
const DESCRIPTOR_KEYS = [
  'key',
  'value',
  'rate_limit',
  'descriptors',
  'shadow_mode',
  'detailed_metric',
  'share_threshold',
  'value_to_metric',
  'quota_mode',
  'metadata',
]
const RATE_LIMIT_KEYS = [
  'unit',
  'requests_per_unit',
  'unlimited',
  'name',
  'replaces',
  'algorithm',
  'window',
  'burst',
]

interface MutableLevel {
  exact: Map<string, EnvoyNode>
  wildcards: Map<string, EnvoyNode[]>
  keyOnly: Map<string, EnvoyNode>
}

const emptyLevel = (): MutableLevel => ({ exact: new Map(), wildcards: new Map(), keyOnly: new Map() })

const hash6 = (text: string) => createHash('sha1').update(text).digest('hex').slice(0, 6)

/** Refuse a key that is not a string (`0.25: test-domain`), as envoyproxy/ratelimit does. */
function validateStringKeys(loc: Locator, doc: Document): void {
  let bad: InvalidConfigError | undefined
  visit(doc, {
    Pair(_, pair) {
      if (isScalar(pair.key) && typeof pair.key.value !== 'string') {
        bad = new InvalidConfigError(
          `${loc.file}:${loc.lineAt(pair.key)}: key is not of type string: ${String(pair.key.value)}`,
        )
        return visit.BREAK
      }
      if (!isScalar(pair.key)) {
        bad = new InvalidConfigError(`${loc.file}:${loc.lineAt(pair.key as never)}: a key must be a string`)
        return visit.BREAK
      }
      return undefined
    },
  })
  if (bad !== undefined) throw bad
  if (doc.contents !== null && !isMap(doc.contents) && !isSeq(doc.contents) && !isScalar(doc.contents))
    throw new InvalidConfigError(`${loc.file}:1: the file must be a map with domain and descriptors`)
}

function unknownKeys(loc: Locator, path: Path, node: Record<string, unknown>, known: string[]): void {
  for (const key of Object.keys(node)) {
    if (known.includes(key)) continue
    const meant = closest(key, known)
    const hint = meant === undefined ? `known keys: ${known.join(', ')}` : `did you mean '${meant}'?`
    throw loc.error([...path, key], `unknown key '${key}'; ${hint}`)
  }
}

/** One file's parsed content: its domain and descriptor list (validated shape, not yet merged). */
interface ParsedFile {
  loc: Locator
  domain: string
  descriptors: unknown[]
}

function parseFile(file: string, text: string): ParsedFile {
  const { doc, loc } = parseYamlDocument(text, file)
  validateStringKeys(loc, doc)
  const raw = toPlain(loc, doc)
  if (!isRecord(raw)) throw loc.error([], 'the file must be a map with domain and descriptors')
  unknownKeys(loc, [], raw, TOP_KEYS)
  const { domain, descriptors } = raw
  if (typeof domain !== 'string' || domain === '')
    throw loc.error(['domain'], 'config file cannot have empty domain (write domain: <name>)')
  if (descriptors !== undefined && descriptors !== null && !Array.isArray(descriptors))
    throw loc.error(['descriptors'], 'descriptors must be a list of descriptors')
  return { loc, domain, descriptors: (descriptors as unknown[] | null | undefined) ?? [] }
}

function bool(loc: Locator, path: Path, value: unknown): boolean {
  if (value === undefined || value === null) return false
  if (typeof value !== 'boolean') throw loc.error(path, `${path.at(-1)} must be true or false`)
  return value
}

function parseLimit(loc: Locator, path: Path, raw: unknown, compositeKey: string): EnvoyLimit {
  if (!isRecord(raw)) throw loc.error(path, 'rate_limit must be a map with unit and requests_per_unit')
  unknownKeys(loc, path, raw, RATE_LIMIT_KEYS)
  const unlimited = bool(loc, [...path, 'unlimited'], raw.unlimited)
  const name = raw.name === undefined || raw.name === null ? compositeKey : raw.name
  if (typeof name !== 'string' || name === '') throw loc.error([...path, 'name'], 'name must be a string')
  const replaces: string[] = []
  if (raw.replaces !== undefined && raw.replaces !== null) {
    if (!Array.isArray(raw.replaces))
      throw loc.error([...path, 'replaces'], 'replaces must be a list like [{ name: other_limit }]')
    raw.replaces.forEach((entry: unknown, i) => {
      const at = [...path, 'replaces', i]
      if (!isRecord(entry)) throw loc.error(at, 'a replaces entry must be a map like { name: other_limit }')
      unknownKeys(loc, at, entry, ['name'])
      if (typeof entry.name !== 'string' || entry.name === '')
        throw loc.error(at, 'should not have an empty replaces entry (write { name: other_limit })')
      if (entry.name === raw.name)
        throw loc.error(at, `replaces should not contain name of same descriptor ('${entry.name}')`)
      replaces.push(entry.name)
    })
  }
  if (unlimited) {
    for (const field of ['unit', 'requests_per_unit', 'algorithm', 'window', 'burst'])
      if (raw[field] !== undefined)
        throw loc.error([...path, field], `should not specify rate limit ${field} when unlimited`)
    return {
      name,
      policyName: undefined,
      policy: undefined,
      unlimited: true,
      requestsPerUnit: 0,
      unit: undefined,
      algorithm: 'fixed-window',
      windowMs: 0,
      capacity: 0,
      replaces,
    }
  }
  const rpu = raw.requests_per_unit
  if (typeof rpu !== 'number' || !Number.isSafeInteger(rpu) || rpu < 0 || rpu > 0xffff_ffff)
    throw loc.error(
      [...path, 'requests_per_unit'],
      'requests_per_unit must be a whole number from 0 to 4294967295',
    )
  let unit: Unit | undefined
  if (raw.unit !== undefined) {
    const written = String(raw.unit).toLowerCase()
    if (!(written in UNITS))
      throw loc.error(
        [...path, 'unit'],
        `invalid rate limit unit '${String(raw.unit)}'; use one of ${Object.keys(UNITS).join(', ')}`,
      )
    unit = written as Unit
  }
  let windowMs: number
  if (raw.window !== undefined) {
    if (unit !== undefined)
      throw loc.error([...path, 'window'], 'give either unit or window (a Sluice extension), not both')
    try {
      windowMs = parseDuration(raw.window as string, 'window')
    } catch (error) {
      const message = error instanceof SluiceError ? error.message : String(error)
      throw loc.error([...path, 'window'], message, error)
    }
    unit = (Object.keys(UNITS) as Unit[]).find((u) => UNITS[u] === windowMs)
  } else if (unit !== undefined) windowMs = UNITS[unit]
  else throw loc.error(path, `rate_limit needs a unit (${Object.keys(UNITS).join(', ')}) or unlimited: true`)
  const algorithm = (raw.algorithm ?? 'fixed-window') as RateAlgorithmName
  if (!RATE_ALGORITHMS.includes(algorithm))
    throw loc.error(
      [...path, 'algorithm'],
      `algorithm must be one of ${RATE_ALGORITHMS.join(', ')} (got ${JSON.stringify(raw.algorithm)})`,
    )
  if (raw.burst !== undefined && algorithm !== 'token-bucket' && algorithm !== 'gcra')
    throw loc.error([...path, 'burst'], 'burst is for algorithm token-bucket or gcra')
  if (rpu === 0) {
    // Envoy's way to ban: always over the limit, nothing to count.
    return {
      name,
      policyName: undefined,
      policy: undefined,
      unlimited: false,
      requestsPerUnit: 0,
      unit,
      algorithm,
      windowMs,
      capacity: 0,
      replaces,
    }
  }
  const policy = {
    // Counters are keyed on the id: a reloaded limit with the same composite key, algorithm and
    // window keeps its counters, and a changed algorithm or window starts fresh ones.
    id: `envoy.${hash6(compositeKey)}.${hash6(`${algorithm}|${windowMs}`)}`,
    algorithm,
    limit: rpu,
    window: windowMs,
    ...(raw.burst === undefined ? {} : { burst: raw.burst }),
  } as Policy
  const policyName = displayName(compositeKey)
  let capacity: number
  try {
    capacity = resolvePolicy(policyName, policy).capacity
  } catch (error) {
    // The policy's own name and key path mean nothing in this file: name the key as written here.
    const prefix = `policies.${policyName}`
    let message = String(error)
    let at = path
    if (error instanceof SluiceError && error.message.startsWith(prefix)) {
      const rest = error.message.slice(prefix.length)
      const field = /^\.([A-Za-z]+): /.exec(rest)?.[1]
      message = rest.replace(/^(\.[A-Za-z]+)?: /, '')
      const written = field === 'limit' ? 'requests_per_unit' : field
      if (written !== undefined && raw[written] !== undefined) at = [...path, written]
    }
    throw loc.error(at, `rate_limit: ${message}`, error)
  }
  return {
    name,
    policyName,
    policy,
    unlimited: false,
    requestsPerUnit: rpu,
    unit,
    algorithm,
    windowMs,
    capacity,
    replaces,
  }
}

interface Builder {
  seen: Set<string>
  policies: Record<string, Policy>
  limits: EnvoyLimit[]
}

/** `envoy:<composite key>`, the policy name decisions and metrics show; a policy name's limits kept. */
function displayName(compositeKey: string): string {
  const name = `envoy:${compositeKey.replace(/\p{Cc}/gu, '?')}`
  return name.length <= 256 ? name : `${name.slice(0, 240)}~${hash6(compositeKey)}`
}

function addDescriptors(
  loc: Locator,
  path: Path,
  list: unknown[],
  level: MutableLevel,
  parentKey: string,
  out: Builder,
): void {
  list.forEach((raw, i) => {
    const at = [...path, i]
    if (!isRecord(raw)) throw loc.error(at, `yaml file contains list of type other than map: ${String(raw)}`)
    unknownKeys(loc, at, raw, DESCRIPTOR_KEYS)
    const { key, value } = raw
    if (typeof key !== 'string' || key === '') throw loc.error(at, 'descriptor has empty key')
    if (value !== undefined && value !== null && typeof value !== 'string' && typeof value !== 'number')
      throw loc.error([...at, 'value'], 'value must be a string')
    const valueText = value === undefined || value === null || value === '' ? undefined : String(value)
    const compositeKey = `${parentKey}.${valueText === undefined ? key : `${key}_${valueText}`}`
    if (out.seen.has(compositeKey))
      throw loc.error(at, `duplicate descriptor composite key '${compositeKey}'`)
    out.seen.add(compositeKey)
    const limit =
      raw.rate_limit === undefined || raw.rate_limit === null
        ? undefined
        : parseLimit(loc, [...at, 'rate_limit'], raw.rate_limit, compositeKey)
    if (limit?.policyName !== undefined && limit.policy !== undefined) {
      out.policies[limit.policyName] = limit.policy
    }
    if (limit !== undefined) out.limits.push(limit)
    const children = emptyLevel()
    const node: EnvoyNode = {
      key,
      value: valueText,
      wildcard: valueText?.includes('*') ? valueText.split('*') : undefined,
      shadowMode: bool(loc, [...at, 'shadow_mode'], raw.shadow_mode),
      shareThreshold: bool(loc, [...at, 'share_threshold'], raw.share_threshold),
      detailedMetric: bool(loc, [...at, 'detailed_metric'], raw.detailed_metric),
      limit,
      children,
    }
    if (raw.descriptors !== undefined && raw.descriptors !== null) {
      if (!Array.isArray(raw.descriptors))
        throw loc.error([...at, 'descriptors'], 'descriptors must be a list of descriptors')
      addDescriptors(loc, [...at, 'descriptors'], raw.descriptors, children, compositeKey, out)
    }
    if (valueText === undefined) level.keyOnly.set(key, node)
    else if (node.wildcard !== undefined) {
      const list = level.wildcards.get(key) ?? []
      list.push(node)
      level.wildcards.set(key, list)
    } else level.exact.set(`${key}\u0000${valueText}`, node)
  })
}

/**
 * Build the rules from files' texts (a folder's files, in name order). Files of one domain merge;
 * the same descriptor twice is refused. Throws `InvalidConfigError` naming file, line and problem.
 * @example parseEnvoyConfig([{ file: 'rl.yaml', text: 'domain: rl\ndescriptors: []\n' }])
 */
export function parseEnvoyConfig(sources: readonly { file: string; text: string }[]): EnvoyRules {
  const out: Builder = { seen: new Set(), policies: {}, limits: [] }
  const domains = new Map<string, MutableLevel>()
  const domainFile = new Map<string, string>()
  for (const { file, text } of sources) {
    const parsed = parseFile(file, text)
    const level = domains.get(parsed.domain) ?? emptyLevel()
    // A second file of a domain with nothing to merge is envoyproxy/ratelimit's duplicate domain.
    if (domains.has(parsed.domain) && parsed.descriptors.length === 0)
      throw parsed.loc.error(
        ['domain'],
        `duplicate domain '${parsed.domain}' (also in ${domainFile.get(parsed.domain)})`,
      )
    domains.set(parsed.domain, level)
    domainFile.set(parsed.domain, file)
    addDescriptors(parsed.loc, ['descriptors'], parsed.descriptors, level, parsed.domain, out)
  }
  return {
    files: sources.map((s) => s.file),
    domains,
    policies: out.policies,
  }
}

/** The files of `path`: itself, or a folder's `.yaml` / `.yml` files in name order (not recursive). */
async function filesOf(path: string): Promise<string[]> {
  let info: Awaited<ReturnType<typeof stat>>
  try {
    info = await stat(path)
  } catch (error) {
    throw new InvalidConfigError(`${path}: cannot read the Envoy config (${(error as Error).message})`, {
      cause: error,
    })
  }
  if (!info.isDirectory()) return [path]
  const names = (await readdir(path)).filter((n) => /\.ya?ml$/i.test(n)).sort()
  if (names.length === 0) throw new InvalidConfigError(`${path}: the folder holds no .yaml files`)
  return names.map((n) => join(path, n))
}

/** Read the Envoy config at `paths` (files or folders). Throws `InvalidConfigError`. */
export async function loadEnvoyConfig(...paths: string[]): Promise<EnvoyRules> {
  const sources: { file: string; text: string }[] = []
  for (const path of paths) {
    for (const file of await filesOf(path)) {
      try {
        sources.push({ file, text: await readFile(file, 'utf8') })
      } catch (error) {
        throw new InvalidConfigError(`${file}: cannot read the file (${(error as Error).message})`, {
          cause: error,
        })
      }
    }
  }
  return parseEnvoyConfig(sources)
}

/** What `sluice check --envoy-config` prints: domains and limits. */
export function describeEnvoyConfig(rules: EnvoyRules): string {
  const lines = [`envoy config: ${rules.files.join(', ')}: ok`]
  const walk = (level: EnvoyLevel, prefix: string, depth: number) => {
    const nodes = [
      ...level.exact.values(),
      ...[...level.wildcards.values()].flat(),
      ...level.keyOnly.values(),
    ]
    for (const node of nodes) {
      const label = `${prefix}${node.key}${node.value === undefined ? '' : `=${node.value}`}`
      const l = node.limit
      const what =
        l === undefined
          ? ''
          : l.unlimited
            ? ': unlimited'
            : `: ${l.requestsPerUnit} per ${l.unit ?? `${l.windowMs}ms`}, ${l.algorithm}${node.shadowMode ? ', shadow mode' : ''}`
      lines.push(`${'  '.repeat(depth)}${label}${what}`)
      walk(node.children, '', depth + 1)
    }
  }
  for (const [domain, level] of rules.domains) {
    lines.push(`  domain ${domain}:`)
    walk(level, '', 2)
  }
  return `${lines.join('\n')}\n`
}
