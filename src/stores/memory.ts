// The in-process store: runs the pure transitions directly. Bounded by `maxKeys` with
// least-recently-used eviction in two generations (a hot key is never evicted before a cold one),
// and expiry without a timer per key: expired entries are dropped when touched or swept lazily.
import { algorithms } from '../algorithms/index.js'
import { InvalidOptionsError } from '../errors.js'
import type { Step, StepResult, SyncStore } from '../store.js'

export interface MemoryStoreOptions {
  /** The clock, in ms. Default `Date.now`. Tests pass a fake clock. */
  now?: () => number
  /** The most keys held at once; least recently used keys go first. Default 1,000,000. */
  maxKeys?: number
}

interface Entry {
  state: unknown
  /** When the state is back to empty (ms); the entry is dead after this and after `blockedUntil`. */
  expiresAt: number
  blockedUntil: number
}

const NOT_BLOCKED = 0

export interface MemoryStore extends SyncStore {
  /** Keys currently held (live or not yet swept). */
  readonly size: number
}

/**
 * An in-memory store, the default. Decisions are exact within one process.
 * @example createLimiter({ store: memoryStore({ maxKeys: 100_000 }), policies })
 */
export function memoryStore(options: MemoryStoreOptions = {}): MemoryStore {
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
  let recent = new Map<string, Entry>()
  let old = new Map<string, Entry>()
  // Two cursors walk the generations a little on every write, dropping entries that have expired:
  // idle keys go away without a timer, even when traffic moves on to other keys.
  let sweepOld: Iterator<[string, Entry]> = old.entries()
  let sweepRecent: Iterator<[string, Entry]> = recent.entries()

  const clock = (): number => Math.floor(now())

  function read(id: string, at: number): Entry | undefined {
    let entry = recent.get(id)
    if (entry === undefined) {
      entry = old.get(id)
      if (entry === undefined) return undefined
      old.delete(id)
      if (entry.expiresAt <= at && entry.blockedUntil <= at) return undefined
      insert(id, entry)
      return entry
    }
    if (entry.expiresAt <= at && entry.blockedUntil <= at) {
      recent.delete(id)
      return undefined
    }
    return entry
  }

  function insert(id: string, entry: Entry): void {
    if (recent.size >= generationSize) {
      old = recent
      recent = new Map()
      sweepOld = old.entries()
      sweepRecent = recent.entries()
    }
    recent.set(id, entry)
  }

  /** Look at one entry of each generation and drop it if it has expired. */
  function sweepSome(at: number): void {
    const o = sweepOld.next()
    if (!o.done) {
      const [id, entry] = o.value
      if (entry.expiresAt <= at && entry.blockedUntil <= at) old.delete(id)
    }
    const r = sweepRecent.next()
    if (r.done) {
      sweepRecent = recent.entries()
      return
    }
    const [id, entry] = r.value
    if (entry.expiresAt <= at && entry.blockedUntil <= at) recent.delete(id)
  }

  function write(id: string, entry: Entry | undefined, state: unknown, resetMs: number, at: number): void {
    if (entry === undefined) {
      if (resetMs > 0) insert(id, { state, expiresAt: at + resetMs, blockedUntil: NOT_BLOCKED })
    } else {
      entry.state = resetMs > 0 ? state : undefined
      entry.expiresAt = at + resetMs
    }
    sweepSome(at)
  }

  const idOf = (step: Step): string => `${step.policy.name}:${step.key}`

  function evaluate(
    step: Step,
    entry: Entry | undefined,
    at: number,
    peek: boolean,
  ): StepResult & { state: unknown } {
    const state = entry !== undefined && entry.expiresAt > at ? entry.state : undefined
    if (entry !== undefined && entry.blockedUntil > at) {
      // A block adds a wait; it never shortens the one the units already impose (nothing is charged
      // while blocked, so the state's own wait still holds when the block ends).
      const left = entry.blockedUntil - at
      const units = algorithms[step.policy.algorithm].consume(state, step.policy, at, step.cost, true)
      return {
        allowed: false,
        remaining: 0,
        resetMs: Math.max(left, units.resetMs),
        retryAfterMs: Math.max(left, units.retryAfterMs),
        blocked: true,
        state: entry.state,
      }
    }
    const outcome = algorithms[step.policy.algorithm].consume(
      state,
      step.policy,
      at,
      step.cost,
      peek,
      step.leaseId,
    )
    return {
      allowed: outcome.allowed,
      remaining: outcome.remaining,
      resetMs: outcome.resetMs,
      retryAfterMs: outcome.retryAfterMs,
      blocked: false,
      state: outcome.state,
    }
  }

  function strip(result: StepResult & { state: unknown }): StepResult {
    return {
      allowed: result.allowed,
      remaining: result.remaining,
      resetMs: result.resetMs,
      retryAfterMs: result.retryAfterMs,
      blocked: result.blocked,
    }
  }

  function applySync(steps: readonly Step[], mode: 'consume' | 'peek'): StepResult[] {
    const at = clock()
    const peek = mode === 'peek'
    if (steps.length === 1) {
      const step = steps[0]!
      const id = idOf(step)
      const entry = read(id, at)
      const result = evaluate(step, entry, at, peek)
      if (result.allowed && !peek) write(id, entry, result.state, result.resetMs, at)
      return [strip(result)]
    }
    const ids = steps.map(idOf)
    const entries = ids.map((id) => read(id, at))
    const results = steps.map((step, i) => evaluate(step, entries[i], at, peek))
    if (peek) return results.map(strip)
    if (results.every((r) => r.allowed)) {
      for (let i = 0; i < results.length; i++)
        write(ids[i]!, entries[i], results[i]!.state, results[i]!.resetMs, at)
      return results.map(strip)
    }
    // All or nothing: nothing is charged, and layers that would admit report their state as it is.
    return results.map((r, i) => (r.allowed ? strip(evaluate(steps[i]!, entries[i], at, true)) : strip(r)))
  }

  const store: MemoryStore = {
    name: 'memory',
    get size() {
      return recent.size + old.size
    },
    applySync,
    async apply(steps, mode) {
      return applySync(steps, mode)
    },
    async refund(steps) {
      const at = clock()
      for (const step of steps) {
        const id = idOf(step)
        const entry = read(id, at)
        if (entry === undefined || entry.expiresAt <= at) continue
        const state = algorithms[step.policy.algorithm].refund(
          entry.state,
          step.policy,
          at,
          step.cost,
          step.leaseId,
        )
        const probe =
          state === undefined
            ? undefined
            : algorithms[step.policy.algorithm].consume(state, step.policy, at, 1, true)
        entry.state = state
        entry.expiresAt = probe === undefined ? at : at + probe.resetMs
      }
    },
    async block(steps, durationMs) {
      const at = clock()
      for (const step of steps) {
        const id = idOf(step)
        const entry = read(id, at)
        if (entry === undefined)
          insert(id, { state: undefined, expiresAt: at, blockedUntil: at + durationMs })
        else entry.blockedUntil = Math.max(entry.blockedUntil, at + durationMs)
      }
    },
    async reset(steps) {
      for (const step of steps) {
        const id = idOf(step)
        recent.delete(id)
        old.delete(id)
      }
    },
    async close() {
      recent.clear()
      old.clear()
    },
  }
  return store
}
