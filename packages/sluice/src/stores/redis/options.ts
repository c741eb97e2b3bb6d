// The options of `redisStore`, checked once when the store is made and resolved with their defaults.
import { InvalidOptionsError } from '../../errors.js'
import { boolean, must, object, oneOf, optional, text, wholeNumber } from '../../option-checks.js'
import { checkKnownKeys, isOptionsObject, keysOf } from '../../options.js'
import { SCRIPT_RETRY_MS } from './script.js'

export interface RedisStoreOptions {
  /** Namespace of every key: `prefix:{subject}:policy`. Default `sluice`. No `{` or `}`. */
  prefix?: string
  /**
   * Whose clock decides: `server` (default) reads Redis `TIME` inside the script, so application
   * hosts with skewed clocks agree; `client` uses `now()` of this process (deterministic tests).
   */
  clock?: 'server' | 'client'
  /** The clock in ms for `clock: 'client'` (default `Date.now`). Giving it implies `clock: 'client'`. */
  now?: () => number
  /**
   * Coalescing (default `true`): single-slot decisions issued in the same tick go to Redis together,
   * several per script call (sized to keep about four calls in flight, at most 128 per call),
   * evaluated in the order they were issued, each one still all or nothing. `false` sends one script
   * call per decision.
   */
  coalesce?: boolean
  /**
   * Write coalescing (default `true`): script calls of single decisions issued in the same tick leave
   * in shared socket writes, 16 calls at most per write, instead of one system call each. Each call
   * is still its own EVALSHA with its own reply. Applies to ioredis (node-redis already writes a
   * tick's commands together); other commands issued on the client in that tick share the writes too,
   * in order.
   */
  coalesceWrites?: boolean
  /**
   * Where a key's Redis Cluster hash tag (and so its slot and master) comes from.
   * - default: on a Cluster, a tag derived from the subject with a secret kept in Redis
   *   (`prefix:slot-secret`, created once with SETNX, shared by every process with this prefix);
   *   standalone, the subject itself (one server holds every slot).
   * - a string of at least 16 characters: a tag derived from the subject with this secret, on any
   *   topology; every process sharing the keys must use the same one.
   * - `false`: the subject itself, on any topology: a caller who picks its keys picks their slot.
   * Changing it changes every key name: counts and blocks start over once (docs/stores.md).
   */
  slotSecret?: string | false
  /**
   * Compact values (default `true`): on the server clock (Redis 7.0 and later) the counting
   * algorithms keep a state as one integer whose time is the key's expiry, about 50 B less per key
   * than a value that carries its times. `false` writes the value layouts, which releases before the
   * compact layout read: for a rolling deploy from one of them, deploy with `false`, then turn it on
   * once no older instance runs. Either way every layout is read (docs/stores.md#stored-values).
   */
  compactValues?: boolean
  /**
   * How long (ms) a script call keeps reloading its script and retrying while Redis answers NOSCRIPT
   * (its script cache lost to a restart, failover or SCRIPT FLUSH), from its first NOSCRIPT. Default
   * 100, the limiter's default `storeTimeout`; set it to your `storeTimeout`. The first retry is
   * always made, and at most 32.
   */
  scriptRetryMs?: number
}

/** What `redisStore` runs with. */
export interface RedisStoreSettings {
  prefix: string
  /** Whether this process's `now()` decides (`clock: 'client'`, or a `now` given). */
  clientClock: boolean
  now: () => number
  coalesce: boolean
  coalesceWrites: boolean
  /** As given: undefined keeps the secret in Redis on a Cluster. */
  slotSecret: string | false | undefined
  scriptRetryMs: number
  compactValues: boolean
}

const OPTION_KEYS = keysOf<RedisStoreOptions>({
  prefix: true,
  clock: true,
  now: true,
  coalesce: true,
  coalesceWrites: true,
  slotSecret: true,
  scriptRetryMs: true,
  compactValues: true,
})

const validateOptions = object(
  {
    prefix: optional(text(/^[^{}]{1,64}$/, { mismatch: 'prefix must be 1-64 characters without { or }' })),
    clock: optional(oneOf(['server', 'client'], "clock must be 'server' or 'client'")),
    now: optional(must((v) => typeof v === 'function', 'now must be a function returning ms')),
    coalesce: optional(boolean('coalesce must be true or false')),
    coalesceWrites: optional(boolean('coalesceWrites must be true or false')),
    slotSecret: optional(
      must(
        // Characters counted as code points: an emoji is one, not two UTF-16 units.
        (v) => v === false || (typeof v === 'string' && [...v].length >= 16),
        'slotSecret must be a string of at least 16 characters (the same random string in every process sharing the keys), or false',
      ),
    ),
    scriptRetryMs: optional(
      wholeNumber(0, 60_000, 'scriptRetryMs must be a whole number of ms from 0 to 60000'),
    ),
    compactValues: optional(boolean('compactValues must be true or false')),
  } satisfies Record<keyof RedisStoreOptions, unknown>,
  true,
)

/** Validate the options of `redisStore` (throws `InvalidOptionsError`) and apply the defaults. */
export function redisStoreSettings(options: RedisStoreOptions): RedisStoreSettings {
  if (!isOptionsObject(options)) throw new InvalidOptionsError('redisStore: options must be an object')
  checkKnownKeys('redisStore', options, OPTION_KEYS)
  const problem = validateOptions(options)
  if (problem !== undefined) throw new InvalidOptionsError(`redisStore: ${problem.message}`)
  if (options.clock === 'server' && options.now !== undefined) {
    throw new InvalidOptionsError("redisStore: now is only used with clock: 'client'; remove one of them")
  }
  return {
    prefix: options.prefix ?? 'sluice',
    clientClock: options.clock === 'client' || options.now !== undefined,
    now: options.now ?? Date.now,
    coalesce: options.coalesce ?? true,
    coalesceWrites: options.coalesceWrites ?? true,
    slotSecret: options.slotSecret,
    scriptRetryMs: options.scriptRetryMs ?? SCRIPT_RETRY_MS,
    compactValues: options.compactValues ?? true,
  }
}
