// The config's `store:` block for several regions: `regions:` (a Redis URL per region name), the
// local `region` and `syncEvery`. Checked here key by key (unknown keys with a "did you mean", each
// mistake with its file:line); opened by store-regions.ts as a multiRegionStore.

import { parseDuration, SluiceError } from 'sluice'
import type { Locator, Path } from './config-errors.js'
import { dotted, isRecord, refuseUnknownKeys, suggestDuration } from './config-errors.js'
import { parseStoreUrl, redactStoreUrl } from './store-url.js'

/** `store: { region, regions, syncEvery }`: one Redis per region, this instance in `region`. */
export interface RegionsSettings {
  /** The region this instance runs in: one of `urls`. */
  readonly region: string
  /**
   * Each region's store URL (Redis standalone or Cluster), by region name, in file order. URLs may
   * hold passwords: print them only through redactStoreUrl (describeRegions does).
   */
  readonly urls: Readonly<Record<string, string>>
  /** How often this instance writes its counts and reads the other regions' totals. Default 200 ms. */
  readonly syncEveryMs: number
}

/** The keys of the regions block (the block's strict key check and its "did you mean"). */
export const REGIONS_BLOCK_KEYS = ['region', 'regions', 'syncEvery'] as const

/** The library's default exchange period (multiRegionStore's `syncEvery`). */
const DEFAULT_SYNC_EVERY_MS = 200
// Each sync is a round trip to every region: faster than this loads every Redis for little gain;
// slower than a minute leaves a global limit open to each region's full limit for that long.
const MIN_SYNC_EVERY_MS = 10
const MAX_SYNC_EVERY_MS = 60_000
/** The library's rule for region names (they are metric labels and part of the exchange's keys). */
const REGION_NAME = /^[A-Za-z0-9_.-]{1,64}$/
const REDIS_KINDS = new Set(['redis', 'cluster'])
const EXAMPLE =
  '{ region: eu, regions: { eu: redis://eu-redis:6379, us: redis://us-redis:6379 }, syncEvery: 200ms }'

/**
 * Check `store:` written as a block with `regions:`. Throws `InvalidConfigError` naming file:line and
 * the path (`store.regions.us`); URLs in messages are redacted.
 * @example resolveRegions(loc, { region: 'eu', regions: { eu: 'redis://a:6379', us: 'redis://b:6379' } })
 */
export function resolveRegions(loc: Locator, block: Readonly<Record<string, unknown>>): RegionsSettings {
  const at = (...path: Path): Path => ['store', ...path]
  refuseUnknownKeys(loc, at(), block, REGIONS_BLOCK_KEYS)
  const { region, regions, syncEvery } = block
  if (!isRecord(regions))
    throw loc.error(
      at('regions'),
      `store.regions: must be a map of region name to Redis URL, as in store: ${EXAMPLE}`,
    )
  const urls: Record<string, string> = {}
  for (const [name, url] of Object.entries(regions as Record<string, unknown>)) {
    const where = at('regions', name)
    if (!REGION_NAME.test(name))
      throw loc.error(where, `${dotted(where)}: a region name is 1-64 letters, digits, '_', '-' or '.'`)
    if (typeof url !== 'string')
      throw loc.error(where, `${dotted(where)}: must be a Redis URL like redis://host:6379`)
    let kind: string
    let tlsFiles: boolean
    try {
      const spec = parseStoreUrl(url)
      kind = spec.kind
      tlsFiles = 'tlsSettings' in spec && spec.tlsSettings !== undefined
    } catch (error) {
      // parseStoreUrl's message names the URL already redacted: `store "redis://u:***@h": ...`.
      const message = error instanceof SluiceError ? error.message : String(error)
      throw loc.error(where, message.replace(/^store /, `${dotted(where)}: `), error)
    }
    if (!REDIS_KINDS.has(kind))
      throw loc.error(
        where,
        `${dotted(where)}: ${JSON.stringify(redactStoreUrl(url))}: each region's store is Redis (redis://, rediss://, redis+cluster:// or rediss+cluster://)`,
      )
    // The regions' clients are made without TLS files: refused rather than silently not applied.
    if (tlsFiles)
      throw loc.error(
        where,
        `${dotted(where)}: ${JSON.stringify(redactStoreUrl(url))}: tls_ca, tls_cert, tls_key and tls_servername apply to a single store, not to a region (a region's rediss:// uses the system's CAs)`,
      )
    urls[name] = url
  }
  const names = Object.keys(urls)
  if (names.length === 0)
    throw loc.error(at('regions'), `store.regions: name at least one region, as in store: ${EXAMPLE}`)
  if (region === undefined)
    throw loc.error(
      at(),
      `store.region: is required: the region this instance runs in, one of ${names.join(', ')}`,
    )
  if (typeof region !== 'string' || !(region in urls))
    throw loc.error(
      at('region'),
      `store.region: ${JSON.stringify(region)} is not one of store.regions (${names.join(', ')})`,
    )
  return { region, urls, syncEveryMs: syncEveryOf(loc, syncEvery) }
}

/** `store.syncEvery` in ms: a duration from 10ms to 1m, 200ms when absent. */
function syncEveryOf(loc: Locator, value: unknown): number {
  const path = ['store', 'syncEvery']
  if (value === undefined) return DEFAULT_SYNC_EVERY_MS
  let ms: number
  try {
    if (typeof value !== 'string' && typeof value !== 'number') throw new Error('not a duration')
    ms = parseDuration(value, 'store.syncEvery')
  } catch (error) {
    const suggestion = suggestDuration(value)
    const instead = suggestion === undefined ? 'a duration like 200ms or 1s' : suggestion
    throw loc.error(
      path,
      `store.syncEvery: ${JSON.stringify(value)} is not a duration, use ${instead}`,
      error,
    )
  }
  if (ms < MIN_SYNC_EVERY_MS || ms > MAX_SYNC_EVERY_MS)
    throw loc.error(
      path,
      `store.syncEvery: ${JSON.stringify(value)} is out of range; use ${MIN_SYNC_EVERY_MS}ms to 1m (each sync is a round trip to every region)`,
    )
  return ms
}

/** The regions for `sluice check` and logs, every URL redacted: `local eu; eu redis://..., us ...`. */
export function describeRegions(settings: RegionsSettings): string {
  const each = Object.entries(settings.urls).map(([name, url]) => `${name} ${redactStoreUrl(url)}`)
  return `local ${settings.region}; ${each.join(', ')}; sync every ${settings.syncEveryMs}ms`
}
