// The config's `telemetry:` section: OpenTelemetry export over OTLP/HTTP (metrics, and a span per
// decision when `traces: true`). Schema for config.ts's top-level schema, its resolution with
// defaults, and its one-line summary for `sluice check` with the headers' values redacted.

import { parseDuration, SluiceError } from 'sluice'
import { z } from 'zod'
import type { Locator } from './config-errors.js'

/** The config's `telemetry:` block with its defaults (docs/service.md, OpenTelemetry). */
export interface TelemetrySettings {
  /** The OTLP/HTTP collector's base URL (`http://collector:4318`); `/v1/metrics` and `/v1/traces` are added. */
  readonly endpoint: string
  /** Headers sent with every export (an API key, a tenant). Secrets: print only `redactTelemetry`. */
  readonly headers: Readonly<Record<string, string>>
  /** How often metrics are exported, in ms. Default 60 s. */
  readonly intervalMs: number
  /** Export a span per decision. Default false. */
  readonly traces: boolean
}

const DEFAULT_INTERVAL_MS = 60_000

export const telemetrySchema = z
  .strictObject({
    otlp: z.strictObject({
      endpoint: z.string({ error: 'must be the OTLP/HTTP URL of a collector, like http://127.0.0.1:4318' }),
      headers: z
        .record(
          z.string().regex(/^[A-Za-z0-9-]{1,64}$/, { error: 'must be an HTTP header name' }),
          z.string(),
          {
            error: 'must be a map of header name to text, like { authorization: Bearer ... }',
          },
        )
        .optional(),
      interval: z.union([z.string(), z.number()], { error: 'must be a duration like 10s or 1m' }).optional(),
    }),
    traces: z.boolean({ error: 'must be true or false' }).optional(),
  })
  .optional()

/** The endpoint without a password; headers by name only. */
export function redactTelemetry(settings: TelemetrySettings): { endpoint: string; headers: string[] } {
  const url = new URL(settings.endpoint)
  if (url.password !== '') url.password = '***'
  return { endpoint: url.toString().replace(/\/$/, ''), headers: Object.keys(settings.headers) }
}

/** `telemetry:` with its defaults, or undefined when absent; problems name file:line. */
export function resolveTelemetry(
  loc: Locator,
  input: z.infer<typeof telemetrySchema>,
): TelemetrySettings | undefined {
  if (input === undefined) return undefined
  const { otlp } = input
  let url: URL | undefined
  try {
    url = new URL(otlp.endpoint)
  } catch {
    url = undefined
  }
  if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:'))
    throw loc.error(
      ['telemetry', 'otlp', 'endpoint'],
      'telemetry.otlp.endpoint: must be an http:// or https:// URL of an OTLP/HTTP collector, like http://127.0.0.1:4318',
    )
  if (url.search !== '' || url.hash !== '')
    throw loc.error(
      ['telemetry', 'otlp', 'endpoint'],
      'telemetry.otlp.endpoint: give the base URL without ?query or #fragment; /v1/metrics and /v1/traces are added',
    )
  let intervalMs = DEFAULT_INTERVAL_MS
  if (otlp.interval !== undefined) {
    try {
      intervalMs = parseDuration(otlp.interval, 'telemetry.otlp.interval')
    } catch (error) {
      const message = error instanceof SluiceError ? error.message : String(error)
      throw loc.error(['telemetry', 'otlp', 'interval'], message, error)
    }
    if (intervalMs < 1000)
      throw loc.error(
        ['telemetry', 'otlp', 'interval'],
        'telemetry.otlp.interval: must be at least 1s (each export is an HTTP request to the collector)',
      )
  }
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(otlp.headers ?? {})) headers[name.toLowerCase()] = value
  return {
    endpoint: url.toString().replace(/\/+$/, ''),
    headers,
    intervalMs,
    traces: input.traces ?? false,
  }
}

/** The lines for `sluice check` (none when off): where telemetry goes, never a header's value. */
export function describeTelemetry(settings: TelemetrySettings | undefined): string[] {
  if (settings === undefined) return []
  const { endpoint, headers } = redactTelemetry(settings)
  const sent =
    headers.length === 0 ? 'no headers' : `headers ${headers.map((h) => `${h}: <redacted>`).join(', ')}`
  return [
    `  telemetry: OTLP/HTTP to ${endpoint} (${sent}); metrics every ${settings.intervalMs}ms; traces ${settings.traces ? 'on' : 'off'}`,
  ]
}
