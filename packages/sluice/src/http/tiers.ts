// Tiers: an async resolver maps a request to a tier name; answers are cached briefly per identity,
// concurrent look-ups of one identity share one call, and unknown names fall back to the default.
import type { HttpLogger, HttpRequestInfo, TierOptions } from './types.js'

export interface TierResolver {
  /** The tier of a request (always a configured name), or throws when `onError: 'fail'`. */
  tierOf(request: HttpRequestInfo, identity: string | undefined): Promise<string>
}

export function tierResolver(
  options: TierOptions,
  known: ReadonlySet<string>,
  logger: HttpLogger,
): TierResolver {
  const cacheMs = options.cacheMs ?? 30_000
  const cacheSize = options.cacheSize ?? 10_000
  const failMode = options.onError ?? 'default'
  const cache = new Map<string, { tier: string; expiresAt: number }>()
  const pending = new Map<string, Promise<string>>()

  const normalise = (name: unknown): string =>
    typeof name === 'string' && known.has(name) ? name : options.default

  /** The tier, and whether it may be cached (a fallback after a failure is not). */
  async function resolve(request: HttpRequestInfo): Promise<{ tier: string; cacheable: boolean }> {
    try {
      return { tier: normalise(await options.resolve(request)), cacheable: true }
    } catch (error) {
      logger.error({ err: error }, 'sluice: tier resolver failed')
      if (failMode === 'fail') throw error
      return { tier: options.default, cacheable: false }
    }
  }

  return {
    async tierOf(request, identity) {
      if (identity === undefined || cacheMs <= 0) return (await resolve(request)).tier
      const now = Date.now()
      const hit = cache.get(identity)
      if (hit !== undefined && hit.expiresAt > now) return hit.tier
      const inFlight = pending.get(identity)
      if (inFlight !== undefined) return inFlight
      const lookup = resolve(request).then(
        ({ tier, cacheable }) => {
          pending.delete(identity)
          if (!cacheable) return tier
          cache.delete(identity)
          if (cache.size >= cacheSize) {
            // Drop the oldest insertion: Maps iterate in insertion order.
            const oldest = cache.keys().next()
            if (!oldest.done) cache.delete(oldest.value)
          }
          cache.set(identity, { tier, expiresAt: Date.now() + cacheMs })
          return tier
        },
        (error: unknown) => {
          pending.delete(identity)
          throw error
        },
      )
      pending.set(identity, lookup)
      return lookup
    },
  }
}
