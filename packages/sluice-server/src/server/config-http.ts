// The config's `http:` and `dashboard:` sections: who may call from a browser, how long a client may
// take to send a request, how many connections one service holds, and where the dashboard listens
// and with which token. Schemas for config.ts's top-level schema, and their resolution with defaults.
import { isIP } from 'node:net'
import { parseDuration, SluiceError } from 'sluice'
import { z } from 'zod'
import type { Locator } from './config-errors.js'
import type { ListenerTls } from './listener-tls.js'
import { listenerTlsSchema, resolveListenerTls } from './listener-tls.js'

/** Defaults, well under Node's (60 s for headers, 300 s for a request, no connection cap). */
const HTTP_DEFAULTS = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  maxConnections: 1024,
} as const

export interface HttpSettings {
  /** Browser origins (`https://app.example.com`) that may call; a request with any other Origin is a 403. */
  readonly allowedOrigins: ReadonlySet<string>
  /** Time a client has to send the request headers. Default 10 s. Needs a restart to change. */
  readonly headersTimeoutMs: number
  /** Time a client has to send the whole request, headers and body. Default 30 s. Needs a restart. */
  readonly requestTimeoutMs: number
  /** Connections held at once; more are closed on accept. Default 1024. Needs a restart. */
  readonly maxConnections: number
  /** HTTPS (listener-tls.ts); undefined: plain HTTP. Files re-read on reload; on/off needs a restart. */
  readonly tls: ListenerTls | undefined
}

export interface DashboardSettings {
  /** When set, the dashboard, its events and snapshot need `Authorization: Bearer` or `?token=`. */
  readonly token: string | undefined
  /** With `port`, the dashboard gets a listener of its own (host default 127.0.0.1). Restart to change. */
  readonly host: string | undefined
  readonly port: number | undefined
}

// scheme://host[:port], nothing after: what a browser sends in Origin (RFC 6454), lowercased.
const ORIGIN = /^https?:\/\/(?:[a-z0-9.-]+|\[[0-9a-f:.]+\])(?::\d{1,5})?$/
const duration = z.union([z.string(), z.number()], { error: 'must be a duration like 10s or 500ms' })

export const httpSchema = z
  .strictObject({
    allowedOrigins: z
      .array(
        z
          .string()
          .transform((s) => s.toLowerCase())
          .pipe(
            z.string().regex(ORIGIN, {
              error: 'must be an origin like https://app.example.com (scheme, host, optional port; no path)',
            }),
          ),
        { error: 'must be a list of origins like [https://app.example.com]' },
      )
      .optional(),
    headersTimeout: duration.optional(),
    requestTimeout: duration.optional(),
    maxConnections: z
      .number()
      .int()
      .min(1, { error: 'must be a whole number of connections, at least 1' })
      .optional(),
    tls: listenerTlsSchema,
  })
  .optional()

export const dashboardSchema = z
  .strictObject({
    token: z.string().min(8, { error: 'must be at least 8 characters' }).optional(),
    host: z
      .string()
      .refine((h) => isIP(h) !== 0 || h === 'localhost', { error: 'must be an IP address or localhost' })
      .optional(),
    port: z.number().int().min(0).max(65535, { error: 'must be a port from 0 to 65535' }).optional(),
  })
  .optional()

type HttpInput = z.infer<typeof httpSchema>
type DashboardInput = z.infer<typeof dashboardSchema>

function durationAt(loc: Locator, field: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback
  try {
    return parseDuration(value, `http.${field}`)
  } catch (error) {
    const message = error instanceof SluiceError ? error.message : String(error)
    throw loc.error(['http', field], message, error)
  }
}

/** `http:` with its defaults. Throws InvalidConfigError (file:line) for a headers timeout above the request timeout. */
export function resolveHttp(loc: Locator, input: HttpInput): HttpSettings {
  const headersTimeoutMs = durationAt(
    loc,
    'headersTimeout',
    input?.headersTimeout,
    HTTP_DEFAULTS.headersTimeoutMs,
  )
  const requestTimeoutMs = durationAt(
    loc,
    'requestTimeout',
    input?.requestTimeout,
    Math.max(HTTP_DEFAULTS.requestTimeoutMs, headersTimeoutMs),
  )
  if (headersTimeoutMs > requestTimeoutMs)
    throw loc.error(
      ['http', 'headersTimeout'],
      `http.headersTimeout: ${headersTimeoutMs}ms is above http.requestTimeout (${requestTimeoutMs}ms); the headers are part of the request`,
    )
  return {
    allowedOrigins: new Set(input?.allowedOrigins ?? []),
    headersTimeoutMs,
    requestTimeoutMs,
    maxConnections: input?.maxConnections ?? HTTP_DEFAULTS.maxConnections,
    tls: resolveListenerTls(loc, 'http', input?.tls),
  }
}

/** `dashboard:`; a host without a port is an error (the port is what turns the own listener on). */
export function resolveDashboard(loc: Locator, input: DashboardInput): DashboardSettings {
  if (input?.host !== undefined && input.port === undefined)
    throw loc.error(
      ['dashboard', 'host'],
      'dashboard.host: set dashboard.port too (the dashboard gets its own listener only with a port)',
    )
  return {
    token: input?.token,
    host: input?.port === undefined ? undefined : (input.host ?? '127.0.0.1'),
    port: input?.port,
  }
}
