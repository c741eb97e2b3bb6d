// The Redis side of hybrid mode (see hybrid.ts): counts are added to, and totals read from, Redis
// with one small script per counter. Exported from sluice/redis, so the core entry carries no client code.
import { InvalidOptionsError } from '../errors.js'
import { checkKnownKeys, isOptionsObject, keysOf } from '../options.js'
import {
  adaptClient,
  type ClientAdapter,
  clientProblem,
  NOT_A_CLIENT,
  type RedisClient,
  replyErrorCode,
} from '../stores/redis/client.js'
import { subjectTag } from '../stores/redis/keys.js'
import type { HybridBackend, HybridCounter } from './hybrid.js'
import { HYBRID_ADD_SHA, HYBRID_ADD_SOURCE } from './hybrid-script.js'

export interface HybridRedisOptions {
  /** Same namespace as the Redis store (`sluice` by default): keys are `prefix:{subject}:policy:h:window`. */
  prefix?: string
}

/**
 * The Redis side of hybrid mode: one small script (INCRBY + PEXPIRE, see hybrid-script.ts) per
 * counter, all sent at once; keys follow the store's `prefix:{subject}:policy` naming so Cluster works.
 * @example
 * createLimiter({ store: redisStore(redis), hybrid: hybridRedis(redis),
 *   policies: { api: { algorithm: 'fixed-window', limit: 1000, window: '1s', mode: 'hybrid', syncEvery: '100ms' } } })
 */
export function hybridRedis(client: RedisClient, options: HybridRedisOptions = {}): HybridBackend {
  const problem = clientProblem(client)
  const adapter: ClientAdapter | undefined = problem === undefined ? adaptClient(client) : undefined
  if (adapter === undefined) throw new InvalidOptionsError(`hybridRedis: ${problem ?? NOT_A_CLIENT}`)
  if (!isOptionsObject(options)) throw new InvalidOptionsError('hybridRedis: options must be an object')
  checkKnownKeys('hybridRedis', options, keysOf<HybridRedisOptions>({ prefix: true }))
  const prefix = options.prefix ?? 'sluice'
  if (!/^[^{}]{1,64}$/.test(prefix))
    throw new InvalidOptionsError('hybridRedis: prefix must be 1-64 characters without { or }')
  let loading: Promise<void> | undefined
  async function addOne(c: HybridCounter): Promise<number> {
    const args = [String(c.count), String(c.ttlMs)]
    try {
      return Number(await adapter!.evalsha(HYBRID_ADD_SHA, [c.key], args))
    } catch (error) {
      if (replyErrorCode(error) !== 'NOSCRIPT') throw error
      loading ??= adapter!.loadScript(HYBRID_ADD_SOURCE).finally(() => {
        loading = undefined
      })
      await loading
      return Number(await adapter!.evalsha(HYBRID_ADD_SHA, [c.key], args))
    }
  }
  return {
    add: (counters) => Promise.all(counters.map(addOne)),
    remove: (keys) => adapter.del([...keys]),
    keyOf: (policy, subject, window) => `${prefix}:{${subjectTag(subject)}}:${policy}:h:${window}`,
  }
}
