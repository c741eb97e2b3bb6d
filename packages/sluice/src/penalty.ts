// Escalating penalties: a policy's `penalty` option as users write it, its validation, and the
// resolved form the limiter's penalty link (limiter/penalty-store.ts) decides with.
import type { Duration } from './duration.js'
import { parseDuration } from './duration.js'
import { InvalidPolicyError } from './errors.js'
import { checkKnownKeys, isOptionsObject, keysOf } from './options.js'

/**
 * After `after` denials of a key for lack of units within `within`, the key is blocked for `block`;
 * each further penalty the key earns while it remembers the last ones multiplies the block by
 * `factor`, up to `max`. See docs/policies.md#escalating-penalties.
 * @example { after: 5, within: '1m', block: '1m', factor: 2, max: '1h' }
 */
export interface PenaltyOptions {
  /** How many denials for lack of units earn a penalty: a whole number >= 1. */
  after: number
  /** The span those denials must fall within (a sliding window). */
  within: Duration
  /** The first penalty's block. */
  block: Duration
  /** Each repeat multiplies the block by this (>= 1). Default 2. */
  factor?: number
  /** The longest block (>= `block`). Default 24h, or `block` when that is longer. */
  max?: Duration
}

/** A penalty after validation: durations in ms, and the block of every level. */
export interface ResolvedPenalty {
  /** Denials for lack of units that earn a penalty. */
  readonly after: number
  /** The span they must fall within, in ms. */
  readonly withinMs: number
  /** The first penalty's block, in ms. */
  readonly blockMs: number
  /** What each repeat multiplies the block by. */
  readonly factor: number
  /** The longest block, in ms. */
  readonly maxMs: number
  /**
   * How long the key's earlier penalties count towards its level: `2 x maxMs`. A key without a
   * penalty for that long starts again at `blockMs`.
   */
  readonly memoryMs: number
  /** The block of each level: `blocksMs[n]` for a key with n earlier penalties; the last is `maxMs`. */
  readonly blocksMs: readonly number[]
}

const PENALTY_KEYS = keysOf<PenaltyOptions>({
  after: true,
  within: true,
  block: true,
  factor: true,
  max: true,
})
const DEFAULT_FACTOR = 2
const DEFAULT_MAX_MS = 24 * 60 * 60 * 1000
/** The most levels below `max`: the level is kept as one log entry per penalty. */
const MAX_LEVELS = 1000
/** A denial is one log entry: the same bound as a sliding-window-log's limit. */
const MAX_AFTER = 1_000_000
// Counts x windows stay exact in doubles, as for every policy (policy.ts).
const MAX_PRODUCT = 2 ** 50

/** A value as a message quotes it: numbers as written, strings quoted, anything else by its type. */
function shown(value: unknown): string {
  if (typeof value === 'number') return String(value)
  if (typeof value === 'string') return JSON.stringify(value)
  return value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value
}

/** Validate `policies.<name>.penalty` and resolve it. Throws `InvalidPolicyError` / `InvalidDurationError`. */
export function resolvePenalty(name: string, value: unknown): ResolvedPenalty {
  const where = `policies.${name}.penalty`
  const fail = (message: string) => new InvalidPolicyError(`${where}${message}`)
  if (!isOptionsObject(value))
    throw fail(`: use { after, within, block, factor?, max? }, got ${shown(value)}`)
  checkKnownKeys(where, value, PENALTY_KEYS, (message) => new InvalidPolicyError(message))
  const { after, within, block, factor, max } = value as Record<keyof PenaltyOptions, unknown>
  if (typeof after !== 'number' || !Number.isSafeInteger(after) || after < 1 || after > MAX_AFTER)
    throw fail(
      `.after: how many denials earn a penalty, a whole number from 1 to ${MAX_AFTER}; got ${shown(after)}`,
    )
  const withinMs = parseDuration(within, `${where}.within`)
  const blockMs = parseDuration(block, `${where}.block`)
  if (factor !== undefined && (typeof factor !== 'number' || !Number.isFinite(factor) || factor < 1))
    throw fail(`.factor: a number >= 1 (1 keeps every block at \`block\`); got ${shown(factor)}`)
  const maxMs = max === undefined ? Math.max(DEFAULT_MAX_MS, blockMs) : parseDuration(max, `${where}.max`)
  if (maxMs < blockMs)
    throw fail(`.max: the longest block must be at least \`block\` (${blockMs}ms); got ${maxMs}ms`)
  if (after * withinMs > MAX_PRODUCT)
    throw fail(': after x within is too large to count exactly; use a shorter `within` or a smaller `after`')
  const blocksMs = levelBlocks(blockMs, factor ?? DEFAULT_FACTOR, maxMs)
  if (blocksMs === undefined)
    throw fail(
      `.factor: ${shown(factor)} takes more than ${MAX_LEVELS} repeats to reach max; use a larger factor, a longer block or a shorter max`,
    )
  const memoryMs = 2 * maxMs
  if ((blocksMs.length + LEVEL_SLACK) * memoryMs > MAX_PRODUCT)
    throw fail('.max: too long to count penalties exactly; use a shorter max')
  return Object.freeze({
    after,
    withinMs,
    blockMs,
    factor: factor ?? DEFAULT_FACTOR,
    maxMs,
    memoryMs,
    blocksMs: Object.freeze(blocksMs),
  })
}

/**
 * Room in the level's log above the levels themselves. Penalties at `max` are at least `max` apart
 * (a blocked key is never denied for lack of units), so at most three fall within `memoryMs`
 * (2 x max): the log never fills, and a key penalised at `max` keeps its level.
 */
export const LEVEL_SLACK = 3

/** The block of each level up to the first that reaches `maxMs`; undefined past MAX_LEVELS. */
function levelBlocks(blockMs: number, factor: number, maxMs: number): number[] | undefined {
  const blocks: number[] = []
  for (let level = 0; level <= MAX_LEVELS; level++) {
    const ms = Math.min(maxMs, Math.round(blockMs * factor ** level))
    blocks.push(ms)
    if (ms >= maxMs || factor === 1) return blocks
  }
  return undefined
}
