// The config's `outcomes:` section: which policies count a /v1/authz request by its response's
// status (`countIf`), and the bounds on the tickets that carry a charge until that status arrives
// (outcomes.ts). Schema for config.ts's top-level schema, and its resolution with defaults.
import { parseDuration, SluiceError } from 'sluice'
import { z } from 'zod'
import type { Locator } from './config-errors.js'

export interface OutcomesSettings {
  /**
   * By configured policy name (every tier of it): whether a response of this status counts. A
   * /v1/authz answer of such a policy carries a ticket; POST /v1/outcome with a status that does
   * not count gives its units back.
   */
  readonly countIf: ReadonlyMap<string, (status: number) => boolean>
  /** Tickets held at once; past it the oldest is dropped (its units stay spent). Default 10,000. */
  readonly maxTickets: number
  /** How long a ticket waits for its status; then it is dropped (its units stay spent). Default 60 s. */
  readonly ticketTtlMs: number
}

const DEFAULTS = { maxTickets: 10_000, ticketTtlMs: 60_000 } as const

const STATUS_ERROR = "must be a status from 100 to 599 or a class like '5xx'"
const statusSpec = z.union([z.number().int().min(100).max(599), z.string().regex(/^[1-5]xx$/)], {
  error: STATUS_ERROR,
})

export const outcomesSchema = z
  .strictObject({
    countIf: z
      .record(
        z.string(),
        z.strictObject({
          status: z
            .array(statusSpec, { error: "must be a list like [401, 403, '5xx']" })
            .min(1, { error: "must list at least one status, like [401, 403, '5xx']" }),
        }),
        { error: "must be a map of policy name to { status: [401, 403, '5xx'] }" },
      )
      .optional(),
    maxTickets: z
      .number()
      .int()
      .min(1, { error: 'must be a whole number of tickets, at least 1' })
      .optional(),
    ticketTtl: z.union([z.string(), z.number()], { error: 'must be a duration like 30s or 2m' }).optional(),
  })
  .optional()

/** A status test from the written list: exact statuses in a set, classes by their hundreds. */
function statusTest(written: readonly (number | string)[]): (status: number) => boolean {
  const exact = new Set<number>()
  const classes = new Set<number>()
  for (const s of written) {
    if (typeof s === 'number') exact.add(s)
    else classes.add(Number(s[0]))
  }
  return (status) => exact.has(status) || classes.has(Math.floor(status / 100))
}

/** `outcomes:` with its defaults; a policy it names must be configured (InvalidConfigError, file:line). */
export function resolveOutcomes(
  loc: Locator,
  input: z.infer<typeof outcomesSchema>,
  policyNames: readonly string[],
): OutcomesSettings {
  const countIf = new Map<string, (status: number) => boolean>()
  for (const [name, rule] of Object.entries(input?.countIf ?? {})) {
    if (!policyNames.includes(name))
      throw loc.error(
        ['outcomes', 'countIf', name],
        `outcomes.countIf.${name}: no policy named ${name}; configured: ${policyNames.join(', ')}`,
      )
    countIf.set(name, statusTest(rule.status))
  }
  let ticketTtlMs: number = DEFAULTS.ticketTtlMs
  if (input?.ticketTtl !== undefined) {
    try {
      ticketTtlMs = parseDuration(input.ticketTtl, 'outcomes.ticketTtl')
    } catch (error) {
      const message = error instanceof SluiceError ? error.message : String(error)
      throw loc.error(['outcomes', 'ticketTtl'], message, error)
    }
  }
  return { countIf, maxTickets: input?.maxTickets ?? DEFAULTS.maxTickets, ticketTtlMs }
}
