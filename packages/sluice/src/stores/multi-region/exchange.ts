// The exchange of multiRegionStore. For each global (policy id, key) this instance knows, it writes
// to its region's Redis what it admitted (absolute counts per window, under its own field) and how
// much it was asked for (the demand index); it reads every region's demand index and share ledger
// back every `syncEvery`, and hands over the part of its region's share that its region does not
// need (shares.ts). Absolute counts and cumulative ledgers: a write or a read repeated after a
// timeout or a partition changes nothing.
import { randomUUID } from 'node:crypto'
import type { ClientAdapter } from '../redis/client.js'
import { subjectTag } from '../redis/keys.js'
import { message, runOverKeys, runScript, type Script } from './calls.js'
import {
  GIVE,
  parseDemand,
  parseLedger,
  READ_COUNTS,
  READ_DEMAND,
  READ_LEDGERS,
  TOUCH,
  WRITE_COUNTS,
  WRITE_DEMAND,
} from './scripts.js'
import { applyGive, EMPTY_LEDGER, type Ledger, planGive, sharesOf } from './shares.js'

/** Most demand entries a region's index holds, and a pull reads: the hottest keys, not millions. */
const MAX_DEMAND_ENTRIES = 1024

/** What the exchange needs of a global policy; an entry read from another region's index has only this. */
export interface GlobalPolicy {
  readonly id: string
  readonly limit: number
  readonly windowMs: number
}

/** One global (policy, key) this instance has decided on or seen demand for. */
interface Tracked {
  readonly policy: GlobalPolicy
  readonly key: string
  /** This instance's admitted units, by window index (floor(now / windowMs)). */
  readonly counts: Map<number, number>
  /** Windows whose count changed since the last flush. */
  readonly dirty: Set<number>
  /** This instance's counts as the local Redis last accepted them. */
  readonly flushed: Map<number, number>
  /** The local region's totals (all its instances) by window, as last read. */
  readonly regionTotals: Map<number, number>
  /** Units asked for since the last flush: this instance's demand. */
  asked: number
  /** Units of decisions sent to the local Redis and not yet answered. */
  pending: number
  /** Every region's ledger as last read; the local one also as this instance last wrote it. */
  readonly ledgers: Map<string, Ledger>
  /** Units asked for per region in its instances' last sync periods, as last read. */
  demand: Map<string, number>
  /** The local ledger has been read once: until then the local share is not known. */
  loaded: Promise<void> | true | undefined
  /** Date.now() of the last decision or demand seen: untouched for two windows, it is forgotten. */
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
  /** Demand entries older than this are no demand (the instance that wrote them went quiet). */
  readonly staleAfterMs: number
  readonly sha: (source: string) => string
}

/** What the store knows of one remote region. */
export interface RemoteView {
  readonly region: string
  /** Date.now() of the last pull that answered; 0 before the first. */
  lastSyncAt: number
  lastError: string | undefined
  inFlight: boolean
}

/** One region's own share of a policy's keys, for the metrics. */
export interface PolicyShare {
  /** The global policy's storage id (its name unless it has an `id`). */
  readonly policy: string
  /** Keys this instance tracks for the policy. */
  readonly keys: number
  /** This region's shares summed over those keys, over their limits summed: 1 / R when nothing moved. */
  readonly shareOfLimit: number
}

export class Exchange {
  /** This instance's field in every count hash and its entries in the demand index. */
  readonly instance = randomUUID()
  readonly tracked = new Map<string, Tracked>()
  readonly views: RemoteView[]
  /** Completed syncs (flush, pull, hand-over), for tests and the docs' count of sync periods. */
  syncs = 0
  private lastShares: PolicyShare[] = []
  private readonly regionNames: string[]
  private readonly scripts: Record<
    'write' | 'read' | 'writeDemand' | 'readDemand' | 'ledgers' | 'give' | 'touch',
    Script
  >
  private flushing: Promise<void> | undefined
  lastFlushAt = 0
  lastFlushError: string | undefined

  constructor(private readonly options: ExchangeOptions) {
    const script = (source: string) => ({ source, sha: options.sha(source) })
    this.scripts = {
      write: script(WRITE_COUNTS),
      read: script(READ_COUNTS),
      writeDemand: script(WRITE_DEMAND),
      readDemand: script(READ_DEMAND),
      ledgers: script(READ_LEDGERS),
      give: script(GIVE),
      touch: script(TOUCH),
    }
    this.regionNames = [options.local.region, ...options.remotes.map((r) => r.region)]
    this.views = options.remotes.map((r) => ({
      region: r.region,
      lastSyncAt: 0,
      lastError: undefined,
      inFlight: false,
    }))
  }

  /** The Redis hash that holds one region's count of (policy id, key) in window `index`. */
  hashKey(policy: GlobalPolicy, key: string, index: number): string {
    return `${this.options.prefix}:mr:{${subjectTag(key)}}:${policy.id}:${index}`
  }

  /** The Redis hash that holds one region's share ledger of (policy id, key). */
  ledgerKey(policy: GlobalPolicy, key: string): string {
    return `${this.options.prefix}:mrs:{${subjectTag(key)}}:${policy.id}`
  }

  private demandKeys(): string[] {
    return [`${this.options.prefix}:mrd:{demand}:at`, `${this.options.prefix}:mrd:{demand}:units`]
  }

  private entry(policy: GlobalPolicy, key: string, nowMs: number): Tracked {
    const id = `${policy.id}\u0000${key}`
    let t = this.tracked.get(id)
    if (t === undefined) {
      t = {
        policy,
        key,
        counts: new Map(),
        dirty: new Set(),
        flushed: new Map(),
        regionTotals: new Map(),
        asked: 0,
        pending: 0,
        ledgers: new Map(),
        demand: new Map(),
        loaded: undefined,
        touchedAt: nowMs,
      }
      this.tracked.set(id, t)
    } else t.touchedAt = nowMs
    return t
  }

  /**
   * Resolves once this region's ledger of (policy, key) has been read: what the region gave away is
   * known before it decides on the key (a restarted instance must not decide on its starting share).
   */
  ready(policy: GlobalPolicy, key: string, nowMs: number): Promise<void> | undefined {
    const t = this.entry(policy, key, nowMs)
    if (t.loaded === true) return undefined
    t.loaded ??= this.loadLocalLedgers([t]).catch((error) => {
      t.loaded = undefined
      throw error
    })
    return t.loaded
  }

  /** The units this region may admit for (policy, key): its share as the ledgers read so far show it. */
  share(policy: GlobalPolicy, key: string): number {
    const t = this.tracked.get(`${policy.id}\u0000${key}`)
    const ledgers = t?.ledgers ?? new Map<string, Ledger>()
    return sharesOf(policy.limit, this.regionNames, ledgers).get(this.options.local.region)!
  }

  /** This region's share of (policy id, key) as the ledgers read so far show it; undefined when not tracked. */
  shareOf(policyId: string, key: string): number | undefined {
    const t = this.tracked.get(`${policyId}\u0000${key}`)
    return t === undefined ? undefined : this.share(t.policy, t.key)
  }

  /** A decision of `units` on (policy, key) is on its way to the local Redis. */
  begin(policy: GlobalPolicy, key: string, nowMs: number, units: number): void {
    const t = this.entry(policy, key, nowMs)
    t.asked += units
    t.pending += units
  }

  /** Its answer came; `admitted` units were charged. */
  end(policy: GlobalPolicy, key: string, nowMs: number, units: number, admitted: number): void {
    const t = this.entry(policy, key, nowMs)
    t.pending = Math.max(0, t.pending - units)
    if (admitted !== 0) this.add(policy, key, nowMs, admitted)
  }

  /** Count `units` admitted (negative: refunded) for (policy, key) in the window of `nowMs`. */
  add(policy: GlobalPolicy, key: string, nowMs: number, units: number): void {
    const t = this.entry(policy, key, nowMs)
    const index = Math.floor(nowMs / policy.windowMs)
    t.counts.set(index, Math.max(0, (t.counts.get(index) ?? 0) + units))
    t.dirty.add(index)
  }

  /** Forget this instance's counts of (policy, key) (reset); the zero is flushed like any count. */
  clear(policy: GlobalPolicy, key: string, nowMs: number): void {
    const t = this.entry(policy, key, nowMs)
    for (const index of t.counts.keys()) {
      t.counts.set(index, 0)
      t.dirty.add(index)
    }
  }

  /**
   * What the local region has used of (policy, key) at `nowMs`, weighted as the sliding window
   * counter weighs its previous window: its other instances' totals as last read, this instance's
   * own counts, and the decisions still in flight.
   */
  used(t: Tracked, nowMs: number): number {
    const w = t.policy.windowMs
    const index = Math.floor(nowMs / w)
    const weight = (i: number) => (i === index ? 1 : i === index - 1 ? (w - (nowMs - index * w)) / w : 0)
    let used = t.pending
    for (const i of [index - 1, index]) {
      const own = t.counts.get(i) ?? 0
      const others = Math.max(0, (t.regionTotals.get(i) ?? 0) - (t.flushed.get(i) ?? 0))
      used += weight(i) * (own + others)
    }
    return used
  }

  /**
   * This region's share per policy, over the keys this instance tracks (bounded: one row per
   * policy), as of the last completed sync: read with `syncs`, it says after which sync a share moved.
   */
  shares(): PolicyShare[] {
    return this.lastShares
  }

  private callOnce(adapter: ClientAdapter, script: Script, keys: string[], args: string[]) {
    return runScript(adapter, script, keys, args, this.options.timeoutMs)
  }

  private callEach(
    adapter: ClientAdapter,
    keys: readonly string[],
    argsOf: (chunk: string[], from: number) => [Script, string[]],
  ) {
    return runOverKeys(adapter, keys, argsOf, this.options.timeoutMs)
  }

  private sharesNow(): PolicyShare[] {
    const byPolicy = new Map<string, { keys: number; share: number; limit: number }>()
    for (const t of this.tracked.values()) {
      const row = byPolicy.get(t.policy.id) ?? { keys: 0, share: 0, limit: 0 }
      row.keys++
      row.share += this.share(t.policy, t.key)
      row.limit += t.policy.limit
      byPolicy.set(t.policy.id, row)
    }
    return [...byPolicy].map(([policy, r]) => ({
      policy,
      keys: r.keys,
      shareOfLimit: r.limit === 0 ? 0 : r.share / r.limit,
    }))
  }

  /** One sync: write this instance's counts and demand, read every region's, hand over what is not needed. */
  async sync(nowMs: number): Promise<void> {
    await this.flush(nowMs)
    await this.pull(nowMs)
    await this.handOver(Date.now())
    this.prune(Date.now())
    this.lastShares = this.sharesNow()
    this.syncs++
  }

  /** Write this instance's changed counts and its demand to the local Redis. One flush at a time. */
  flush(nowMs = Date.now()): Promise<void> {
    this.flushing ??= this.flushNow(nowMs).finally(() => {
      this.flushing = undefined
    })
    return this.flushing
  }

  private async flushNow(nowMs: number): Promise<void> {
    const keys: string[] = []
    const counts: string[] = []
    const ttls: number[] = []
    const sent: [Tracked, number, number][] = []
    const demand: string[] = []
    const asked: [Tracked, number][] = []
    const givers: string[] = []
    let ledgerTtl = 0
    for (const t of this.tracked.values()) {
      for (const index of t.dirty) {
        const count = t.counts.get(index) ?? 0
        keys.push(this.hashKey(t.policy, t.key, index))
        counts.push(String(count))
        // The count matters for the window and the next one (as its previous window).
        ttls.push(2 * t.policy.windowMs + 1000)
        sent.push([t, index, count])
      }
      t.dirty.clear()
      if (t.asked > 0) {
        const { id, limit, windowMs } = t.policy
        demand.push(`${this.instance}\n${id}\n${limit}\n${windowMs}\n${t.key}`, String(t.asked))
        asked.push([t, t.asked])
        t.asked = 0
      }
      if ((t.ledgers.get(this.options.local.region)?.version ?? 0) > 0) {
        givers.push(this.ledgerKey(t.policy, t.key))
        ledgerTtl = Math.max(ledgerTtl, ledgerTtlMs(t.policy))
      }
    }
    const adapter = this.options.local.adapter
    const writes: Promise<unknown>[] = []
    if (keys.length > 0)
      writes.push(
        // One expiry per call: the longest of its keys (a key kept a little longer costs nothing).
        this.callEach(adapter, keys, (chunk, from) => {
          const ttl = Math.max(...ttls.slice(from, from + chunk.length))
          return [
            this.scripts.write,
            [this.instance, String(ttl), ...counts.slice(from, from + chunk.length)],
          ]
        }).then(() => {
          for (const [t, index, count] of sent) t.flushed.set(index, count)
        }),
      )
    if (demand.length > 0) {
      const keep = String(2 * this.options.staleAfterMs)
      writes.push(
        this.callOnce(adapter, this.scripts.writeDemand, this.demandKeys(), [
          String(nowMs),
          keep,
          String(MAX_DEMAND_ENTRIES),
          ...demand,
        ]),
      )
    }
    if (givers.length > 0)
      writes.push(this.callEach(adapter, givers, () => [this.scripts.touch, [String(ledgerTtl)]]))
    if (writes.length === 0)
      writes.push(this.callEach(adapter, [], () => [this.scripts.write, [this.instance, '0']]))
    try {
      await Promise.all(writes)
      this.lastFlushAt = Date.now()
      this.lastFlushError = undefined
    } catch (error) {
      // Sent again with the next flush: the counts are absolute, so a repeat is harmless.
      for (const [t, index] of sent) if (t.flushed.get(index) !== t.counts.get(index)) t.dirty.add(index)
      for (const [t, units] of asked) t.asked += units
      this.lastFlushError = message(error)
    }
  }

  /**
   * Read every region's demand index and the ledgers of the tracked keys (and, from the local
   * Redis, the region's count totals of them). An entry of another region's index for a key this
   * instance does not track starts tracking it: an idle region learns which keys to hand over.
   */
  async pull(nowMs: number): Promise<void> {
    const since = String(nowMs - this.options.staleAfterMs)
    const entries = [...this.tracked.values()]
    const ledgerKeys = entries.map((t) => this.ledgerKey(t.policy, t.key))
    const demandOf = async (adapter: ClientAdapter) =>
      parseDemand(
        await this.callOnce(adapter, this.scripts.readDemand, this.demandKeys(), [
          since,
          String(MAX_DEMAND_ENTRIES),
        ]),
      )
    const ledgersOf = (adapter: ClientAdapter) =>
      this.callEach(adapter, ledgerKeys, () => [this.scripts.ledgers, []])
    const read = async (link: RegionLink) => {
      const [demand, ledgers] = await Promise.all([demandOf(link.adapter), ledgersOf(link.adapter)])
      return { region: link.region, demand, ledgers }
    }
    const local = (async () => {
      const windows = entries.flatMap((t) => {
        const index = Math.floor(nowMs / t.policy.windowMs)
        return [index - 1, index]
      })
      const countKeys = entries.flatMap((t, i) => [
        this.hashKey(t.policy, t.key, windows[2 * i]!),
        this.hashKey(t.policy, t.key, windows[2 * i + 1]!),
      ])
      const [answer, totals] = await Promise.all([
        read(this.options.local),
        this.callEach(this.options.local.adapter, countKeys, () => [this.scripts.read, []]),
      ])
      for (const [i, t] of entries.entries()) {
        t.regionTotals.clear()
        t.regionTotals.set(windows[2 * i]!, Number(totals[2 * i] ?? 0))
        t.regionTotals.set(windows[2 * i + 1]!, Number(totals[2 * i + 1] ?? 0))
      }
      return answer
    })().catch(() => undefined)
    const remotes = this.options.remotes.map(async (remote, i) => {
      const view = this.views[i]!
      // A region that does not answer holds one pull, not one per interval.
      if (view.inFlight) return undefined
      view.inFlight = true
      try {
        const answer = await read(remote)
        view.lastSyncAt = Date.now()
        view.lastError = undefined
        return answer
      } catch (error) {
        // Its last known ledgers stay in force (docs/topologies.md: what a partition costs).
        view.lastError = message(error)
        return undefined
      } finally {
        view.inFlight = false
      }
    })
    const answers = await Promise.all([local, ...remotes])
    const demand = new Map<string, Map<string, number>>()
    for (const answer of answers) {
      if (answer === undefined) continue
      for (const [k, t] of entries.entries()) {
        const ledger = parseLedger(answer.ledgers[k])
        // A ledger only grows: an older read arriving late does not undo a newer one.
        if (ledger.version >= (t.ledgers.get(answer.region)?.version ?? 0))
          t.ledgers.set(answer.region, ledger)
      }
      for (const e of answer.demand) {
        // Tracked from now on (touched while the demand lasts), so this region can hand it over.
        this.entry(e.policy, e.key, nowMs)
        const regions = demand.get(`${e.policy.id}\u0000${e.key}`) ?? new Map<string, number>()
        regions.set(answer.region, (regions.get(answer.region) ?? 0) + e.units)
        demand.set(`${e.policy.id}\u0000${e.key}`, regions)
      }
    }
    // A region that did not answer keeps its last known demand; one that answered without an
    // entry for a key asks for nothing.
    const answered = new Set(answers.flatMap((a) => (a === undefined ? [] : [a.region])))
    for (const [id, t] of this.tracked) {
      const next = demand.get(id) ?? new Map<string, number>()
      for (const [region, units] of t.demand) if (!answered.has(region)) next.set(region, units)
      t.demand = next
    }
  }

  /** For every tracked key, hand what this region does not need to the regions that want it. */
  async handOver(nowMs: number): Promise<void> {
    const self = this.options.local.region
    const unloaded = [...this.tracked.values()].filter((t) => t.loaded !== true)
    if (unloaded.length > 0) await this.loadLocalLedgers(unloaded).catch(() => {})
    const gives: Promise<void>[] = []
    for (const t of this.tracked.values()) {
      if (t.loaded !== true) continue
      const plan = planGive({
        self,
        limit: t.policy.limit,
        regions: this.regionNames,
        ledgers: t.ledgers,
        demand: t.demand,
        usedUnits: this.used(t, nowMs),
        minUnits: Math.ceil(t.policy.limit / 100),
      })
      if (plan === undefined) continue
      const mine = t.ledgers.get(self) ?? EMPTY_LEDGER
      // Lowered here before the write: no decision of this instance spends what is being handed over.
      t.ledgers.set(self, applyGive(mine, plan))
      const args = [String(plan.version), String(ledgerTtlMs(t.policy))]
      for (const [to, units] of plan.to) args.push(to, String(units))
      gives.push(
        this.callOnce(
          this.options.local.adapter,
          this.scripts.give,
          [this.ledgerKey(t.policy, t.key)],
          args,
        ).then(
          async (reply) => {
            // Another instance of this region gave first: read the ledger again, plan on the next sync.
            if (Number(reply) < 0) await this.loadLocalLedgers([t])
          },
          // Unknown whether it was applied: read it back (the lower share stays until then).
          () => this.loadLocalLedgers([t]).catch(() => {}),
        ),
      )
    }
    await Promise.all(gives)
  }

  private async loadLocalLedgers(entries: Tracked[]): Promise<void> {
    const replies = await this.callEach(
      this.options.local.adapter,
      entries.map((t) => this.ledgerKey(t.policy, t.key)),
      () => [this.scripts.ledgers, []],
    )
    for (const [i, t] of entries.entries()) {
      t.ledgers.set(this.options.local.region, parseLedger(replies[i]))
      t.loaded = true
    }
  }

  /** Drop what is older than the previous window, and keys untouched for two windows. */
  prune(nowMs: number): void {
    for (const [id, t] of this.tracked) {
      const index = Math.floor(nowMs / t.policy.windowMs)
      for (const i of t.counts.keys()) if (i < index - 1 && !t.dirty.has(i)) t.counts.delete(i)
      for (const i of t.flushed.keys()) if (i < index - 1) t.flushed.delete(i)
      if (t.dirty.size === 0 && t.pending === 0 && nowMs - t.touchedAt > 2 * t.policy.windowMs)
        this.tracked.delete(id)
    }
  }
}

/** A ledger lives two windows past its last give or touch: shares outlast windows, not idleness. */
function ledgerTtlMs(policy: GlobalPolicy): number {
  return 2 * policy.windowMs + 1000
}
