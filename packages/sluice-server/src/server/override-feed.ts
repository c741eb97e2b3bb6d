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
  async function read(): Promise<void> {
    const out: Override[] = []
    for (const entry of ctx.config.entries.values()) {
      for (const o of await ctx.limiter.listOverrides(entry.displayName))
        out.push({ ...o, policy: entry.displayName })
    }
    current = out
  }
  const feed: OverrideFeed = {
    current: () => current,
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
