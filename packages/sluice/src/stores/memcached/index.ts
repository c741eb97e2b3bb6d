// The Memcached store: memcached has no scripting, so each key's state is one item that the pure
// transitions (src/algorithms/) update with read (gets) + compare-and-swap, retried a bounded number
// of times. A single-step decision is one CAS, so it is exact; a layered one commits its layers one
// CAS at a time and gives back what it took if a later layer loses (see docs/stores.md#memcached).
import { decideAll, decideStep, refundStep, resultOf, type StepDecision } from '../../algorithms/rules.js'
import { InvalidOptionsError, StoreClosedError, StoreError, UnsupportedError } from '../../errors.js'
import { checkKnownKeys, isOptionsObject, keysOf } from '../../options.js'
import { unsupportedRecords } from '../../records.js'
import type { Step, StepResult, Store } from '../../store.js'
import { type CasItem, isMemjsClient, MemcachedCommands, type MemjsClientLike } from './client.js'
import { itemKey, PREFIX_PATTERN } from './keys.js'

export type { MemjsClientLike } from './client.js'
export { itemKey } from './keys.js'

/**
 * One `version` round trip to the server: resolves when it answers, rejects when it does not
 * (what the service's /readyz calls).
 */
export async function pingMemcached(client: MemjsClientLike): Promise<void> {
  await new MemcachedCommands(client).version()
}

export interface MemcachedStoreOptions {
  /** Namespace of every item: `prefix:policyId:subject`. Default `sluice`. 1-64 printable ASCII, no space or `:`. */
  prefix?: string
  /** Whose clock decides: `client`, the only one memcached allows (it has no clock command). */
  clock?: 'client'
  /** The clock in ms (default `Date.now`). Tests pass a fake clock. */
  now?: () => number
}

const OPTION_KEYS = keysOf<MemcachedStoreOptions>({ prefix: true, clock: true, now: true })

/**
 * Read-and-CAS rounds one decision (or one batch of same-key decisions) may take before it fails
 * with a StoreError (the failover layer then follows the policy's `onStoreError`). Decisions on
 * one key from one process share rounds (see lanes), so only other processes make a round lose.
 */
const MAX_CAS_ROUNDS = 32
/**
 * Keys whose last written item (and CAS value) the store remembers, so the next admit on such a
 * key is one CAS instead of a read and a CAS. A few hundred bytes each.
 */
const WRITTEN_KEYS = 10_000
/** Most queued same-key decisions decided in one round. */
const MAX_BATCH = 256
/** Items live this much longer than their state means anything: host clock skew, memcached's 1 s clock. */
const EXPIRY_SLACK_S = 2
/** Relative expiries above 30 days are read by memcached as Unix times. */
const MAX_RELATIVE_TTL_S = 30 * 24 * 3600

/** What an item holds: the algorithm state, when it stops meaning anything, and a block. */
interface Item {
  /** The algorithm's state (absent: empty). */
  s?: unknown
  /** When the state is back to empty (ms, store clock). */
  e: number
  /** Blocked until (ms); absent when never blocked. */
  b?: number
}

const EMPTY_ITEM: Item = { e: 0 }

function decode(read: CasItem | undefined): Item {
  if (read === undefined) return EMPTY_ITEM
  try {
    const item = JSON.parse(read.value.toString('utf8')) as Item
    if (typeof item === 'object' && item !== null && typeof item.e === 'number') return item
  } catch {
    // fall through: an item this store did not write
  }
  throw new StoreError(
    'memcachedStore: an item under this prefix was not written by Sluice (another program shares the prefix?)',
  )
}

const encode = (item: Item): Buffer => Buffer.from(JSON.stringify(item))

/** Seconds an item must live for its state and block to mean what they say at `at`. */
function ttlSeconds(item: Item, at: number): number {
  const until = Math.max(item.e, item.b ?? 0)
  const seconds = Math.max(1, Math.ceil((until - at) / 1000)) + EXPIRY_SLACK_S
  // Expiry is memcached's own (wall) clock, whatever clock decides.
  return seconds > MAX_RELATIVE_TTL_S ? Math.floor(Date.now() / 1000) + seconds : seconds
}

/** The step decided on `item` at `at` (src/algorithms/rules.ts). */
function evaluate(step: Step, item: Item, at: number, peek: boolean): StepDecision {
  // `e` is when the state was written to end: what a state written under other parameters is bound by.
  const state = item.e > at ? item.s : undefined
  const endsInMs = state === undefined ? undefined : item.e - at
  return decideStep(step.policy, step.cost, step.leaseId, state, endsInMs, item.b ?? 0, at, peek)
}

/** The item a committed step writes over `item`: its new state, until it ends, and the block kept. */
function committed(d: StepDecision, item: Item, at: number): Item {
  const next: Item = d.resetMs > 0 ? { s: d.state, e: at + d.resetMs } : { e: at }
  if (item.b !== undefined) next.b = item.b
  return next
}

/**
 * After a lost CAS round: wait 0 to `round` ms (at most 8), so writers that keep colliding (other
 * processes on one hot key) spread out instead of losing together again.
 */
function jitter(round: number): Promise<void> {
  if (round === 0) return Promise.resolve()
  return new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(round, 8)))
}

interface Pending {
  step: Step
  resolve(result: StepResult): void
  reject(error: unknown): void
}

/** Single-step decisions on one key from this process: decided in rounds, one round at a time. */
interface Lane {
  queued: Pending[]
}

export interface MemcachedStore extends Store {
  /** A network store: always a promise. */
  apply(steps: readonly Step[], mode: 'consume' | 'peek'): Promise<StepResult[]>
  /** The store's clock: whole ms of `options.now` (default `Date.now`). */
  now(): number
}

/**
 * A store backed by memcached through a memjs client. The store does not own the client:
 * `close()` stops the store, and the caller closes the client.
 * @example
 * const store = memcachedStore(memjs.Client.create('127.0.0.1:11211'), { prefix: 'rl' })
 */
export function memcachedStore(client: MemjsClientLike, options: MemcachedStoreOptions = {}): MemcachedStore {
  if (!isMemjsClient(client))
    throw new InvalidOptionsError(
      "memcachedStore: pass a memjs client: memcachedStore(memjs.Client.create('host:11211'), options)",
    )
  if (!isOptionsObject(options)) throw new InvalidOptionsError('memcachedStore: options must be an object')
  checkKnownKeys('memcachedStore', options, OPTION_KEYS)
  const prefix = options.prefix ?? 'sluice'
  if (typeof prefix !== 'string' || !PREFIX_PATTERN.test(prefix))
    throw new InvalidOptionsError(
      `memcachedStore: prefix must be 1-64 printable ASCII characters without space or ':', got ${JSON.stringify(prefix)}`,
    )
  if (options.clock !== undefined && options.clock !== 'client')
    throw new InvalidOptionsError(
      "memcachedStore: clock must be 'client' (memcached has no clock to read); remove it or write clock: 'client'",
    )
  const now = options.now ?? Date.now
  if (typeof now !== 'function')
    throw new InvalidOptionsError('memcachedStore: now must be a function returning ms')
  const commands = new MemcachedCommands(client)
  const lanes = new Map<string, Lane>()
  /** Item and CAS value this process last wrote, by key (most recent last), at most WRITTEN_KEYS. */
  const written = new Map<string, CasItem>()
  function remember(key: string, item: CasItem): void {
    written.delete(key)
    written.set(key, item)
    if (written.size > WRITTEN_KEYS) written.delete(written.keys().next().value!)
  }
  /** Anything else this process writes or deletes drops the key's remembered item. */
  const forget = (key: string): void => {
    written.delete(key)
  }
  /** Layered decisions in flight, by key: each waits for the one before it on any of its keys. */
  const locks = new Map<string, Promise<void>>()
  let closed = false

  const clock = (): number => Math.floor(now())

  function assertOpen(): void {
    if (closed) throw new StoreClosedError('memcachedStore: the store is closed')
  }

  /** Every command error leaves as a StoreError, so the failover layer handles it. */
  async function guard<T>(what: string, body: () => Promise<T>): Promise<T> {
    try {
      return await body()
    } catch (error) {
      if (error instanceof StoreError) throw error
      throw new StoreError(`memcachedStore: ${what} failed: ${(error as Error).message}`, { cause: error })
    }
  }

  function contention(key: string): StoreError {
    return new StoreError(
      `memcachedStore: item ${JSON.stringify(key)} changed under ${MAX_CAS_ROUNDS} compare-and-swap rounds in a row`,
    )
  }

  /** Write `item` where `read` was: add when there was none, else CAS against what was read. */
  function write(key: string, item: Item, read: CasItem | undefined, at: number) {
    forget(key)
    const value = encode(item)
    const ttl = ttlSeconds(item, at)
    return read === undefined ? commands.add(key, value, ttl) : commands.cas(key, value, ttl, read.cas)
  }

  /** One round after another for a lane's queued decisions, until none is left. */
  async function drain(key: string, lane: Lane): Promise<void> {
    while (lane.queued.length > 0) {
      const batch = lane.queued.splice(0, MAX_BATCH)
      try {
        const results = await guard('a decision', () => decideBatch(key, batch))
        for (let i = 0; i < batch.length; i++) batch[i]!.resolve(results[i]!)
      } catch (error) {
        for (const p of batch) p.reject(error)
      }
    }
    lanes.delete(key)
  }

  /** Same-key decisions in arrival order on one read, committed by one CAS (re-read if it loses). */
  async function decideBatch(key: string, batch: readonly Pending[]): Promise<StepResult[]> {
    // What this process last wrote, if it is still there: a CAS against it skips the read. Only an
    // admit is decided on it (the CAS proves it current); a denial is re-checked on a fresh read.
    let read = written.get(key)
    let cached = read !== undefined
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const at = clock()
      if (!cached) read = await commands.gets(key)
      let item = decode(read)
      let changed = false
      const results: StepResult[] = []
      for (const p of batch) {
        const d = evaluate(p.step, item, at, false)
        if (d.allowed) {
          item = committed(d, item, at)
          changed = true
        }
        results.push(resultOf(d))
      }
      if (!changed) {
        if (!cached) return results
        cached = false
        round--
        continue
      }
      const value = encode(item)
      const ttl = ttlSeconds(item, at)
      const outcome =
        read === undefined
          ? await commands.add(key, value, ttl)
          : await commands.cas(key, value, ttl, read.cas)
      if (outcome.stored) {
        remember(key, { value, cas: outcome.cas })
        return results
      }
      written.delete(key)
      // A stale cached item is no contention: re-read at once.
      if (!cached) await jitter(round)
      cached = false
    }
    throw contention(key)
  }

  function consumeOne(step: Step): Promise<StepResult> {
    const key = itemKey(prefix, step)
    return new Promise<StepResult>((resolve, reject) => {
      const pending = { step, resolve, reject }
      const lane = lanes.get(key)
      if (lane !== undefined) {
        lane.queued.push(pending)
        return
      }
      const fresh: Lane = { queued: [pending] }
      lanes.set(key, fresh)
      // Decisions on this key issued in the same tick join the first round.
      queueMicrotask(() => void drain(key, fresh))
    })
  }

  /**
   * Run `body` while holding every key of a layered decision against this process's other layered
   * decisions, so their CAS rounds lose only to other processes (and to this process's single-step
   * rounds). Keys are taken in sorted order, so two decisions never wait on each other.
   */
  async function withKeys<T>(keys: readonly string[], body: () => Promise<T>): Promise<T> {
    const releases: (() => void)[] = []
    try {
      for (const key of [...new Set(keys)].sort()) {
        const before = locks.get(key)
        let release: () => void = () => {}
        const released = new Promise<void>((resolve) => {
          release = resolve
        })
        const mine = before === undefined ? released : before.then(() => released)
        locks.set(key, mine)
        releases.push(() => {
          release()
          if (locks.get(key) === mine) locks.delete(key)
        })
        await before
      }
      return await body()
    } finally {
      for (const release of releases) release()
    }
  }

  async function peek(steps: readonly Step[]): Promise<StepResult[]> {
    const at = clock()
    const reads = await Promise.all(steps.map((step) => commands.gets(itemKey(prefix, step))))
    const items = reads.map(decode)
    return decideAll(steps.length, 'peek', (i, peek) => evaluate(steps[i]!, items[i]!, at, peek)).results
  }

  /**
   * A layered decision: read every layer; if all admit, commit them one CAS at a time. When a
   * layer's CAS loses, the layers already committed are given back (compensate) and the whole
   * decision starts again on fresh reads. Never admits past any layer's limit; while a losing
   * decision holds units it will give back, others on those keys may be denied (docs/stores.md).
   */
  async function consumeLayered(steps: readonly Step[]): Promise<StepResult[]> {
    const keys = steps.map((step) => itemKey(prefix, step))
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const at = clock()
      const reads = await Promise.all(keys.map((key) => commands.gets(key)))
      const items = reads.map(decode)
      const all = decideAll(steps.length, 'consume', (i, peek) => evaluate(steps[i]!, items[i]!, at, peek))
      if (!all.commit) return all.results
      const written: { index: number; cas: Buffer }[] = []
      let lost = false
      for (let i = 0; i < steps.length; i++) {
        const outcome = await write(keys[i]!, committed(all.decisions[i]!, items[i]!, at), reads[i], at)
        if (!outcome.stored) {
          lost = true
          break
        }
        written.push({ index: i, cas: outcome.cas })
      }
      if (!lost) return all.results
      for (const { index, cas } of written.reverse())
        await giveBack(steps[index]!, keys[index]!, reads[index], cas)
    }
    throw contention(keys.join(' '))
  }

  /**
   * Undo a committed layer: put back the item as it was read, if nobody wrote it since (`cas` is
   * ours); else someone decided on top of it, and the layer's units are refunded instead.
   */
  async function giveBack(step: Step, key: string, before: CasItem | undefined, cas: Buffer): Promise<void> {
    forget(key)
    const undone =
      before === undefined
        ? await commands.delete(key, cas)
        : (await commands.cas(key, before.value, ttlSeconds(decode(before), clock()), cas)).stored
    if (!undone) await refundOne(step, key)
  }

  async function refundOne(step: Step, key: string): Promise<void> {
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const at = clock()
      const read = await commands.gets(key)
      const item = decode(read)
      if (read === undefined || item.e <= at) return
      const r = refundStep(step.policy, step.cost, step.leaseId, item.s, item.e, at)
      const next: Item = r.state === undefined ? { e: at } : { s: r.state, e: r.endsAt }
      if (item.b !== undefined) next.b = item.b
      if ((await write(key, next, read, at)).stored) return
    }
    throw contention(key)
  }

  async function blockOne(key: string, durationMs: number): Promise<void> {
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const at = clock()
      const read = await commands.gets(key)
      const item = decode(read)
      const next: Item = { ...item, b: Math.max(item.b ?? 0, at + durationMs) }
      if ((await write(key, next, read, at)).stored) return
    }
    throw contention(key)
  }

  return {
    name: 'memcached',
    inProcess: false,
    now: clock,
    // No atomic compare over a set of records, nor a way to list one: refused, nothing written.
    records: unsupportedRecords('memcached'),
    // No forced charge over gets + CAS: settle above the estimate is refused, nothing written.
    async charge() {
      throw new UnsupportedError(
        'memcached store: no forced charge (settle above the estimate); settle at most the estimate',
      )
    },
    async apply(steps, mode) {
      assertOpen()
      if (mode === 'peek') return guard('a peek', () => peek(steps))
      if (steps.length === 1) return [await consumeOne(steps[0]!)]
      return guard('a layered decision', () =>
        withKeys(
          steps.map((step) => itemKey(prefix, step)),
          () => consumeLayered(steps),
        ),
      )
    },
    async refund(steps) {
      assertOpen()
      await guard('a refund', () =>
        Promise.all(steps.map((step) => refundOne(step, itemKey(prefix, step)))).then(() => {}),
      )
    },
    async block(steps, durationMs) {
      assertOpen()
      await guard('a block', () =>
        Promise.all(steps.map((step) => blockOne(itemKey(prefix, step), durationMs))).then(() => {}),
      )
    },
    async reset(steps) {
      assertOpen()
      await guard('a reset', () =>
        Promise.all(
          steps.map((step) => {
            const key = itemKey(prefix, step)
            forget(key)
            return commands.delete(key)
          }),
        ).then(() => {}),
      )
    },
    async close() {
      closed = true
    },
  }
}
