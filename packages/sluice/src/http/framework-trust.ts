// Who decides the client address behind a proxy: the framework (Express `trust proxy`, Fastify
// `trustProxy`) or Sluice's own `trustProxy`. Exactly one of them; both set is refused, loudly.
import { InvalidOptionsError } from '../errors.js'
import type { HttpLimiter } from './core.js'
import { defaultLogger } from './options.js'
import type { HttpLimiterOptions } from './types.js'

/** How an adapter names its framework's setting in the conflict message. */
export interface FrameworkTrust {
  /** The setting as the user wrote it: `Express app.set('trust proxy', ...)`. */
  setting: string
  /** Where the framework's answer lives: `req.ip`. */
  address: string
  /** How to turn the framework's setting off: `app.set('trust proxy', false)`. */
  off: string
}

/**
 * Whether a framework's trust-proxy value trusts any proxy. The values that trust none, in Express
 * and Fastify alike (both compile them with proxy-addr): unset, `false`, `0`, `''`, `[]`, `null`.
 */
export function frameworkTrustsProxies(value: unknown): boolean {
  if (value === undefined || value === null || value === false || value === 0 || value === '') return false
  return !Array.isArray(value) || value.length > 0
}

/**
 * The error for a framework that trusts proxies while Sluice's `trustProxy` is set too (even to
 * `false`): two settings would decide who the client is, and they need not agree. Undefined when
 * Sluice's option is unset, so the framework's address is used.
 */
export function proxyTrustConflict(
  options: Pick<HttpLimiterOptions, 'trustProxy'>,
  framework: FrameworkTrust,
): InvalidOptionsError | undefined {
  if (options.trustProxy === undefined) return undefined
  return new InvalidOptionsError(
    `trustProxy: both ${framework.setting} and Sluice's trustProxy (${JSON.stringify(options.trustProxy)}) are set, ` +
      `so two settings would decide who the client is. Remove trustProxy from Sluice's options to key on ` +
      `${framework.address} (the address the framework resolved), or turn the framework's off ` +
      `(${framework.off}) to let Sluice read the forwarding header itself.`,
  )
}

/** HTTP cores whose conflict was logged: once each, however many requests it refuses. */
const reported = new WeakSet<HttpLimiter>()

/**
 * Log a trust conflict once per HTTP core (through its `logger`), so it is seen even when the app's
 * error handler or the framework's logger stays quiet. Returns the error, for `next(error)`.
 */
export function reportConflict(http: HttpLimiter, error: InvalidOptionsError): InvalidOptionsError {
  if (!reported.has(http)) {
    reported.add(http)
    ;(http.options.logger ?? defaultLogger).error(
      { err: error },
      'sluice: refusing every request until one of the two trust-proxy settings is removed',
    )
  }
  return error
}
