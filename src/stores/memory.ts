// The in-process store: runs the pure transitions directly. Bounded by `maxKeys` with
// least-recently-used eviction in two generations (a hot key is never evicted before a cold one),
// and expiry without a timer per key: expired entries are swept a little on every write.
import { algorithms } from '../algorithms/index.js'
import { InvalidOptionsError } from '../errors.js'
import { checkKnownKeys, isOptionsObject, keysOf } from '../options.js'
import type { Step, StepResult, SyncStore } from '../store.js'

export interface MemoryStoreOptions {
  /** The clock, in ms. Default `Date.now`. Tests pass a fake clock. */
  now?: () => number
  /** The most keys held at once; least recently used keys go first. Default 1,000,000. */
  maxKeys?: number
}

const OPTION_KEYS = keysOf<MemoryStoreOptions>({ now: true, maxKeys: true })

interface Entry {
  state: unknown
  /** When the state is back to empty (ms); after this (and after `blockedUntil`) the entry is dead. */
  expiresAt: number
  blockedUntil: number
  /** Read since the sweeper last looked: a hot key that merely refilled is not worth deleting. */
  touched: boolean
}

/**
 * One generation: policy name -> caller's key -> entry. Nested rather than keyed by a joined
 * `policy:key` string, so the lookup hashes the caller's own string (whose hash V8 caches) instead
 * of a fresh concatenation on every decision.
 */
type Generation = Map<string, Map<string, Entry>>

const NOT_BLOCKED = 0

export interface MemoryStore extends SyncStore {
  /** Keys currently held (live or not yet swept). Never above `maxKeys`. */
  readonly size: number
  /** `applySync` for a single step, without the arrays: the limiter's hot path. */
  applyOneSync(step: Step, mode: 'consume' | 'peek'): StepResult
}

/** True for a store that can decide one step synchronously without arrays (the memory store). */
export function isMemoryStore(store: unknown): store is MemoryStore {
  return typeof (store as Partial<MemoryStore> | null)?.applyOneSync === 'function'
}

const dead = (entry: Entry, at: number): boolean => entry.expiresAt <= at && entry.blockedUntil <= at

/** Walks one generation an entry at a time, without allocating per step. */
class Cursor {
  private tables: Iterator<Map<string, Entry>>
  private entries: Iterator<[string, Entry]> | undefined
  table: Map<string, Entry> | undefined
  constructor(generation: Generation) {
    this.tables = generation.values()
  }
  /** The next [key, entry] in `this.table`, or undefined at the end of the generation. */
  next(): [string, Entry] | undefined {
    for (;;) {
      if (this.entries !== undefined) {
        const r = this.entries.next()
        if (!r.done) return r.value
      }
      const t = this.tables.next()
      if (t.done) return undefined
      this.table = t.value
      this.entries = t.value.entries()
    }
  }
}

/**
 * An in-memory store, the default. Decisions are exact within one process.
 * @example createLimiter({ store: memoryStore({ maxKeys: 100_000 }), policies })
 */
export function memoryStore(options: MemoryStoreOptions = {}): MemoryStore {
  if (!isOptionsObject(options)) throw new InvalidOptionsError('memoryStore: pass { maxKeys?, now? }')
  checkKnownKeys('memoryStore', options, OPTION_KEYS)
  const now = options.now ?? Date.now
  const maxKeys = options.maxKeys ?? 1_000_000
  if (typeof now !== 'function')
    throw new InvalidOptionsError('memoryStore: now must be a function returning ms')
  if (!Number.isSafeInteger(maxKeys) || maxKeys < 2) {
    throw new InvalidOptionsError(`memoryStore: maxKeys must be a whole number >= 2, got ${String(maxKeys)}`)
  }
  // Two generations: `recent` takes every write; when it holds half of maxKeys it becomes `old` and
  // the previous `old` (keys untouched for a whole generation) is dropped at once.
  const generationSize = Math.floor(maxKeys / 2)
  let recent: Generation = new Map()
  let old: Generation = new Map()
  let recentSize = 0
  let oldSize = 0
  // Two cursors walk the generations a little on every write, dropping entries that have expired:
  // idle keys go away without a timer, even when traffic moves on to other keys.
  let sweepOld = new Cursor(old)
  let sweepRecent = new Cursor(recent)

  let decisions = 0

  const clock = (): number => Math.floor(now())

  /**
   * The entry of (policy, key), possibly expired (callers treat an expired state as empty). An
   * expired entry is reused in place rather than deleted and re-created: a key that refills between
   * hits would otherwise churn the Map on every decision. The sweepers delete the ones nobody touches.
   */
  // The recent generation's table of the last policy read: saves a lookup per decision.
  let lastPolicy = ''
  let lastTable: Map<string, Entry> | undefined

  function read(policy: string, key: string): Entry | undefined {
    if (policy !== lastPolicy || lastTable === undefined) {
      lastPolicy = policy
      lastTable = recent.get(policy)
    }
    const entry = lastTable?.get(key)
    if (entry !== undefined) {
      entry.touched = true
      return entry
    }
    const table = old.get(policy)
    const stale = table?.get(key)
    if (stale === undefined) return undefined
    // Touched again: promote it to the recent generation, so a hot key is never evicted.
    table!.delete(key)
    oldSize--
    insert(policy, key, stale)
    return stale
  }

  function insert(policy: string, key: string, entry: Entry): void {
    if (recentSize >= generationSize) {
      old = recent
      oldSize = recentSize
      recent = new Map()
      recentSize = 0
      sweepOld = new Cursor(old)
      sweepRecent = new Cursor(recent)
      lastTable = undefined
    }
    let table = recent.get(policy)
    if (table === undefined) {
      table = new Map()
      recent.set(policy, table)
      lastTable = undefined
    }
    table.set(key, entry)
    recentSize++
  }

  /** Look at one entry of each generation and drop it if it has expired. */
  function sweepSome(at: number): void {
    const o = sweepOld.next()
    if (o !== undefined && dead(o[1], at)) {
      sweepOld.table!.delete(o[0])
      oldSize--
    }
    const r = sweepRecent.next()
    if (r === undefined) {
      sweepRecent = new Cursor(recent)
      return
    }
    const entry = r[1]
    if (entry.touched) entry.touched = false
    else if (dead(entry, at)) {
      sweepRecent.table!.delete(r[0])
      recentSize--
    }
  }

  function write(step: Step, entry: Entry | undefined, state: unknown, resetMs: number, at: number): void {
    if (entry === undefined) {
      if (resetMs > 0)
        insert(step.policy.name, step.key, {
          state,
          expiresAt: at + resetMs,
          blockedUntil: NOT_BLOCKED,
          touched: false,
        })
      sweepSome(at)
    } else {
      entry.state = resetMs > 0 ? state : undefined
      entry.expiresAt = at + resetMs
    }
  }

  interface Evaluated extends StepResult {
    state: unknown
  }

  function evaluate(step: Step, entry: Entry | undefined, at: number, peek: boolean): Evaluated {
    const state = entry !== undefined && entry.expiresAt > at ? entry.state : undefined
    const algorithm = algorithms[step.policy.algorithm]
    if (entry !== undefined && entry.blockedUntil > at) {
      // A block adds a wait; it never shortens the one the units already impose (nothing is charged
      // while blocked, so the state's own wait still holds when the block ends).
      const left = entry.blockedUntil - at
      const units = algorithm.consume(state, step.policy, at, step.cost, true)
      return {
        allowed: false,
        remaining: 0,
        resetMs: Math.max(left, units.resetMs),
        retryAfterMs: Math.max(left, units.retryAfterMs),
        blocked: true,
        state: entry.state,
      }
    }
    const outcome = algorithm.consume(state, step.policy, at, step.cost, peek, step.leaseId)
    return {
      allowed: outcome.allowed,
      remaining: outcome.remaining,
      resetMs: outcome.resetMs,
      retryAfterMs: outcome.retryAfterMs,
      blocked: false,
      state: outcome.state,
    }
  }

  function strip(result: Evaluated): StepResult {
    return {
      allowed: result.allowed,
      remaining: result.remaining,
      resetMs: result.resetMs,
      retryAfterMs: result.retryAfterMs,
      blocked: result.blocked,
    }
  }

  function applyOneSync(step: Step, mode: 'consume' | 'peek'): StepResult {
    // The common case, kept lean: one outcome object, one result object.
    const at = clock()
    const peek = mode === 'peek'
    const entry = read(step.policy.name, step.key)
    if (entry !== undefined && entry.blockedUntil > at) return strip(evaluate(step, entry, at, peek))
    const state = entry !== undefined && entry.expiresAt > at ? entry.state : undefined
    const policy = step.policy
    const o = algorithms[policy.algorithm].consume(state, policy, at, step.cost, peek, step.leaseId)
    if (o.allowed && !peek) write(step, entry, o.state, o.resetMs, at)
    // Every insert sweeps (in write); every 8th decision too, denied ones included, so keys that
    // went idle are cleared even when the traffic left is all hitting its limits.
    if ((++decisions & 7) === 0) sweepSome(at)
    return {
      allowed: o.allowed,
      remaining: o.remaining,
      resetMs: o.resetMs,
      retryAfterMs: o.retryAfterMs,
      blocked: false,
    }
  }

  function applySync(steps: readonly Step[], mode: 'consume' | 'peek'): StepResult[] {
    if (steps.length === 1) return [applyOneSync(steps[0]!, mode)]
    const at = clock()
    const peek = mode === 'peek'
    const entries = steps.map((step) => read(step.policy.name, step.key))
    const results = steps.map((step, i) => evaluate(step, entries[i], at, peek))
    if (peek) return results.map(strip)
    if (results.every((r) => r.allowed)) {
      for (let i = 0; i < results.length; i++)
        write(steps[i]!, entries[i], results[i]!.state, results[i]!.resetMs, at)
      return results.map(strip)
    }
    // All or nothing: nothing is charged, and layers that would admit report their state as it is.
    return results.map((r, i) => (r.allowed ? strip(evaluate(steps[i]!, entries[i], at, true)) : strip(r)))
  }

  const store: MemoryStore = {
    name: 'memory',
    get size() {
      return recentSize + oldSize
    },
    applySync,
    applyOneSync,
    async apply(steps, mode) {
      return applySync(steps, mode)
    },
    async refund(steps) {
      const at = clock()
      for (const step of steps) {
        const entry = read(step.policy.name, step.key)
        if (entry === undefined || entry.expiresAt <= at) continue
        const algorithm = algorithms[step.policy.algorithm]
        const state = algorithm.refund(entry.state, step.policy, at, step.cost, step.leaseId)
        // The new time to live: how long until the refunded state is back to full.
        const probe = state === undefined ? undefined : algorithm.consume(state, step.policy, at, 1, true)
        entry.state = state
        entry.expiresAt = probe === undefined ? at : at + probe.resetMs
      }
    },
    async block(steps, durationMs) {
      const at = clock()
      for (const step of steps) {
        const entry = read(step.policy.name, step.key)
        if (entry === undefined) {
          insert(step.policy.name, step.key, {
            state: undefined,
            expiresAt: at,
            blockedUntil: at + durationMs,
            touched: false,
          })
        } else entry.blockedUntil = Math.max(entry.blockedUntil, at + durationMs)
      }
    },
    async reset(steps) {
      for (const step of steps) {
        if (recent.get(step.policy.name)?.delete(step.key)) recentSize--
        if (old.get(step.policy.name)?.delete(step.key)) oldSize--
      }
    },
    async close() {
      lastTable = undefined
      recent = new Map()
      old = new Map()
      recentSize = 0
      oldSize = 0
      sweepOld = new Cursor(old)
      sweepRecent = new Cursor(recent)
    },
  }
  return store
}
