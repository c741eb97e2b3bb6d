// What the dashboard shows of per-key overrides: a copy of the overrides in force, read through the
// limiter in force for every configured policy and tier, again after each change made through this
// instance and every few seconds (changes made through other instances), so the snapshot, which is
// synchronous, reads a list that is there.
import type { Override } from 'sluice'
import type { ServiceContext } from './types.js'

/** How often the copy is read again for changes made elsewhere. */
const FEED_REFRESH_MS = 5000

export interface OverrideFeed {
  readonly current: () => readonly Override[]
  refresh(): Promise<void>
  stop(): void
}

export function overrideFeed(ctx: ServiceContext): OverrideFeed {
  let current: readonly Override[] = []
  let reading: Promise<void> | undefined
  // What the copy was read at: the store's records version, under the limiter then in force (a
  // reload may change the policies without a new version).
  let readAt: { version: string; limiter: ServiceContext['limiter'] } | undefined
  async function read(): Promise<void> {
    const limiter = ctx.limiter
    const version = await limiter.store.records.version()
    if (readAt !== undefined && readAt.version === version && readAt.limiter === limiter) return
    const out: Override[] = []
    // A store where no record was ever put holds no override: nothing to read.
    if (version !== '')
      for (const entry of ctx.config.entries.values()) {
        for (const o of await limiter.listOverrides(entry.displayName))
          out.push({ ...o, policy: entry.displayName })
      }
    current = out
    readAt = { version, limiter }
  }
  const feed: OverrideFeed = {
    // An override that ended by its ttl changes no version: it leaves the copy when it ends.
    current: () => {
      const now = Date.now()
      return current.filter((o) => o.expiresAt === undefined || o.expiresAt > now)
    },
    refresh() {
      // A store without records, or one not answering: the dashboard keeps the last copy.
      reading ??= read()
        .catch(() => {})
        .finally(() => {
          reading = undefined
        })
      return reading
    },
    stop: () => clearInterval(timer),
  }
  const timer = setInterval(() => void feed.refresh(), FEED_REFRESH_MS)
  timer.unref()
  void feed.refresh()
  return feed
}
