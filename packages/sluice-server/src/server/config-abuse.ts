// The config's `abuse:` section: the window and thresholds of the abuse patterns (many identities
// behind one address, one identity over many addresses) and which policies' keys are addresses or
// identities. Schema for config.ts's top-level schema, and its resolution with defaults.

import { parseDuration, SluiceError } from 'sluice'
import { closest } from 'sluice/internal'
import type { AbuseKeyKind, AbuseOptions } from 'sluice/metrics'
import { z } from 'zod'
import type { Locator } from './config-errors.js'

export interface AbuseSettings {
  /** The sliding window of the distinct counts, ms. Default 5 minutes. */
  readonly windowMs: number
  readonly identitiesPerAddress: number
  readonly addressesPerIdentity: number
  /** Keys tracked per pattern per bucket. Default 1024. */
  readonly capacity: number
  /** Configured policy name -> the kind of its keys (layers of other policies: by key prefix). */
  readonly policies: ReadonlyMap<string, AbuseKeyKind>
}

const count = (what: string) =>
  z
    .number()
    .int()
    .min(1, { error: `must be a whole number of ${what}, at least 1` })
    .optional()

export const abuseSchema = z
  .strictObject({
    window: z.union([z.string(), z.number()], { error: 'must be a duration like 5m' }).optional(),
    identitiesPerAddress: count('identities'),
    addressesPerIdentity: count('addresses'),
    capacity: count('keys'),
    policies: z
      .record(z.string(), z.enum(['address', 'identity'], { error: 'must be address or identity' }), {
        error: 'must be a map of policy name to address or identity',
      })
      .optional(),
  })
  .optional()

type AbuseInput = z.infer<typeof abuseSchema>

/** `abuse:` with its defaults; a policy name the config does not define is an error (file:line). */
export function resolveAbuse(loc: Locator, input: AbuseInput, policyNames: readonly string[]): AbuseSettings {
  let windowMs = 300_000
  if (input?.window !== undefined) {
    try {
      windowMs = parseDuration(input.window, 'abuse.window')
    } catch (error) {
      const message = error instanceof SluiceError ? error.message : String(error)
      throw loc.error(['abuse', 'window'], message, error)
    }
    if (windowMs < 1000)
      throw loc.error(
        ['abuse', 'window'],
        `abuse.window: ${windowMs}ms is too short; use at least 1s, e.g. 5m`,
      )
  }
  const policies = new Map<string, AbuseKeyKind>()
  for (const [name, kind] of Object.entries(input?.policies ?? {})) {
    if (!policyNames.includes(name)) {
      const near = closest(name, policyNames)
      throw loc.error(
        ['abuse', 'policies', name],
        `abuse.policies.${name}: no policy named ${name}${near === undefined ? '' : ` (did you mean ${near}?)`}; configured: ${policyNames.join(', ')}`,
      )
    }
    policies.set(name, kind)
  }
  return {
    windowMs,
    identitiesPerAddress: input?.identitiesPerAddress ?? 50,
    addressesPerIdentity: input?.addressesPerIdentity ?? 100,
    capacity: input?.capacity ?? 1024,
    policies,
  }
}

/**
 * The observability options of `abuse:`. Kinds are by the names observability sees: the policy,
 * and `policy.tier` for each tier (tiers share their policy's kind).
 */
export function abuseOptions(settings: AbuseSettings, tierNames: readonly string[]): AbuseOptions {
  const kinds: Record<string, AbuseKeyKind> = {}
  for (const [name, kind] of settings.policies) {
    kinds[name] = kind
    for (const tier of tierNames) kinds[`${name}.${tier}`] = kind
  }
  return {
    windowMs: settings.windowMs,
    identitiesPerAddress: settings.identitiesPerAddress,
    addressesPerIdentity: settings.addressesPerIdentity,
    capacity: settings.capacity,
    kinds,
  }
}
