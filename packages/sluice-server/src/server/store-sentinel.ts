// The service's ioredis client for a master found through Redis Sentinel (`redis+sentinel://`):
// the options that make it fail fast like the other Redis clients and follow a failover, and the
// words for why it could not start.
import type { RedisOptions } from 'ioredis'
import { connectFailure, errorText } from './store-tls.js'
import type { SentinelSpec } from './store-url.js'

/** What `sentinelClient` needs of an ioredis Redis: its sentinel errors (one per sentinel asked). */
interface SentinelEvents {
  on(event: 'sentinelError', listener: (error: Error) => void): unknown
  on(event: 'ready', listener: () => void): unknown
}

export interface SentinelClient {
  /** Options for `new Redis(...)`: the sentinels, the master's name, TLS, failover handling. */
  readonly options: RedisOptions
  /** Listen to the client's sentinel errors (call once, on the client made with `options`). */
  watch(client: SentinelEvents): void
  /** The client served: from now on, sentinels that do not answer are asked again, not given up. */
  serving(): void
  /**
   * Why the first connection failed, in the user's words, when the sentinels are the reason (none
   * answered, none knows the master's name, a password refused); undefined when they named a master.
   */
  cause(error: unknown): Promise<string | undefined>
}

/**
 * The options of a client that asks the URL's sentinels for the master, connects to it, and, when
 * the master it holds is lost or answers `READONLY` (a demoted master), asks them again.
 * `base` is what every service Redis client shares (timeouts, no offline queue, reconnect delays)
 * and the master's credentials. `demoted` is told once per demotion, with the READONLY reply.
 */
export function sentinelClient(
  spec: SentinelSpec,
  base: RedisOptions,
  timing: { sentinelCommandTimeoutMs: number; reconnectMaxDelayMs: number },
  demoted: (error: Error) => void,
): SentinelClient {
  let served = false
  let lastSentinelError: Error | undefined
  // Every write in flight on the demoted master answers READONLY: one report until the client is ready again.
  let reported = false
  const tls = spec.tls ? { tls: {}, enableTLSForSentinelMode: true, sentinelTLS: {} } : {}
  const options: RedisOptions = {
    ...base,
    ...tls,
    enableOfflineQueue: false,
    sentinels: spec.sentinels.map(({ host, port }) => ({ host, port })),
    name: spec.masterName,
    db: spec.db,
    ...(spec.sentinelPassword === undefined ? {} : { sentinelPassword: spec.sentinelPassword }),
    sentinelCommandTimeout: timing.sentinelCommandTimeoutMs,
    // Before the first connection, sentinels that all fail stop the start with their error (ioredis
    // would otherwise retry for ever and the service would never say why it does not listen); once
    // serving, a failover can leave every sentinel busy or unreachable for a moment: ask again.
    sentinelRetryStrategy: (attempts: number) =>
      served ? Math.min(attempts * 50, timing.reconnectMaxDelayMs) : null,
    // A master demoted to a replica while this client holds a connection to it (a failover that did
    // not close its clients, an operator's REPLICAOF) refuses every write with READONLY: reconnect,
    // which asks the sentinels for the master again. The refused command is not sent again (nothing
    // queues while disconnected): its decision follows the policy's onStoreError, like any failed call.
    reconnectOnError: (error: Error) => {
      if (errorCode(error) !== 'READONLY') return false
      if (!reported) demoted(error)
      reported = true
      return true
    },
  }
  return {
    options,
    watch(client) {
      client.on('sentinelError', (error) => {
        lastSentinelError = error
      })
      client.on('ready', () => {
        reported = false
      })
    },
    serving() {
      served = true
    },
    async cause(error) {
      const message = error instanceof Error ? error.message : String(error)
      if (!/all sentinels are unreachable/i.test(message)) return undefined
      const asked = spec.sentinels.map(({ host, port }) => `${host}:${port}`).join(', ')
      // The last sentinel's own answer (ERR No such master with that name, NOAUTH, ...); when it
      // never answered, ioredis only says "Connection is closed.": connect again to learn why.
      let why = (lastSentinelError?.message ?? message).replace(
        /^(failed to connect to sentinel \S+ because |All sentinels are unreachable.*Last error: )/s,
        '',
      )
      if (/connection is closed/i.test(why)) {
        const failures = await Promise.all(
          spec.sentinels.map(({ host, port }) =>
            connectFailure(host, port, spec.tls ? {} : undefined, PROBE_TIMEOUT_MS),
          ),
        )
        const found = failures.filter((f) => f !== undefined).map(errorText)
        if (found.length > 0) why = [...new Set(found)].join('; ')
      }
      return `no sentinel (${asked}) named master ${JSON.stringify(spec.masterName)}: ${why}`
    },
  }
}

const PROBE_TIMEOUT_MS = 1000

/** A Redis error reply's code: its first word (`READONLY You can't write against a read only replica.`). */
function errorCode(error: Error): string {
  return /^[A-Z]+/.exec(error.message)?.[0] ?? ''
}
