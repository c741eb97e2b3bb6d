// The config's `store:`: a store URL, or a block `{ url, tls: { ca, cert, key, servername },
// compactValues }` naming the TLS files and server name beside it, and the Redis store's
// `compactValues`. Checked here, keys strictly, with file:line.
import { SluiceError } from 'sluice'
import type { Locator, Path } from './config-errors.js'
import { dotted, isRecord, refuseUnknownKeys } from './config-errors.js'
import type { StoreTlsSettings } from './store-tls.js'
import { describeTlsSettings } from './store-tls.js'
import { parseStoreUrl, storeCompactValues, storeTlsSettings } from './store-url.js'

const BLOCK_KEYS = ['url', 'tls', 'compactValues'] as const
const TLS_KEYS = ['ca', 'cert', 'key', 'servername'] as const

/** The store as the config writes it: the URL (if the file names one) and the TLS settings (if any). */
export interface StoreSettings {
  readonly url: string | undefined
  readonly tls: StoreTlsSettings | undefined
  /** The Redis store's `compactValues` (false: the value layouts, for a rolling deploy from a release before the compact ones). */
  readonly compactValues?: boolean | undefined
}

const SHAPE =
  'must be a store URL (memory, redis://host:port, rediss://, redis+cluster://, memcached://, postgres://) or a map { url, tls: { ca, cert, key, servername }, compactValues }'

function text(loc: Locator, path: Path, value: unknown, what: string): string {
  if (typeof value !== 'string' || value.trim() === '')
    throw loc.error(path, `${dotted(path)}: must be ${what}`)
  return value
}

function tlsBlock(loc: Locator, value: unknown): StoreTlsSettings {
  const at = ['store', 'tls']
  if (!isRecord(value))
    throw loc.error(
      at,
      'store.tls: must be a map like { ca: /etc/sluice/redis-ca.pem, servername: cache.internal }',
    )
  refuseUnknownKeys(loc, at, value, TLS_KEYS)
  const settings: Record<string, string> = {}
  for (const [key, given] of Object.entries(value)) {
    settings[key] = text(loc, [...at, key], given, key === 'servername' ? 'a host name' : 'a file path')
  }
  return settings
}

/**
 * Read `store:` (undefined when the file has none). The URL and the TLS settings are checked
 * together here, so `sluice check` and a reload refuse what the start would refuse; messages print
 * the URL redacted.
 */
export function resolveStoreSettings(loc: Locator, raw: unknown): StoreSettings {
  if (raw === undefined) return { url: undefined, tls: undefined }
  let url: string | undefined
  let tls: StoreTlsSettings | undefined
  let compactValues: boolean | undefined
  if (typeof raw === 'string') url = raw
  else if (isRecord(raw)) {
    refuseUnknownKeys(loc, ['store'], raw, BLOCK_KEYS)
    if (raw.url !== undefined) url = text(loc, ['store', 'url'], raw.url, 'a store URL')
    if (raw.tls !== undefined) tls = tlsBlock(loc, raw.tls)
    if (raw.compactValues !== undefined) {
      if (typeof raw.compactValues !== 'boolean')
        throw loc.error(['store', 'compactValues'], 'store.compactValues: must be true or false')
      compactValues = raw.compactValues
    }
  } else throw loc.error(['store'], `store: ${SHAPE}`)
  if (url !== undefined) {
    const path = typeof raw === 'string' ? ['store'] : ['store', 'url']
    try {
      const spec = parseStoreUrl(url)
      storeTlsSettings(spec, tls)
      storeCompactValues(spec, compactValues)
    } catch (error) {
      const message = error instanceof SluiceError ? error.message : String(error)
      throw loc.error(path, message.replace(/^store /, `${dotted(path)}: `), error)
    }
  }
  return compactValues === undefined ? { url, tls } : { url, tls, compactValues }
}

/** `sluice check`'s line for `store.compactValues`, or none when the config leaves it to the store's default. */
export function describeStoreCompactValues(compactValues: boolean | undefined): string[] {
  return compactValues === undefined ? [] : [`  store compactValues: ${compactValues}`]
}

/** `sluice check`'s line for the TLS settings (paths, never contents), or none. */
export function describeStoreTls(tls: StoreTlsSettings | undefined): string[] {
  return tls === undefined ? [] : [`  store tls: ${describeTlsSettings(tls)}`]
}
