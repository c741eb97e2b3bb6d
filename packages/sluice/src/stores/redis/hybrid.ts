// The Redis side of hybrid mode (src/scale/hybrid.ts): every lease, its return and every plain
// decision is one call of scripts/hybrid/lease.lua on the key's shared state, run through the
// store's script registry. Exported from sluice/redis, so the core entry carries no client code.
import { InvalidOptionsError } from '../../errors.js'
import { checkKnownKeys, isOptionsObject, keysOf } from '../../options.js'
import type { HybridBackend, LeaseCall, LeaseReply } from '../../scale/hybrid.js'
import { adaptClient, type ClientAdapter, clientProblem, NOT_A_CLIENT, type RedisClient } from './client.js'
import { subjectTag } from './keys.js'
import { script, scriptRunner } from './script.js'

const LEASE = script('hybrid/lease')
const raw = (error: unknown): unknown => error

/** The script's reply, nine integers, as a LeaseReply. */
function toReply(reply: unknown): LeaseReply {
  const r = reply as number[]
  return {
    allowed: r[0] === 1,
    grant: Number(r[1]),
    remaining: Number(r[2]),
    retryAfterMs: Number(r[3]),
    resetMs: Number(r[4]),
    tag: Number(r[5]),
    underAdmitted: Number(r[6]),
    denials: Number(r[7]),
    endsAtMs: Number(r[8]),
  }
}

export interface HybridRedisOptions {
  /** Same namespace as the Redis store (`sluice` by default): keys are `prefix:{subject}:policy:l`. */
  prefix?: string
}

/**
 * The Redis side of hybrid mode: one script call (scripts/hybrid/lease.lua) per lease, return or
 * plain decision; keys follow the store's `prefix:{subject}:policy` naming so Cluster works.
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
  // Failures reach hybrid.ts as the client reported them: it follows the policy's onStoreError.
  const runner = scriptRunner(adapter, raw)
  const args = (c: LeaseCall): string[] => [
    c.kind,
    String(c.nowMs),
    String(c.limit),
    String(c.windowMs),
    String(c.capacity),
    String(c.cost),
    c.peek ? '1' : '0',
    String(c.want),
    String(c.leaseMs),
    String(c.returned),
    String(c.returnTag),
    String(c.deniedBefore),
    String(c.divisor),
    String(c.leastGrant),
  ]
  return {
    lease: (c) => runner.run(LEASE, [c.key], args(c), true, toReply),
    remove: (keys) => adapter.del([...keys]),
    keyOf: (policy, subject) => `${prefix}:{${subjectTag(subject)}}:${policy}:l`,
    stats: new Map(),
  }
}
