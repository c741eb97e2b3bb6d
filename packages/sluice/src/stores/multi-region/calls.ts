// How the exchange runs its scripts: EVALSHA first, the source loaded once on NOSCRIPT, every call
// under a timeout, and a script over many keys split into calls that Cluster can route.
import type { ClientAdapter } from '../redis/client.js'
import { replyErrorCode } from '../redis/client.js'

export interface Script {
  readonly source: string
  readonly sha: string
}

/** Most keys one exchange call carries (standalone; a Cluster call carries one key, one slot). */
const MAX_KEYS_PER_CALL = 128

/** One script call, abandoned (rejected) after `timeoutMs`. */
export function runScript(
  adapter: ClientAdapter,
  script: Script,
  keys: string[],
  args: string[],
  timeoutMs: number,
): Promise<unknown> {
  return withTimeout(evalScript(adapter, script, keys, args), timeoutMs)
}

/**
 * Run a script over `keys`: one call per key on Cluster (each key its own slot), calls of up to
 * MAX_KEYS_PER_CALL keys on a standalone server, each under `timeoutMs`. The replies in key order.
 */
export async function runOverKeys(
  adapter: ClientAdapter,
  keys: readonly string[],
  argsOf: (chunk: string[], from: number) => [Script, string[]],
  timeoutMs: number,
): Promise<unknown[]> {
  const size = adapter.cluster ? 1 : MAX_KEYS_PER_CALL
  const chunks: Promise<unknown[]>[] = []
  // With no keys, one call still: an idle region's freshness is a real answer, not an assumption.
  for (let from = 0; from < Math.max(keys.length, 1); from += size) {
    const chunk = keys.slice(from, from + size)
    const [script, args] = argsOf(chunk, from)
    chunks.push(
      runScript(adapter, script, chunk, args, timeoutMs).then((reply) => (Array.isArray(reply) ? reply : [])),
    )
  }
  return (await Promise.all(chunks)).flat()
}

async function evalScript(adapter: ClientAdapter, s: Script, keys: string[], args: string[]) {
  try {
    return await adapter.evalsha(s.sha, keys, args)
  } catch (error) {
    if (replyErrorCode(error) !== 'NOSCRIPT') throw error
    await adapter.loadScript(s.source)
    return adapter.evalsha(s.sha, keys, args)
  }
}

function withTimeout<T>(promise: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer in ${timeoutMs}ms`)), timeoutMs)
  })
  // A late answer or failure of the abandoned call is not an unhandled rejection.
  promise.catch(() => {})
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

export function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
