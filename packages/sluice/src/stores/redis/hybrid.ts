// The Redis side of hybrid mode (src/scale/hybrid.ts): counts are added to, and totals read from,
// Redis with one small script per counter (scripts/hybrid/add.lua, run through the store's script
// registry). Exported from sluice/redis, so the core entry carries no client code.
import { InvalidOptionsError } from '../../errors.js'
import { checkKnownKeys, isOptionsObject, keysOf } from '../../options.js'
import type { HybridBackend, HybridCounter } from '../../scale/hybrid.js'
import { adaptClient, type ClientAdapter, clientProblem, NOT_A_CLIENT, type RedisClient } from './client.js'
import { subjectTag } from './keys.js'
import { script, scriptRunner } from './script.js'

const ADD = script('hybrid/add')
const toCount = (reply: unknown): number => Number(reply)
const raw = (error: unknown): unknown => error

export interface HybridRedisOptions {
  /** Same namespace as the Redis store (`sluice` by default): keys are `prefix:{subject}:policy:h:window`. */
  prefix?: string
}

/**
 * The Redis side of hybrid mode: one small script (INCRBY + PEXPIRE, scripts/hybrid/add.lua) per
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
  // Failures reach hybrid.ts as the client reported them: it counts them and keeps deciding locally.
  const runner = scriptRunner(adapter, raw)
  const addOne = (c: HybridCounter): Promise<number> =>
    runner.run(ADD, [c.key], [String(c.count), String(c.ttlMs)], false, toCount)
  return {
    add: (counters) => Promise.all(counters.map(addOne)),
    remove: (keys) => adapter.del([...keys]),
    keyOf: (policy, subject, window) => `${prefix}:{${subjectTag(subject)}}:${policy}:h:${window}`,
  }
}
