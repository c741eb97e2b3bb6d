// The `store: { region, regions, syncEvery }` block opened: one ioredis client per region (the same
// fail-fast options as a single Redis store) under the library's multiRegionStore, as the handle
// the service decides on, with every region's health for /readyz, /metrics and the dashboard.
import { StoreError } from 'sluice'
import { forwardStore } from 'sluice/store'
import type { RegionsSettings } from './config-regions.js'
import {
  connectionCause,
  loadIoredis,
  type OpenStoreOptions,
  parseStoreUrl,
  redactStoreUrl,
  redisClient,
  type StoreHandle,
  watchConnection,
} from './store-url.js'

/**
 * Open a multi-region store. Resolves once the local region's Redis answers and holds the decision
 * scripts, or rejects with a
 * `StoreError`; another region that does not answer is logged and retried in the background (its
 * health shows it stale), since global limits keep deciding on the last totals it gave.
 */
export async function openRegionStore(
  settings: RegionsSettings,
  options: OpenStoreOptions,
): Promise<StoreHandle> {
  const ioredis = await loadIoredis()
  const { multiRegionStore, redisStore } = await import('sluice/redis')
  const opened = Object.entries(settings.urls).map(([region, url]) => {
    const spec = parseStoreUrl(url)
    // resolveRegions lets only Redis URLs through.
    if (spec.kind !== 'redis' && spec.kind !== 'cluster')
      throw new StoreError(`region ${region}: ${spec.redacted} is not a Redis store`)
    const client = redisClient(spec, ioredis)
    const connection = watchConnection(client, spec.redacted, options.logger)
    // A region that was down at start counts as serving from its first connection on, so that a
    // later loss is logged once like any other.
    client.once('ready', () => connection.serving())
    return { region, redacted: spec.redacted, client, connection }
  })
  const local = opened.find((o) => o.region === settings.region)!
  const disconnectAll = () => {
    for (const o of opened) o.client.disconnect()
  }
  for (const o of opened) {
    if (o === local) continue
    o.client.connect().catch((error: unknown) => {
      options.logger?.warn(
        { store: o.redacted, region: o.region, error: connectionCause(error, o.connection.lastError()) },
        `region ${o.region} (${o.redacted}) does not answer yet; retrying, its health shows it stale meanwhile`,
      )
    })
  }
  // The decision scripts live in the local Redis's script cache, which every store on it shares: a
  // redisStore of the service's own loads them (and a Cluster's slot secret) before /readyz says
  // ready, and its ready() as the probe puts back what Redis lost, as for a single Redis store.
  const scripts = redisStore(local.client, { prefix: options.prefix })
  try {
    await local.client.connect()
    await scripts.ready()
  } catch (error) {
    disconnectAll()
    const cause = connectionCause(error, local.connection.lastError())
    throw new StoreError(`cannot connect to region ${local.region} (${local.redacted}): ${cause}`, {
      cause: error,
    })
  }
  const store = multiRegionStore({
    region: settings.region,
    regions: Object.fromEntries(opened.map((o) => [o.region, o.client])),
    syncEvery: settings.syncEveryMs,
    prefix: options.prefix,
  })
  // The service's handle owns the clients: closing the store (its last counts flushed) closes them.
  const owned = forwardStore(store, {
    async close() {
      await store.close()
      await scripts.close()
      await Promise.all(opened.map((o) => o.client.quit().catch(() => o.client.disconnect())))
    },
  })
  const each = Object.entries(settings.urls).map(([region, url]) => `${region} ${redactStoreUrl(url)}`)
  return {
    store: owned,
    description: `multi-region, local ${settings.region} (${each.join(', ')})`,
    ping: () => scripts.ready(),
    regions: () => store.regions(),
    shares: () => store.shares(),
  }
}
