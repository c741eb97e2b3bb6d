// The options of `postgresStore`, checked once when the store is made and resolved with their defaults.
import { z } from 'zod'
import { InvalidOptionsError } from '../../errors.js'
import { checkKnownKeys, isOptionsObject, keysOf } from '../../options.js'
import type { PostgresStoreOptions } from './index.js'
import { TABLE_NAME } from './schema.js'

/** What `postgresStore` runs with. */
export interface PostgresStoreSettings {
  table: string
  /** Whether this process's `now()` decides (`clock: 'client'`, or a `now` given). */
  clientClock: boolean
  now: () => number
  migrate: boolean
  cleanupIntervalMs: number
  cleanupBatch: number
  preparedStatements: boolean
}

const OPTION_KEYS = keysOf<PostgresStoreOptions>({
  table: true,
  clock: true,
  now: true,
  migrate: true,
  cleanupIntervalMs: true,
  cleanupBatch: true,
  preparedStatements: true,
})

const optionsSchema = z.strictObject({
  table: z
    .string()
    .regex(TABLE_NAME, {
      error: 'table must be [schema.]name in lower case letters, digits and _ (at most 41 characters)',
    })
    .optional(),
  clock: z.enum(['server', 'client'], { error: "clock must be 'server' or 'client'" }).optional(),
  now: z
    .custom<() => number>((v) => typeof v === 'function', { error: 'now must be a function returning ms' })
    .optional(),
  migrate: z.boolean({ error: 'migrate must be true or false' }).optional(),
  preparedStatements: z.boolean({ error: 'preparedStatements must be true or false' }).optional(),
  cleanupIntervalMs: z
    .number({ error: 'cleanupIntervalMs must be a whole number of ms from 0 (off) to 2^31 - 1' })
    .int({ error: 'cleanupIntervalMs must be a whole number of ms from 0 (off) to 2^31 - 1' })
    .min(0, { error: 'cleanupIntervalMs must be a whole number of ms from 0 (off) to 2^31 - 1' })
    .max(2 ** 31 - 1, { error: 'cleanupIntervalMs must be a whole number of ms from 0 (off) to 2^31 - 1' })
    .optional(),
  cleanupBatch: z
    .number({ error: 'cleanupBatch must be a whole number from 1 to 100,000' })
    .int({ error: 'cleanupBatch must be a whole number from 1 to 100,000' })
    .min(1, { error: 'cleanupBatch must be a whole number from 1 to 100,000' })
    .max(100_000, { error: 'cleanupBatch must be a whole number from 1 to 100,000' })
    .optional(),
})

/** Validate the options of `postgresStore` (throws `InvalidOptionsError`) and apply the defaults. */
export function postgresStoreSettings(options: PostgresStoreOptions): PostgresStoreSettings {
  if (!isOptionsObject(options)) throw new InvalidOptionsError('postgresStore: options must be an object')
  checkKnownKeys('postgresStore', options, OPTION_KEYS)
  const parsed = optionsSchema.safeParse(options)
  if (!parsed.success) throw new InvalidOptionsError(`postgresStore: ${parsed.error.issues[0]!.message}`)
  const o = parsed.data
  if (o.clock === 'server' && o.now !== undefined) {
    throw new InvalidOptionsError("postgresStore: now is only used with clock: 'client'; remove one of them")
  }
  return {
    table: o.table ?? 'sluice_limits',
    clientClock: o.clock === 'client' || o.now !== undefined,
    now: o.now ?? Date.now,
    migrate: o.migrate ?? true,
    cleanupIntervalMs: o.cleanupIntervalMs ?? 60_000,
    cleanupBatch: o.cleanupBatch ?? 1000,
    preparedStatements: o.preparedStatements ?? true,
  }
}
