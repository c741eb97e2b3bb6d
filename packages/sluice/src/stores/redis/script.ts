// The script registry of the Redis store and of hybrid mode: each script's SHA-1 computed once from
// its generated source (lua.generated.ts), EVALSHA first, and on a reply whose error code is NOSCRIPT
// (after a restart, SCRIPT FLUSH or failover) a shared SCRIPT LOAD and a retry, again and again while
// the retry budget lasts.
import { createHash } from 'node:crypto'
import { type ClientAdapter, replyErrorCode } from './client.js'
import { luaSources } from './lua.generated.js'

/** The name of a generated script: `apply/<algorithm>`, `layered`, `refund`, `block`, `hybrid/lease` */
export type ScriptName = keyof typeof luaSources

export interface Script {
  /** Its name in lua.generated.ts, for error messages. */
  readonly name: ScriptName
  readonly source: string
  readonly sha: string
}

const scripts = new Map<ScriptName, Script>()

/** The script called `name`, with its SHA-1 (computed once per process). */
export function script(name: ScriptName): Script {
  let s = scripts.get(name)
  if (s === undefined) {
    const source = luaSources[name]
    s = { name, source, sha: createHash('sha1').update(source).digest('hex') }
    scripts.set(name, s)
  }
  return s
}

export interface ScriptRunner {
  /**
   * EVALSHA, then `read` of the reply; on NOSCRIPT load the script and retry (scriptRunner says how
   * long). `shareWrite`: the call may share a socket write with the tick's other calls (see
   * ClientAdapter.evalsha). `call` as a promise (refund, block, charge, hybrid; the decisions
   * themselves use `call`).
   */
  run<R>(
    s: Script,
    keys: string[],
    args: string[],
    shareWrite: boolean,
    read: (reply: unknown) => R,
  ): Promise<R>
  /**
   * The same call, its reply handed to `onReply` (and whatever `onReply` throws, or the call's
   * failure, to `onError`) with one continuation of the client's promise and no promise of its own:
   * every decision's path.
   */
  call(
    s: Script,
    keys: string[],
    args: string[],
    shareWrite: boolean,
    onReply: (reply: unknown) => void,
    onError: (error: unknown) => void,
  ): void
}

export interface RetryOptions {
  /**
   * How long (ms, from a call's first NOSCRIPT) it keeps loading the script and retrying while
   * Redis keeps answering NOSCRIPT. The first retry is always made.
   */
  retryMs: number
  /** Called on every NOSCRIPT reply: the script cache was lost (restart, failover, SCRIPT FLUSH). */
  onNoScript?: () => void
  /** Monotonic clock in ms for the budget (`performance.now`). */
  now?: () => number
}

/** Default retry budget: the limiter's default store timeout, after which nobody waits for the answer. */
export const SCRIPT_RETRY_MS = 100
/**
 * Most retries of one call whatever the budget: each costs a SCRIPT LOAD and an EVALSHA, so a setup
 * that answers NOSCRIPT to every EVALSHA (a proxy that sends the load and the call to different
 * servers) costs at most this many round trips per call instead of as many as fit the budget.
 */
export const MAX_SCRIPT_RETRIES = 32

/**
 * Runs scripts on one client. `wrap` turns a failure (a reply error, a closed connection) into what
 * the caller throws; concurrent calls that all meet NOSCRIPT share one SCRIPT LOAD. A call retries
 * after NOSCRIPT while it is within `retryMs` of its first NOSCRIPT and under MAX_SCRIPT_RETRIES:
 * two script-cache losses in one round trip (a SCRIPT FLUSH that lands between the load and the
 * retry) are not a store failure, and a decision that would fail open must not fail on them.
 */
export function scriptRunner(
  adapter: ClientAdapter,
  wrap: (error: unknown) => unknown,
  options: RetryOptions = { retryMs: SCRIPT_RETRY_MS },
): ScriptRunner {
  const loading = new Map<string, Promise<void>>()
  const now = options.now ?? (() => performance.now())
  const lost = options.onNoScript ?? (() => {})

  function load(s: Script): Promise<void> {
    let pending = loading.get(s.sha)
    if (pending === undefined) {
      pending = adapter.loadScript(s.source).finally(() => loading.delete(s.sha))
      loading.set(s.sha, pending)
    }
    return pending
  }

  async function retry(s: Script, keys: string[], args: string[], error: unknown): Promise<unknown> {
    if (replyErrorCode(error) !== 'NOSCRIPT') throw wrap(error)
    lost()
    const deadline = now() + options.retryMs
    for (let retries = 1; ; retries++) {
      try {
        await load(s)
        return await adapter.evalsha(s.sha, keys, args)
      } catch (error) {
        if (replyErrorCode(error) !== 'NOSCRIPT') throw wrap(error)
        lost()
        if (retries >= MAX_SCRIPT_RETRIES || now() >= deadline) throw wrap(error)
      }
    }
  }

  function evalsha(s: Script, keys: string[], args: string[], shareWrite: boolean): Promise<unknown> {
    try {
      return adapter.evalsha(s.sha, keys, args, shareWrite)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  const runner: ScriptRunner = {
    run(s, keys, args, shareWrite, read) {
      return new Promise((resolve, reject) =>
        runner.call(s, keys, args, shareWrite, (reply) => resolve(read(reply)), reject),
      )
    },
    call(s, keys, args, shareWrite, onReply, onError) {
      const deliver = (reply: unknown): void => {
        try {
          onReply(reply)
        } catch (error) {
          onError(error)
        }
      }
      evalsha(s, keys, args, shareWrite).then(deliver, (error: unknown) => {
        retry(s, keys, args, error).then(deliver, onError)
      })
    },
  }
  return runner
}
