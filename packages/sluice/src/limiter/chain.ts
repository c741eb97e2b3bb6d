// The decision path, composed once at createLimiter from what is configured:
//   validate -> steps -> oversized cost? -> hybrid? -> penalty? -> block on deny? -> deny cache? -> failover? -> store
// Each optional link is a Store decorator with the store's own contract, so a link that is not
// configured costs nothing, and no call re-decides which links apply.
import type { FailoverSettings, StoreHealth } from '../failover/index.js'
import { protectStore } from '../failover/index.js'
import type { ResolvedPolicy } from '../policy.js'
import { LocalDenyCache, type LocalDenyCacheOptions } from '../scale/deny-cache.js'
import type { HybridBackend } from '../scale/hybrid.js'
import { HybridPolicy } from '../scale/hybrid.js'
import type { Store } from '../store.js'
import { blockOnDenyStore } from './block-on-deny-store.js'
import { denyCacheStore } from './deny-cache-store.js'
import { hybridStore } from './hybrid-store.js'
import { oversizedCostStore } from './oversized-cost-store.js'
import { penaltyStore } from './penalty-store.js'

export interface ChainOptions {
  store: Store
  policies: ReadonlyMap<string, ResolvedPolicy>
  failover: FailoverSettings
  /** Undefined: no deny cache. */
  denyCache: LocalDenyCacheOptions | undefined
  hybrid: HybridBackend | undefined
}

export interface Chain {
  /** The head of the chain: what the limiter calls. */
  readonly store: Store
  /** The failover link's health; always `ok` for an in-process store, which has none. */
  health(): StoreHealth
  /** Forget the deny cache's denial of (policy id, key), if any: its parameters changed. */
  forgetDenial(policyId: string, key: string): void
}

export function buildChain(options: ChainOptions): Chain {
  const { store, policies } = options
  // In-process stores cannot fail the way a network store does, and answer as fast as a cache
  // would: remote ones alone get timeouts, a breaker, fallbacks (src/failover/) and the deny cache.
  const remote = !store.inProcess
  const failover = remote
    ? protectStore(store, { ...options.failover, policies: policies.values() })
    : undefined
  let head: Store = failover ?? store
  // Below the deny cache: a penalty's counts must reach the store every time.
  const counter = head
  const denyCache =
    remote && options.denyCache !== undefined ? new LocalDenyCache(options.denyCache) : undefined
  if (denyCache !== undefined) head = denyCacheStore(head, denyCache, () => store.now())
  // Above the deny cache: the block goes through it, so the cached denial that called for the
  // block is forgotten and the next answer is the store's, blocked.
  if ([...policies.values()].some((p) => p.blockDurationMs !== undefined)) head = blockOnDenyStore(head)
  // Above the deny cache too, for the same reason as the block on deny.
  if ([...policies.values()].some((p) => p.penalty !== undefined)) head = penaltyStore(head, counter)
  const hybrids = new Map<string, HybridPolicy>()
  for (const p of policies.values())
    if (p.syncEveryMs !== undefined && options.hybrid !== undefined)
      hybrids.set(
        p.name,
        new HybridPolicy(p, options.hybrid, { onStoreError: options.failover?.onStoreError }),
      )
  if (hybrids.size > 0) head = hybridStore(head, hybrids)
  // At the head: an oversized step turns the whole check into a peek before any link decides on it.
  if ([...policies.values()].some((p) => p.costAboveCapacity === 'deny')) head = oversizedCostStore(head)
  return {
    store: head,
    forgetDenial(policyId, key) {
      const policy = [...policies.values()].find((p) => p.id === policyId)
      if (denyCache !== undefined && policy !== undefined) denyCache.forget({ policy, key, cost: 1 })
    },
    health: () =>
      failover?.health() ?? {
        status: 'ok',
        circuit: 'closed',
        counts: { calls: 0, errors: 0, timeouts: 0, rejected: 0, degraded: 0, unavailable: 0 },
      },
  }
}
