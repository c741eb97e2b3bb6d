// The options of `redisStore`, checked once when the store is made and resolved with their defaults.
import { z } from 'zod'
import { InvalidOptionsError } from '../../errors.js'
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

const SLOT_SECRET_ERROR =
  'slotSecret must be a string of at least 16 characters (the same random string in every process sharing the keys), or false'
const RETRY_MS_ERROR = 'scriptRetryMs must be a whole number of ms from 0 to 60000'

const optionsSchema = z.strictObject({
  prefix: z
    .string()
    .regex(/^[^{}]{1,64}$/, { error: 'prefix must be 1-64 characters without { or }' })
    .optional(),
  clock: z.enum(['server', 'client'], { error: "clock must be 'server' or 'client'" }).optional(),
  now: z
    .custom<() => number>((v) => typeof v === 'function', { error: 'now must be a function returning ms' })
    .optional(),
  coalesce: z.boolean({ error: 'coalesce must be true or false' }).optional(),
  coalesceWrites: z.boolean({ error: 'coalesceWrites must be true or false' }).optional(),
  slotSecret: z
    .union([z.string().min(16, { error: SLOT_SECRET_ERROR }), z.literal(false)], { error: SLOT_SECRET_ERROR })
    .optional(),
  scriptRetryMs: z
    .number({ error: RETRY_MS_ERROR })
    .int({ error: RETRY_MS_ERROR })
    .min(0, { error: RETRY_MS_ERROR })
    .max(60_000, { error: RETRY_MS_ERROR })
    .optional(),
})

/** Validate the options of `redisStore` (throws `InvalidOptionsError`) and apply the defaults. */
export function redisStoreSettings(options: RedisStoreOptions): RedisStoreSettings {
  if (!isOptionsObject(options)) throw new InvalidOptionsError('redisStore: options must be an object')
  checkKnownKeys('redisStore', options, OPTION_KEYS)
  const parsed = optionsSchema.safeParse(options)
  if (!parsed.success) {
    throw new InvalidOptionsError(`redisStore: ${parsed.error.issues[0]!.message}`)
  }
  const o = parsed.data
  if (o.clock === 'server' && o.now !== undefined) {
    throw new InvalidOptionsError("redisStore: now is only used with clock: 'client'; remove one of them")
  }
  return {
    prefix: o.prefix ?? 'sluice',
    clientClock: o.clock === 'client' || o.now !== undefined,
    now: o.now ?? Date.now,
    coalesce: o.coalesce ?? true,
    coalesceWrites: o.coalesceWrites ?? true,
    slotSecret: o.slotSecret,
    scriptRetryMs: o.scriptRetryMs ?? SCRIPT_RETRY_MS,
  }
}
