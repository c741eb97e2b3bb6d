// The in-process store: runs the pure transitions directly. Bounded by `maxKeys` in all and by each
// policy's own `maxKeys`; when a key must go, keys that would admit go before keys that deny or are
// blocked, so evicting is never the cheap way to lift a lockout. Expiry needs no timer per key:
// expired entries are swept a little on every write.
import { fixedWindow } from '../algorithms/fixed-window.js'
import { gcra } from '../algorithms/gcra.js'
import { algorithms } from '../algorithms/index.js'
import { decideAll, decideStep, refundStep, type StepDecision } from '../algorithms/rules.js'
import { slidingWindowCounter } from '../algorithms/sliding-window-counter.js'
import { tokenBucket } from '../algorithms/token-bucket.js'
import type { Algorithm, Outcome } from '../algorithms/types.js'
import { InvalidOptionsError } from '../errors.js'
import { checkKnownKeys, isOptionsObject, keysOf } from '../options.js'
import type { ResolvedPolicy } from '../policy.js'
import { memoryRecords } from '../records.js'
import type { Step, StepResult, Store } from '../store.js'

export interface MemoryStoreOptions {
  /** The clock, in ms. Default `Date.now`. Tests pass a fake clock. */
  now?: () => number
  /**
   * The most keys stored at once, all policies together. Default 1,000,000. When full, the policy
   * holding the most keys gives one up (see docs/stores.md#eviction); a policy's own `maxKeys`
   * bounds its share.
   */
  maxKeys?: number
}

const OPTION_KEYS = keysOf<MemoryStoreOptions>({ now: true, maxKeys: true })

interface Entry {
  state: unknown
  /** When the state is back to empty (ms); after this (and after `blockedUntil`) the entry is dead. */
  expiresAt: number
  blockedUntil: number
  /** What happened to the entry since the sweeper or the evictor last looked at it. */
  use: Use
  /** Out of units or blocked at its last decision: kept in its table's `exhausted` map. */
  exhausted: boolean
}

/**
 * One policy's keys, in two maps by what losing them would cost. Each map keeps insertion order
 * (a key moves to the back when it changes map), which is the order keys are evicted in.
 */
interface Table {
  /** Keys that would admit at their last decision: forgetting one only forgives part of a count. */
  readonly open: Map<string, Entry>
  /** Keys that denied (no units left) or are blocked: evicted only when `open` is empty. */
  readonly exhausted: Map<string, Entry>
  /** Where eviction stands in each map (see `oldest`). */
  openCursor?: Iterator<[string, Entry]> | undefined
  exhaustedCursor?: Iterator<[string, Entry]> | undefined
}

/**
 * An entry's use since the sweeper or the evictor last looked at it. `MADE`: made by a decision and
 * not read since. The sweeper keeps a `MADE` entry (it had a decision) as it keeps a `READ` one; the
 * evictor gives a second chance to `READ` entries only, so that a flood of keys used once goes first.
 */
type Use = typeof IDLE | typeof MADE | typeof READ
const IDLE = 0
const MADE = 1
const READ = 2

const NOT_BLOCKED = 0
/** Read keys the evictor moves to the back before it drops one anyway: bounds one insert's work. */
const SECOND_CHANCES = 32

export interface MemoryStore extends Store {
  readonly inProcess: true
  /** Answers at once: the results themselves, never a promise. */
  apply(steps: readonly Step[], mode: 'consume' | 'peek'): StepResult[]
  /** The store's clock: whole ms of `options.now` (default `Date.now`). */
  now(): number
  /** Keys currently stored (live or not yet swept). Never above `maxKeys`. */
  readonly size: number
}

/**
 * The limiter's hot path: one step given as its parts, its result written into `out` (the caller's,
 * reused from call to call) and returned. Decides exactly as `apply` of that one step.
 */
type SingleStep = (
  policy: ResolvedPolicy,
  key: string,
  cost: number,
  mode: 'consume' | 'peek',
  out: StepResult,
) => StepResult

/**
 * Where a store made by `memoryStore` keeps its single-step path, for the limiter alone, beside the
 * `apply` it shortcuts. The property is not enumerable, so a copy (`{ ...store, apply }`) and a link
 * made with `forwardStore` do not carry it.
 */
const SINGLE_STEP: unique symbol = Symbol('sluice.singleStep')

interface SingleStepSlot {
  readonly apply: Store['apply']
  readonly single: SingleStep
}

/**
 * The single-step path of `store` when it is a store made by `memoryStore` whose `apply` nobody
 * replaced since (a replaced `apply` is what must run); undefined for anything else.
 */
export function singleStepOf(store: Store): SingleStep | undefined {
  const slot = (store as { [SINGLE_STEP]?: SingleStepSlot })[SINGLE_STEP]
  return slot !== undefined && slot.apply === store.apply ? slot.single : undefined
}

const TOKEN_BUCKET = tokenBucket as Algorithm<unknown>
const FIXED_WINDOW = fixedWindow as Algorithm<unknown>
const SLIDING_WINDOW_COUNTER = slidingWindowCounter as Algorithm<unknown>
const GCRA = gcra as Algorithm<unknown>

/** `out` (the caller's, reused) holding a decided step's answer. */
function answerInto(
  out: StepResult,
  r: { allowed: boolean; remaining: number; resetMs: number; retryAfterMs: number },
  blocked: boolean,
): StepResult {
  out.allowed = r.allowed
  out.remaining = r.remaining
  out.resetMs = r.resetMs
  out.retryAfterMs = r.retryAfterMs
  out.blocked = blocked
  return out
}

const dead = (entry: Entry, at: number): boolean => entry.expiresAt <= at && entry.blockedUntil <= at
const tableSize = (table: Table): number => table.open.size + table.exhausted.size

/** Walks every table's entries, one at a time, without allocating per step. */
class Cursor {
  private readonly tables: Iterator<Table>
  private entries: Iterator<[string, Entry]> | undefined
  private table: Table | undefined
  private inExhausted = false
  /** The map the last entry came from (to delete it). */
  map: Map<string, Entry> | undefined
  constructor(tables: Map<string, Table>) {
    this.tables = tables.values()
  }
  /** The next [key, entry], or undefined after the last table. */
  next(): [string, Entry] | undefined {
    for (;;) {
      if (this.entries !== undefined) {
        const r = this.entries.next()
        if (!r.done) return r.value
        if (!this.inExhausted && this.table !== undefined) {
          this.inExhausted = true
          this.map = this.table.exhausted
          this.entries = this.map.entries()
          continue
        }
      }
      const t = this.tables.next()
      if (t.done) return undefined
      this.table = t.value
      this.inExhausted = false
      this.map = t.value.open
      this.entries = this.map.entries()
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
  /** Policy name -> its keys. Nested rather than keyed by `policy:key`, so a lookup hashes the caller's own string. */
  let tables = new Map<string, Table>()
  let size = 0
  // The sweeper walks all entries a little on every insert and in every millisecond that has a
  // decision, dropping those that have expired: idle keys go away without a timer, even when
  // traffic moves on to other keys.
  let sweeper = new Cursor(tables)
  /** The clock's millisecond of the last decision that swept. */
  let sweptAt = -1

  // Date.now is whole milliseconds already: called as it is, one call less per decision.
  const clock: () => number = options.now === undefined ? Date.now : () => Math.floor(now())

  // The table of the last policy read: saves a lookup per decision.
  let lastPolicy = ''
  let lastTable: Table | undefined

  const tableOf = (policy: string): Table =>
    policy === lastPolicy && lastTable !== undefined ? lastTable : tableFor(policy)

  function tableFor(policy: string): Table {
    let table = tables.get(policy)
    if (table === undefined) {
      table = { open: new Map(), exhausted: new Map() }
      tables.set(policy, table)
    }
    lastPolicy = policy
    lastTable = table
    return table
  }

  /**
   * The entry of a key, possibly expired (callers treat an expired state as empty). An expired entry
   * is reused in place rather than deleted and re-created: a key that refills between hits would
   * otherwise churn the Map on every decision. The sweeper deletes the ones nobody touches.
   */
  function read(table: Table, key: string): Entry | undefined {
    const entry = table.open.get(key) ?? table.exhausted.get(key)
    if (entry !== undefined) entry.use = READ
    return entry
  }

  /** Keep `entry` in the map its last decision calls for (`exhausted`: no units left, or blocked). */
  function mark(table: Table, key: string, entry: Entry, exhausted: boolean): void {
    if (entry.exhausted === exhausted) return
    entry.exhausted = exhausted
    if (exhausted) {
      table.open.delete(key)
      table.exhausted.set(key, entry)
    } else {
      table.exhausted.delete(key)
      table.open.set(key, entry)
    }
  }

  function insert(table: Table, key: string, entry: Entry, policyMaxKeys: number | undefined): void {
    // The policy over its own share pays with its own keys; over the store's bound, the policy
    // holding the most keys pays (a flood of one policy is the largest table, so it pays itself).
    if (policyMaxKeys !== undefined && tableSize(table) >= policyMaxKeys) evictFrom(table)
    else if (size >= maxKeys) evictFrom(largestTable())
    ;(entry.exhausted ? table.exhausted : table.open).set(key, entry)
    size++
  }

  function largestTable(): Table {
    let largest: Table | undefined
    for (const table of tables.values()) {
      if (largest === undefined || tableSize(table) > tableSize(largest)) largest = table
    }
    return largest!
  }

  /**
   * The oldest entry of one of a table's maps. A Map keeps insertion order, but finding its first
   * entry again after deleting from the front skips every deleted slot (a full scan per eviction),
   * so each map keeps one long-lived iterator that only moves forward. It sees keys added after it
   * was made; everything it passes is deleted or moved to the back, so it never skips a key.
   */
  function oldest(table: Table, exhausted: boolean): [string, Entry] | undefined {
    const map = exhausted ? table.exhausted : table.open
    if (map.size === 0) return undefined
    let r = (exhausted ? table.exhaustedCursor : table.openCursor)?.next()
    if (r === undefined || r.done) {
      // A finished iterator stays finished: start another from the front.
      const cursor = map.entries()
      if (exhausted) table.exhaustedCursor = cursor
      else table.openCursor = cursor
      r = cursor.next()
    }
    return r.done ? undefined : r.value
  }

  /**
   * Drop one key of `table`: the oldest open key not read lately, else (nothing else can go) the
   * oldest exhausted key. Only a full store or a full share gets here: one insert's work, never a
   * decision's. Expired keys are the sweeper's (sweepSome), which also runs on every insert.
   */
  function evictFrom(table: Table): void {
    let moved = 0
    for (let first = oldest(table, false); first !== undefined; first = oldest(table, false)) {
      const [key, entry] = first
      table.open.delete(key)
      if (entry.use === READ && moved < SECOND_CHANCES) {
        // Read since it was inserted (or last passed over): to the back, once.
        entry.use = IDLE
        table.open.set(key, entry)
        moved++
        continue
      }
      size--
      return
    }
    const first = oldest(table, true)
    if (first !== undefined) {
      table.exhausted.delete(first[0])
      size--
    }
  }

  /**
   * Look at one entry and drop it if it has expired and had no decision since the last look. An entry
   * made since then counts as used: a key that expires between its decisions is otherwise dropped
   * by a pass that comes round before its next one, made again, and the insert moves the sweeper on
   * to drop the next such key, a churn that sustains itself.
   */
  function sweepSome(at: number): void {
    const r = sweeper.next()
    if (r === undefined) {
      sweeper = new Cursor(tables)
      return
    }
    const entry = r[1]
    if (entry.use !== IDLE) entry.use = IDLE
    else if (dead(entry, at)) {
      sweeper.map!.delete(r[0])
      size--
    }
  }

  function write(
    table: Table,
    key: string,
    policyMaxKeys: number | undefined,
    entry: Entry | undefined,
    state: unknown,
    resetMs: number,
    remaining: number,
    at: number,
  ): void {
    if (entry === undefined) {
      if (resetMs > 0)
        insert(
          table,
          key,
          {
            state,
            expiresAt: at + resetMs,
            blockedUntil: NOT_BLOCKED,
            use: MADE,
            exhausted: remaining === 0,
          },
          policyMaxKeys,
        )
      sweepSome(at)
    } else {
      entry.state = resetMs > 0 ? state : undefined
      entry.expiresAt = at + resetMs
      if (entry.exhausted !== (remaining === 0)) mark(table, key, entry, remaining === 0)
    }
  }

  /** One step decided on its entry (src/algorithms/rules.ts: the block rule). */
  function decideEntry(
    policy: ResolvedPolicy,
    cost: number,
    leaseId: string | undefined,
    entry: Entry | undefined,
    at: number,
    peek: boolean,
  ): StepDecision {
    const live = entry !== undefined && entry.expiresAt > at
    return decideStep(
      policy,
      cost,
      leaseId,
      live ? entry.state : undefined,
      live ? entry.expiresAt - at : undefined,
      entry === undefined ? NOT_BLOCKED : entry.blockedUntil,
      at,
      peek,
    )
  }

  /** One step, its result written into `out`: no steps or results arrays, no Step object. */
  function applyInto(
    policy: ResolvedPolicy,
    key: string,
    cost: number,
    leaseId: string | undefined,
    mode: 'consume' | 'peek',
    out: StepResult,
  ): StepResult {
    const at = clock()
    const peek = mode === 'peek'
    const table = tableOf(policy.id)
    const entry = read(table, key)
    if (entry !== undefined && entry.blockedUntil > at) {
      return answerInto(out, decideEntry(policy, cost, leaseId, entry, at, peek), true)
    }
    // The ms the state has left: when it was written to end is what a state written under other
    // parameters is bound by (read only with a state). Always a small integer: an absolute time, or
    // `undefined` for no entry, is a boxed number on every call, which costs more instructions per
    // decision than the check it feeds (counted with callgrind).
    const endsInMs = entry === undefined ? 0 : entry.expiresAt - at
    // In place: this store holds the only reference to a stored state (live or expired) and
    // replaces it with the outcome's state whenever the step commits, so the transition may write
    // the new state into it (`into`) rather than allocate one per decision.
    const state = endsInMs > 0 ? entry!.state : undefined
    const into = entry?.state
    // Each counting algorithm's consume is called from a call site of its own: one call site shared
    // by every algorithm of a process stops being inlined once it has seen several, and each
    // decision then pays for the call and an outcome object. The switch is written out here rather
    // than in a function of its own on purpose: V8 inlines callees into a compiled function only up
    // to a budget of bytecode, and this function, the algorithm's consume, `read` and `write` fit in
    // it together only without another function between them. It also keeps this function too large
    // to be inlined into its callers, so where its compiled code begins does not change from one
    // process to the next.
    let o: Outcome<unknown>
    switch (policy.algorithm) {
      case 'token-bucket':
        o = TOKEN_BUCKET.consume(state, policy, at, cost, peek, leaseId, into, endsInMs)
        break
      case 'fixed-window':
        o = FIXED_WINDOW.consume(state, policy, at, cost, peek, leaseId, into, endsInMs)
        break
      case 'sliding-window-counter':
        o = SLIDING_WINDOW_COUNTER.consume(state, policy, at, cost, peek, leaseId, into, endsInMs)
        break
      case 'gcra':
        o = GCRA.consume(state, policy, at, cost, peek, leaseId, into, endsInMs)
        break
      default:
        o = algorithms[policy.algorithm].consume(state, policy, at, cost, peek, leaseId, into, endsInMs)
    }
    if (o.allowed && !peek) write(table, key, policy.maxKeys, entry, o.state, o.resetMs, o.remaining, at)
    else if (entry !== undefined && entry.exhausted !== (o.remaining === 0))
      mark(table, key, entry, o.remaining === 0)
    // Every insert sweeps (in write); so does the first decision of each millisecond, denied ones
    // included, so keys that went idle are cleared even when the traffic left is all hitting its
    // limits. Once a millisecond rather than once in so many decisions: a step visits an entry the
    // decision does not use, and a busy process would pay for thousands of them each millisecond.
    if (at !== sweptAt) {
      sweptAt = at
      sweepSome(at)
    }
    return answerInto(out, o, false)
  }

  const decideInto: SingleStep = (policy, key, cost, mode, out) =>
    applyInto(policy, key, cost, undefined, mode, out)

  function applyOne(step: Step, mode: 'consume' | 'peek'): StepResult {
    const out: StepResult = { allowed: false, remaining: 0, resetMs: 0, retryAfterMs: 0, blocked: false }
    return applyInto(step.policy, step.key, step.cost, step.leaseId, mode, out)
  }

  function apply(steps: readonly Step[], mode: 'consume' | 'peek'): StepResult[] {
    if (steps.length === 1) return [applyOne(steps[0]!, mode)]
    const at = clock()
    const tablesOf = steps.map((step) => tableOf(step.policy.id))
    const entries = steps.map((step, i) => read(tablesOf[i]!, step.key))
    const all = decideAll(steps.length, mode, (i, peek) => {
      const step = steps[i]!
      return decideEntry(step.policy, step.cost, step.leaseId, entries[i], at, peek)
    })
    if (all.commit) {
      for (let i = 0; i < steps.length; i++) {
        const d = all.decisions[i]!
        const step = steps[i]!
        write(tablesOf[i]!, step.key, step.policy.maxKeys, entries[i], d.state, d.resetMs, d.remaining, at)
      }
    } else if (mode === 'consume') {
      // Nothing was committed: each entry moves to the map its answer calls for.
      for (let i = 0; i < steps.length; i++) {
        const entry = entries[i]
        const r = all.results[i]!
        if (entry !== undefined) mark(tablesOf[i]!, steps[i]!.key, entry, r.remaining === 0 || r.blocked)
      }
    }
    return all.results
  }

  const records = memoryRecords(clock)
  const store: MemoryStore = {
    name: 'memory',
    inProcess: true,
    now: clock,
    records,
    get size() {
      return size
    },
    apply,
    async refund(steps) {
      const at = clock()
      for (const step of steps) {
        const table = tableOf(step.policy.id)
        const entry = read(table, step.key)
        if (entry === undefined || entry.expiresAt <= at) continue
        const r = refundStep(step.policy, step.cost, step.leaseId, entry.state, entry.expiresAt, at)
        entry.state = r.state
        entry.expiresAt = r.endsAt
        mark(table, step.key, entry, entry.blockedUntil > at || r.remaining === 0)
      }
    },
    async charge(steps) {
      const at = clock()
      for (const step of steps) {
        const table = tableOf(step.policy.id)
        const entry = read(table, step.key)
        const live = entry !== undefined && entry.expiresAt > at
        const o = algorithms[step.policy.algorithm].charge(
          live ? entry.state : undefined,
          step.policy,
          at,
          step.cost,
          live ? entry.expiresAt - at : undefined,
        )
        write(table, step.key, step.policy.maxKeys, entry, o.state, o.resetMs, o.remaining, at)
      }
    },
    async block(steps, durationMs) {
      const at = clock()
      for (const step of steps) {
        const table = tableOf(step.policy.id)
        const entry = read(table, step.key)
        if (entry === undefined) {
          const blocked: Entry = {
            state: undefined,
            expiresAt: at,
            blockedUntil: at + durationMs,
            use: MADE,
            exhausted: true,
          }
          insert(table, step.key, blocked, step.policy.maxKeys)
        } else {
          entry.blockedUntil = Math.max(entry.blockedUntil, at + durationMs)
          mark(table, step.key, entry, true)
        }
      }
    },
    async reset(steps) {
      for (const step of steps) {
        const table = tables.get(step.policy.id)
        if (table === undefined) continue
        if (table.open.delete(step.key)) size--
        if (table.exhausted.delete(step.key)) size--
      }
    },
    async close() {
      records.clear()
      lastTable = undefined
      tables = new Map()
      size = 0
      sweeper = new Cursor(tables)
    },
  }
  const slot: SingleStepSlot = { apply, single: decideInto }
  Object.defineProperty(store, SINGLE_STEP, { value: slot, enumerable: false })
  return store
}
