// The tick coalescer of the Redis store: single-slot decisions issued in the same tick go to Redis
// together, several per script call, in the order they were issued; while calls are in flight, so do
// the decisions of one turn of the event loop (an HTTP server's requests of that turn).
import type { Answer } from '../../answer.js'
import type { AlgorithmName } from '../../policy.js'
import type { StepResult } from '../../store.js'

/** Most decisions carried by one batch script call: bounds the time one call holds Redis. */
export const MAX_BATCH = 128
/** Coalesced script calls the store aims to keep in flight (see dispatch). */
const PIPELINE = 4
/**
 * Fewest decisions a call carries once twice as many are in flight: Redis is then busy, and what it
 * pays per call (about 46k instructions, against 33-41k per decision) matters more than overlap.
 */
const BUSY_CALL = 32

/** One decision pending its call: what the store groups (`G`), its mode and where its results go. */
export interface Pending<G> {
  group: G
  mode: 'consume' | 'peek'
  to: Answer<StepResult[]>
}

/**
 * Sends one call of coalesced decisions, all with the clock argument `at`; `algorithm` is the one
 * algorithm of every step, or undefined when they mix. It settles every entry, and calls `done` once,
 * before it settles them. `shareWrite`: the call may share a socket write with others of this flush
 * (a lone call of a flush has nothing to share with).
 */
export type SendBatch<G> = (
  at: string,
  entries: Pending<G>[],
  algorithm: AlgorithmName | undefined,
  done: () => void,
  shareWrite: boolean,
) => void

interface Batch<G> {
  /** The clock argument every decision of the batch shares. */
  at: string
  entries: Pending<G>[]
  algorithm: AlgorithmName | undefined
}

export interface Coalescer<G> {
  /**
   * One single-slot decision (slot group `id`, '' when standalone), coalesced with the others issued
   * in the same tick, or, while calls are in flight, in the same turn of the event loop. A batch is
   * sent when that tick (turn) ends, when it is full, when a decision with another clock value
   * arrives, or at `flush`, so the calls leave in the order they were issued and one key's decisions
   * are never reordered. Its results or its call's failure go to `to` (never before `add` returns,
   * but when a sender throws at once).
   */
  add(
    id: string,
    group: G,
    algorithm: AlgorithmName | undefined,
    mode: 'consume' | 'peek',
    at: string,
    to: Answer<StepResult[]>,
  ): void
  /** Send what is pending now: the store calls it before a command that does not go through here. */
  flush(): void
}

export function tickCoalescer<G>(send: SendBatch<G>): Coalescer<G> {
  /** Decisions pending until the end of the tick, by hash slot group. */
  let pending = new Map<string, Batch<G>>()
  /** Coalesced decisions sent and not yet answered. */
  let sent = 0
  /** A flush is scheduled. */
  let scheduled = false

  function track(
    at: string,
    entries: Pending<G>[],
    algorithm: AlgorithmName | undefined,
    shareWrite: boolean,
  ): void {
    const count = entries.length
    sent += count
    let settled = false
    const done = (): void => {
      if (settled) return
      settled = true
      sent -= count
    }
    try {
      send(at, entries, algorithm, done, shareWrite)
    } catch (error) {
      // A sender that throws has settled nothing: its decisions fail with what it threw.
      done()
      for (const e of entries) e.to.fail(error)
    }
  }

  /**
   * Send a batch as calls of at most `size` decisions, in order. The size keeps about PIPELINE calls
   * in flight: while Redis runs one call, this process reads the last reply and builds the next, so
   * the two overlap instead of taking turns (which one call of every pending decision would cause).
   * From 2 x BUSY_CALL decisions in flight a call carries at least BUSY_CALL: two calls still
   * overlap, and Redis runs fewer of them (docs/benchmark-cases.md, How many decisions share a call).
   */
  function dispatch(batch: Batch<G>, shareWrite: boolean): void {
    const { entries } = batch
    const total = entries.length + sent
    const fewest = total >= 2 * BUSY_CALL ? BUSY_CALL : 1
    const size = Math.min(MAX_BATCH, Math.max(fewest, Math.ceil(total / PIPELINE)))
    for (let i = 0; i < entries.length; i += size) {
      const part = entries.length <= size ? entries : entries.slice(i, i + size)
      track(batch.at, part, batch.algorithm, shareWrite)
    }
  }

  /**
   * When the pending decisions leave. Idle: at the end of the tick, so a lone decision waits one
   * process.nextTick. With calls in flight the reply is not here before the next poll of the event
   * loop anyway, so they wait for the end of this turn (setImmediate): an HTTP server handles each
   * request of a turn in its own tick, and their decisions then share calls instead of one call,
   * one socket write and one script run each.
   */
  function schedule(): void {
    if (scheduled) return
    scheduled = true
    if (sent === 0) process.nextTick(flush)
    else setImmediate(flush)
  }

  function flush(): void {
    scheduled = false
    if (pending.size === 0) return
    const batches = [...pending.values()]
    // A new map, not clear(): V8's clear() leaves the old table, entries included, linked to the
    // new one, and allocates the new one in the generation of the old. Once the map has been
    // promoted (a full collection while decisions were pending), every table is old, and each dead
    // table keeps its batches, with every decision object they reach, alive through the scavenges
    // until they are promoted too: this process's CPU per decision on Redis rose by about 70%.
    pending = new Map()
    // One batch (always, standalone) leaves as calls that share nothing: batch calls are split on
    // purpose, and a lone one-decision call has no other call of this flush to share a write with.
    const share = batches.length > 1
    for (const b of batches) dispatch(b, share)
  }

  return {
    add(id, group, algorithm, mode, at, to) {
      const entry: Pending<G> = { group, mode, to }
      let batch = pending.get(id)
      if (batch !== undefined && batch.at !== at) {
        pending.delete(id)
        dispatch(batch, true)
        batch = undefined
      }
      if (batch === undefined) {
        schedule()
        batch = { at, entries: [], algorithm }
        pending.set(id, batch)
      } else if (batch.algorithm !== algorithm) {
        batch.algorithm = undefined
      }
      batch.entries.push(entry)
      if (batch.entries.length >= MAX_BATCH) {
        pending.delete(id)
        dispatch(batch, true)
      }
    },
    flush,
  }
}
