// The loop of every exactness worker (Redis, PostgreSQL, memcached): `lanes` requests in flight per
// algorithm against one key, `attempts` in all, counting what the store admitted.
import { type RateAlgorithmName, resolvePolicy } from '../../packages/sluice/src/policy.js'
import type { Store } from '../../packages/sluice/src/store.js'

export interface HammerPlan {
  algorithms: readonly RateAlgorithmName[]
  /** Requests per algorithm, shared by its lanes. */
  attempts: number
  /** Requests in flight per algorithm. */
  lanes: number
  limit: number
  window: string
  /** Count a failed call under `<algorithm> failed` instead of letting it fail the worker. */
  countFailures?: boolean
}

/** Admitted (and, with `countFailures`, failed) calls per algorithm, all on the key `hot`. */
export async function hammerOneKey(store: Store, plan: HammerPlan): Promise<Record<string, number>> {
  const counts: Record<string, number> = {}
  await Promise.all(
    plan.algorithms.map(async (algorithm) => {
      const policy = resolvePolicy(algorithm.replaceAll('-', '_'), {
        algorithm,
        limit: plan.limit,
        window: plan.window,
      })
      let sent = 0
      let ok = 0
      let failed = 0
      const once = async () => {
        const [result] = await store.apply([{ policy, key: 'hot', cost: 1 }], 'consume')
        if (result!.allowed) ok++
      }
      const lane = async () => {
        while (sent < plan.attempts) {
          sent++
          if (!plan.countFailures) await once()
          else await once().catch(() => failed++)
        }
      }
      await Promise.all(Array.from({ length: plan.lanes }, lane))
      counts[algorithm] = ok
      if (plan.countFailures) counts[`${algorithm} failed`] = failed
    }),
  )
  return counts
}
