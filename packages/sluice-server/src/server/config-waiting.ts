// The config's `waiting:` section: how long /v1/wait may hold a request and how many reservations
// may be open at once. Schema for config.ts's top-level schema, and its resolution with defaults.

import { parseDuration, SluiceError } from 'sluice'
import { z } from 'zod'
import type { Locator } from './config-errors.js'

export interface WaitingSettings {
  /** The longest /v1/wait holds a request; a larger `maxWaitMs` is lowered to it. Default 10 s. */
  readonly maxWaitMs: number
  /** Reservations open at once (not yet settled or expired); more answer 503. Default 10,000. */
  readonly maxReservations: number
  /** Requests held by /v1/wait at once on one (policy, key); more answer 503. Default 1,000. */
  readonly maxWaitersPerKey: number
  /** Requests held by /v1/wait at once, all keys. Default 10,000. */
  readonly maxWaiters: number
}

const WAITING_DEFAULTS: WaitingSettings = {
  maxWaitMs: 10_000,
  maxReservations: 10_000,
  maxWaitersPerKey: 1_000,
  maxWaiters: 10_000,
}

const count = (what: string) =>
  z
    .number()
    .int()
    .min(1, { error: `must be a whole number of ${what}, at least 1` })
    .optional()

export const waitingSchema = z
  .strictObject({
    maxWait: z.union([z.string(), z.number()], { error: 'must be a duration like 10s or 500ms' }).optional(),
    maxReservations: count('reservations'),
    maxWaitersPerKey: count('waiters'),
    maxWaiters: count('waiters'),
  })
  .optional()

/** `waiting:` with its defaults; a bad duration is an InvalidConfigError naming file:line. */
export function resolveWaiting(loc: Locator, input: z.infer<typeof waitingSchema>): WaitingSettings {
  let maxWaitMs = WAITING_DEFAULTS.maxWaitMs
  if (input?.maxWait !== undefined) {
    try {
      maxWaitMs = parseDuration(input.maxWait, 'waiting.maxWait')
    } catch (error) {
      const message = error instanceof SluiceError ? error.message : String(error)
      throw loc.error(['waiting', 'maxWait'], message, error)
    }
  }
  return {
    maxWaitMs,
    maxReservations: input?.maxReservations ?? WAITING_DEFAULTS.maxReservations,
    maxWaitersPerKey: input?.maxWaitersPerKey ?? WAITING_DEFAULTS.maxWaitersPerKey,
    maxWaiters: input?.maxWaiters ?? WAITING_DEFAULTS.maxWaiters,
  }
}
