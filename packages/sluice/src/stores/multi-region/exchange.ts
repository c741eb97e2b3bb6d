// The count exchange of multiRegionStore: what this instance admitted for each global (policy id,
// key, window) is written, as an absolute count under its own field, to its region's Redis; the
// other regions' totals are read back from their Redis every `syncEvery`. Absolute counts, never
// deltas: a write or a read repeated after a timeout or a partition changes nothing.
import { randomUUID } from 'node:crypto'
import type { ResolvedPolicy } from '../../policy.js'
import type { ClientAdapter } from '../redis/client.js'
import { replyErrorCode } from '../redis/client.js'
import { subjectTag } from '../redis/keys.js'

// Inline rather than under src/stores/redis/scripts/: two hash commands, no algorithm in them.
/**
 * KEYS: one hash per (policy id, key, window). ARGV: field (this instance), ttlMs, then one count
 * per key. Sets the field to the count, which may be lower than the stored one (a refund or a reset
 * lowers this instance's count), then the expiry. Reply: 0.
 */
const WRITE = `local field, ttl = ARGV[1], ARGV[2]
for i, key in ipairs(KEYS) do
  local count = tonumber(ARGV[i + 2])
  local stored = tonumber(redis.call('HGET', key, field) or '-1')
  if count ~= stored then redis.call('HSET', key, field, count) end
  redis.call('PEXPIRE', key, ttl)
end
return 0`
/** KEYS: hashes as above. ARGV: none. Reply: per key, the sum of its fields (the region's total). */
const READ = `local out = {}
for i, key in ipairs(KEYS) do
  local sum = 0
  for _, v in ipairs(redis.call('HVALS', key)) do sum = sum + tonumber(v) end
  out[i] = sum
end
return out`

interface Script {
  readonly source: string
  readonly sha: string
}

/** Most keys one exchange call carries (standalone; a Cluster call carries one key, one slot). */
const MAX_KEYS_PER_CALL = 128

/** One global (policy, key) this instance has decided recently. */
interface Tracked {
  readonly policy: ResolvedPolicy
  readonly key: string
  /** This instance's admitted units, by window index (floor(now / windowMs)). */
  readonly counts: Map<number, number>
  /** Windows whose count changed since the last flush. */
  readonly dirty: Set<number>
  /** Date.now() of the last decision on it: untouched for two windows, it is forgotten. */
  touchedAt: number
}

export interface RegionLink {
  readonly region: string
  readonly adapter: ClientAdapter
}

export interface ExchangeOptions {
  readonly prefix: string
  readonly local: RegionLink
  readonly remotes: readonly RegionLink[]
  readonly timeoutMs: number
  readonly sha: (source: string) => string
}

/** What the store knows of one remote region. */
export interface RemoteView {
  readonly region: string
  /** Date.now() of the last pull that answered; 0 before the first. */
  lastSyncAt: number
  lastError: string | undefined
  /** Region totals by hash key (see hashKey). */
  readonly totals: Map<string, number>
  inFlight: boolean
}

export class Exchange {
  /** This instance's field in every hash: a resend of its absolute count replaces, never adds. */
  readonly instance = randomUUID()
  readonly tracked = new Map<string, Tracked>()
  readonly views: RemoteView[]
  private readonly write: Script
  private readonly read: Script
  private flushing: Promise<void> | undefined
  lastFlushAt = 0
  lastFlushError: string | undefined

  constructor(private readonly options: ExchangeOptions) {
    this.write = { source: WRITE, sha: options.sha(WRITE) }
    this.read = { source: READ, sha: options.sha(READ) }
    this.views = options.remotes.map((r) => ({
      region: r.region,
      lastSyncAt: 0,
      lastError: undefined,
      totals: new Map(),
      inFlight: false,
    }))
  }

  /** The Redis hash that holds one region's count of (policy id, key) in window `index`. */
  hashKey(policy: ResolvedPolicy, key: string, index: number): string {
    return `${this.options.prefix}:mr:{${subjectTag(key)}}:${policy.id}:${index}`
  }

  private entry(policy: ResolvedPolicy, key: string, nowMs: number): Tracked {
    const id = `${policy.id}\u0000${key}`
    let t = this.tracked.get(id)
    if (t === undefined) {
      t = { policy, key, counts: new Map(), dirty: new Set(), touchedAt: nowMs }
      this.tracked.set(id, t)
    } else t.touchedAt = nowMs
    return t
  }

  /** Count `units` admitted (negative: refunded) for (policy, key) in the window of `nowMs`. */
  add(policy: ResolvedPolicy, key: string, nowMs: number, units: number): void {
    const t = this.entry(policy, key, nowMs)
    const index = Math.floor(nowMs / policy.windowMs)
    t.counts.set(index, Math.max(0, (t.counts.get(index) ?? 0) + units))
    t.dirty.add(index)
  }

  /** Forget this instance's counts of (policy, key) (reset); the zero is flushed like any count. */
  clear(policy: ResolvedPolicy, key: string, nowMs: number): void {
    const t = this.entry(policy, key, nowMs)
    for (const index of t.counts.keys()) {
      t.counts.set(index, 0)
      t.dirty.add(index)
    }
  }

  /**
   * The other regions' usage of (policy, key) at `nowMs`, weighted as the sliding window counter
   * weighs its previous window: previous x (w - elapsed) / w + current, summed over remote regions.
   */
  remoteUsage(policy: ResolvedPolicy, key: string, nowMs: number): number {
    const w = policy.windowMs
    const index = Math.floor(nowMs / w)
    const elapsed = nowMs - index * w
    const current = this.hashKey(policy, key, index)
    const previous = this.hashKey(policy, key, index - 1)
    let used = 0
    for (const view of this.views)
      used += ((view.totals.get(previous) ?? 0) * (w - elapsed)) / w + (view.totals.get(current) ?? 0)
    // Also make sure this (policy, key) is pulled from now on, even before it admits anything.
    this.entry(policy, key, nowMs)
    return used
  }

  /** Write this instance's changed counts to the local Redis. One flush at a time. */
  flush(): Promise<void> {
    this.flushing ??= this.flushNow().finally(() => {
      this.flushing = undefined
    })
    return this.flushing
  }

  private async flushNow(): Promise<void> {
    const keys: string[] = []
    const counts: string[] = []
    const ttls: number[] = []
    const sent: [Tracked, number][] = []
    for (const t of this.tracked.values()) {
      for (const index of t.dirty) {
        keys.push(this.hashKey(t.policy, t.key, index))
        counts.push(String(t.counts.get(index) ?? 0))
        // The count matters for the window and the next one (as its previous window).
        ttls.push(2 * t.policy.windowMs + 1000)
        sent.push([t, index])
      }
      t.dirty.clear()
    }
    if (keys.length === 0) return
    try {
      // One expiry per call: the longest of its keys (a key kept a little longer costs nothing).
      await this.calls(this.options.local.adapter, keys, (chunk, from) => {
        const ttl = Math.max(...ttls.slice(from, from + chunk.length))
        return [this.write, [this.instance, String(ttl), ...counts.slice(from, from + chunk.length)]]
      })
      this.lastFlushAt = Date.now()
      this.lastFlushError = undefined
    } catch (error) {
      // Sent again with the next flush: the counts are absolute, so a repeat is harmless.
      for (const [t, index] of sent) t.dirty.add(index)
      this.lastFlushError = message(error)
    }
  }

  /** Read every remote region's totals of the tracked keys (current and previous windows). */
  async pull(nowMs: number): Promise<void> {
    const keys: string[] = []
    for (const t of this.tracked.values()) {
      const index = Math.floor(nowMs / t.policy.windowMs)
      keys.push(this.hashKey(t.policy, t.key, index), this.hashKey(t.policy, t.key, index - 1))
    }
    await Promise.all(
      this.options.remotes.map(async (remote, i) => {
        const view = this.views[i]!
        // A region that does not answer holds one pull, not one per interval.
        if (view.inFlight) return
        view.inFlight = true
        try {
          const sums = await this.calls(remote.adapter, keys, () => [this.read, []])
          for (let k = 0; k < keys.length; k++) view.totals.set(keys[k]!, sums[k] ?? 0)
          view.lastSyncAt = Date.now()
          view.lastError = undefined
        } catch (error) {
          // Its last known totals stay in force (docs/topologies.md: how that widens the bound).
          view.lastError = message(error)
        } finally {
          view.inFlight = false
        }
      }),
    )
  }

  /** Drop what is older than the previous window: it no longer weighs on any decision. */
  prune(nowMs: number): void {
    const wanted = new Set<string>()
    for (const [id, t] of this.tracked) {
      const index = Math.floor(nowMs / t.policy.windowMs)
      for (const i of t.counts.keys()) if (i < index - 1 && !t.dirty.has(i)) t.counts.delete(i)
      if (t.dirty.size === 0 && nowMs - t.touchedAt > 2 * t.policy.windowMs) {
        this.tracked.delete(id)
        continue
      }
      wanted.add(this.hashKey(t.policy, t.key, index))
      wanted.add(this.hashKey(t.policy, t.key, index - 1))
    }
    // Remote totals of windows no decision reads any more.
    for (const view of this.views)
      for (const k of view.totals.keys()) if (!wanted.has(k)) view.totals.delete(k)
  }

  /**
   * Run a script over `keys`: one call per key on Cluster (each key its own slot), calls of up to
   * MAX_KEYS_PER_CALL keys on a standalone server, each under the exchange's timeout. The integer
   * replies in key order.
   */
  private async calls(
    adapter: ClientAdapter,
    keys: readonly string[],
    argsOf: (chunk: string[], from: number) => [Script, string[]],
  ): Promise<number[]> {
    const size = adapter.cluster ? 1 : MAX_KEYS_PER_CALL
    const chunks: Promise<number[]>[] = []
    // With no keys, one call still: an idle region's freshness is a real answer, not an assumption.
    for (let from = 0; from < Math.max(keys.length, 1); from += size) {
      const chunk = keys.slice(from, from + size)
      const [script, args] = argsOf(chunk, from)
      chunks.push(
        withTimeout(evalScript(adapter, script, chunk, args), this.options.timeoutMs).then((reply) =>
          Array.isArray(reply) ? reply.map(Number) : [],
        ),
      )
    }
    return (await Promise.all(chunks)).flat()
  }
}

async function evalScript(adapter: ClientAdapter, s: Script, keys: string[], args: string[]) {
  try {
    return await adapter.evalsha(s.sha, keys, args)
  } catch (error) {
    if (replyErrorCode(error) !== 'NOSCRIPT') throw error
    await adapter.loadScript(s.source)
    return adapter.evalsha(s.sha, keys, args)
  }
}

function withTimeout<T>(promise: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer in ${timeoutMs}ms`)), timeoutMs)
  })
  // A late answer or failure of the abandoned call is not an unhandled rejection.
  promise.catch(() => {})
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
