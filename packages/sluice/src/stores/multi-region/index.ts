// multiRegionStore: one Redis per region. `scope: 'region'` policies are decided exactly on the
// local region's Redis; `scope: 'global'` ones are decided there too (one round trip), against the
// region's share of the limit. Shares follow each region's demand: the exchange (exchange.ts) hands
// what a region does not need to the regions that ask, every `syncEvery` (shares.ts). The bound is
// derived in docs/topologies.md.
import { createHash } from 'node:crypto'
import type { Duration } from '../../duration.js'
import { parseDuration } from '../../duration.js'
import { InvalidOptionsError, UnsupportedError } from '../../errors.js'
import { checkKnownKeys, isOptionsObject, keysOf } from '../../options.js'
import type { ResolvedPolicy } from '../../policy.js'
import type { Step, StepResult, Store } from '../../store.js'
import { adaptClient, clientProblem, NOT_A_CLIENT, type RedisClient } from '../redis/client.js'
import { redisStore } from '../redis/index.js'
import { Exchange, type PolicyShare, type RegionLink } from './exchange.js'

export type { PolicyShare } from './exchange.js'

export interface MultiRegionStoreOptions {
  /** The region this instance runs in: one of the names in `regions`. */
  region: string
  /** One client (standalone or Cluster, ioredis or node-redis) per region, by region name. */
  regions: Readonly<Record<string, RedisClient>>
  /** How often this instance writes its counts and reads the other regions' totals. Default `200ms`. */
  syncEvery?: Duration
  /** A region whose totals are older than this is reported stale. Default 5 x `syncEvery`. */
  staleAfter?: Duration
  /** Key namespace, as `redisStore`'s (default `sluice`); the same in every region. */
  prefix?: string
}

/** What one region looks like from this instance. */
export interface RegionHealth {
  readonly region: string
  /** The region this instance runs in (its counts are written there, never read back). */
  readonly local: boolean
  /** Its totals (or, for the local region, this instance's last write) are older than `staleAfter`. */
  readonly stale: boolean
  /** ms since the last exchange with it answered; `null` before the first one. */
  readonly lastSyncAgeMs: number | null
  /** The last failure of the exchange, while it fails. */
  readonly error?: string
}

export interface MultiRegionStore extends Store {
  apply(steps: readonly Step[], mode: 'consume' | 'peek'): Promise<StepResult[]>
  readonly region: string
  /** Every region's freshness, the local one first. */
  regions(): RegionHealth[]
  /**
   * This region's share of each global policy's limit, over the keys this instance tracks (the
   * `sluice_region_share_ratio{policy}` gauge).
   */
  shares(): PolicyShare[]
  /** This region's share of one global (policy id, key), in units; `undefined` for a key this instance does not track. */
  keyShare(policyId: string, key: string): number | undefined
  /** Completed syncs of this instance (each: write, read every region, hand over). */
  readonly syncs: number
  /** Write this instance's counts, read every region's demand and ledgers, hand over what is not needed (also runs every `syncEvery`). */
  sync(): Promise<void>
}

const OPTION_KEYS = keysOf<MultiRegionStoreOptions>({
  region: true,
  regions: true,
  syncEvery: true,
  staleAfter: true,
  prefix: true,
})
const REGION_NAME = /^[A-Za-z0-9_.-]{1,64}$/
/**
 * A denial of a global policy in a region whose share is spent says retry after at most this many
 * sync periods: a hand-over takes up to three (docs/topologies.md).
 */
const RETRY_SYNCS = 3

/**
 * A store for several regions, each with its own Redis.
 * @example
 * const store = multiRegionStore({ region: 'eu', regions: { eu: redisEu, us: redisUs }, syncEvery: '200ms' })
 * createLimiter({ store, policies: { api: { algorithm: 'sliding-window-counter', limit: 1000, window: '1m', scope: 'global' } } })
 */
export function multiRegionStore(options: MultiRegionStoreOptions): MultiRegionStore {
  if (!isOptionsObject(options))
    throw new InvalidOptionsError('multiRegionStore: pass { region, regions: { name: client, ... } }')
  checkKnownKeys('multiRegionStore', options, OPTION_KEYS)
  const { region, regions } = options
  if (!isOptionsObject(regions) || Object.keys(regions).length === 0)
    throw new InvalidOptionsError('multiRegionStore: regions must map each region name to its Redis client')
  const links: RegionLink[] = []
  for (const [name, client] of Object.entries(regions)) {
    if (!REGION_NAME.test(name))
      throw new InvalidOptionsError(
        `multiRegionStore: region name ${JSON.stringify(name)}: use 1-64 letters, digits, '_', '-' or '.'`,
      )
    const problem = clientProblem(client)
    const adapter = problem === undefined ? adaptClient(client) : undefined
    if (adapter === undefined)
      throw new InvalidOptionsError(`multiRegionStore: regions.${name}: ${problem ?? NOT_A_CLIENT}`)
    links.push({ region: name, adapter })
  }
  if (typeof region !== 'string' || !(region in regions))
    throw new InvalidOptionsError(
      `multiRegionStore: region ${JSON.stringify(region)} is not one of regions (${Object.keys(regions).join(', ')})`,
    )
  const syncEveryMs = parseDuration(options.syncEvery ?? '200ms', 'multiRegionStore syncEvery')
  const staleAfterMs =
    options.staleAfter === undefined
      ? 5 * syncEveryMs
      : parseDuration(options.staleAfter, 'multiRegionStore staleAfter')
  if (staleAfterMs <= syncEveryMs)
    throw new InvalidOptionsError(
      `multiRegionStore: staleAfter (${staleAfterMs}ms) must be longer than syncEvery (${syncEveryMs}ms)`,
    )
  const prefix = options.prefix ?? 'sluice'
  // redisStore validates the prefix (and owns every decision key).
  const local = redisStore(regions[region]!, { prefix })
  const exchange = new Exchange({
    prefix,
    local: links.find((l) => l.region === region)!,
    remotes: links.filter((l) => l.region !== region),
    // An exchange call that has not answered by the time its region would be stale has failed.
    timeoutMs: staleAfterMs,
    staleAfterMs,
    sha: (source) => createHash('sha1').update(source).digest('hex'),
  })
  const startedAt = Date.now()

  let closed = false
  let syncing: Promise<void> | undefined
  const sync = (): Promise<void> => {
    syncing ??= exchange.sync(Date.now()).finally(() => {
      syncing = undefined
    })
    return syncing
  }
  const timer = setInterval(() => void sync(), syncEveryMs)
  timer.unref()

  /** The steps as the local Redis decides them: global limits lowered to the region's share. */
  async function localSteps(
    steps: readonly Step[],
    nowMs: number,
  ): Promise<{ steps: Step[]; full: Set<number> }> {
    const loading: Promise<void>[] = []
    for (const step of steps) {
      if (step.policy.scope !== 'global') continue
      const ready = exchange.ready(step.policy, step.key, nowMs)
      if (ready !== undefined) loading.push(ready)
    }
    // First sight of a key: what this region has handed over is read once before it decides on it.
    if (loading.length > 0) await Promise.all(loading)
    const out: Step[] = []
    const full = new Set<number>()
    for (let i = 0; i < steps.length; i++) {
      const step = steps[i]!
      if (step.policy.scope !== 'global') {
        out.push(step)
        continue
      }
      const share = exchange.share(step.policy, step.key)
      if (share >= step.cost) {
        out.push(share === step.policy.limit ? step : { ...step, policy: lowered(step.policy, share) })
        continue
      }
      // The region holds less than the cost (the others hold the rest): denied whatever the local
      // count. The local Redis is still asked (peek, limit 1) for the other layers' and this key's numbers.
      full.add(i)
      out.push({ ...step, cost: 1, policy: lowered(step.policy, 1) })
    }
    return { steps: out, full }
  }

  const store: MultiRegionStore = {
    name: 'multi-region',
    inProcess: false,
    now: Date.now,
    region,
    // The local region's records: an override or list entry applies in the region it was set in.
    records: local.records,
    // A forced charge would have to reach the other regions' shares too: refused, nothing written.
    async charge() {
      throw new UnsupportedError(
        'multi-region store: no forced charge (settle above the estimate); settle at most the estimate',
      )
    },
    async apply(steps, mode) {
      if (closed) return local.apply(steps, mode)
      const nowMs = Date.now()
      const { steps: asked, full } = await localSteps(steps, nowMs)
      const denied = full.size > 0
      const globals = mode === 'consume' ? steps.filter((s) => s.policy.scope === 'global') : []
      // Counted as asked (the demand shares follow) and as in flight until answered, so a hand-over
      // meanwhile leaves what this decision may take.
      for (const s of globals) exchange.begin(s.policy, s.key, nowMs, s.cost)
      let results: StepResult[]
      try {
        results = await local.apply(asked, denied ? 'peek' : mode)
      } catch (error) {
        for (const s of globals) exchange.end(s.policy, s.key, nowMs, s.cost, 0)
        throw error
      }
      const admitted = !denied && results.every((r) => r.allowed)
      for (const s of globals) exchange.end(s.policy, s.key, nowMs, s.cost, admitted ? s.cost : 0)
      if (denied)
        for (const i of full) {
          const r = results[i]!
          const w = steps[i]!.policy.windowMs
          // The end of this window is when the region's own count starts to weigh less.
          const untilWindowEnd = w - (nowMs % w)
          results[i] = {
            ...r,
            allowed: false,
            remaining: 0,
            retryAfterMs: Math.max(r.retryAfterMs, untilWindowEnd),
            resetMs: Math.max(r.resetMs, untilWindowEnd),
          }
        }
      // A layered check is all or nothing: with one layer full, none was committed (peek).
      for (let i = 0; i < steps.length; i++) {
        const step = steps[i]!
        const r = results[i]!
        if (step.policy.scope !== 'global' || r.allowed || r.blocked) continue
        // While other regions hold part of the limit, a share can arrive at any sync: the retry (and
        // a deny cache in front of this store) waits a few syncs, not the window's end.
        if (exchange.share(step.policy, step.key) < step.policy.limit)
          results[i] = { ...r, retryAfterMs: Math.min(r.retryAfterMs, RETRY_SYNCS * syncEveryMs) }
      }
      return results
    },
    async refund(steps) {
      await local.refund(steps)
      const nowMs = Date.now()
      for (const step of steps)
        if (step.policy.scope === 'global') exchange.add(step.policy, step.key, nowMs, -step.cost)
    },
    block: (steps, durationMs) => local.block(steps, durationMs),
    async reset(steps) {
      await local.reset(steps)
      const nowMs = Date.now()
      for (const step of steps)
        if (step.policy.scope === 'global') exchange.clear(step.policy, step.key, nowMs)
    },
    regions() {
      const now = Date.now()
      const age = (at: number) => (at === 0 ? null : now - at)
      // Before the first exchange a region counts from the store's start, so it turns stale, not "never".
      const stale = (at: number) => now - (at === 0 ? startedAt : at) > staleAfterMs
      const localHealth: RegionHealth = {
        region,
        local: true,
        stale: exchange.lastFlushError !== undefined && stale(exchange.lastFlushAt),
        lastSyncAgeMs: age(exchange.lastFlushAt),
        ...(exchange.lastFlushError === undefined ? {} : { error: exchange.lastFlushError }),
      }
      return [
        localHealth,
        ...exchange.views.map((v) => ({
          region: v.region,
          local: false,
          stale: stale(v.lastSyncAt),
          lastSyncAgeMs: age(v.lastSyncAt),
          ...(v.lastError === undefined ? {} : { error: v.lastError }),
        })),
      ]
    },
    shares: () => exchange.shares(),
    keyShare: (policyId, key) => exchange.shareOf(policyId, key),
    get syncs() {
      return exchange.syncs
    },
    sync,
    async close() {
      if (closed) return
      closed = true
      clearInterval(timer)
      // The last counts reach the local Redis (bounded by the exchange timeout), then the decision store closes.
      await syncing?.catch(() => {})
      await exchange.flush()
      await local.close()
    },
  }
  return store
}

/** A global policy as the local Redis decides it: same id (same counters), the region's share as its limit. */
function lowered(policy: ResolvedPolicy, limit: number): ResolvedPolicy {
  return { ...policy, limit, capacity: limit }
}
