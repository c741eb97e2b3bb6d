// The options of `redisStore`, checked once when the store is made and resolved with their defaults.
import { InvalidOptionsError } from '../../errors.js'
import { boolean, must, object, oneOf, optional, text, wholeNumber } from '../../option-checks.js'
import { checkKnownKeys, isOptionsObject, keysOf } from '../../options.js'
import type { RedisStoreOptions } from './index.js'
import { SCRIPT_RETRY_MS } from './script.js'

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
}

const OPTION_KEYS = keysOf<RedisStoreOptions>({
  prefix: true,
  clock: true,
  now: true,
  coalesce: true,
  coalesceWrites: true,
  slotSecret: true,
  scriptRetryMs: true,
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
  }
}
