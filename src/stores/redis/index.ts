// The Redis store: every algorithm runs as its Lua twin inside Redis, one atomic script call per
// decision (per hash slot in Cluster). Works with ioredis and node-redis v5, standalone or Cluster.
import { createHash } from 'node:crypto'
import { z } from 'zod'
import { InvalidOptionsError, StoreClosedError, StoreError } from '../../errors.js'
import type { AlgorithmName } from '../../policy.js'
import type { Step, StepResult, Store } from '../../store.js'
import { adaptClient, type ClientAdapter, type RedisClient, replyErrorCode } from './client.js'
import { stepKeys } from './keys.js'
import { luaSources } from './lua.generated.js'

export type { NodeRedisClientLike, NodeRedisClusterLike, RedisClient } from './client.js'
export { subjectTag } from './keys.js'

export interface RedisStoreOptions {
  /** Namespace of every key: `prefix:{subject}:policy`. Default `sluice`. No `{` or `}`. */
  prefix?: string
  /**
   * Whose clock decides: `server` (default) reads Redis `TIME` inside the script, so application
   * hosts with skewed clocks agree; `client` uses `now()` of this process (deterministic tests).
   */
  clock?: 'server' | 'client'
  /** The clock in ms for `clock: 'client'` (default `Date.now`). Giving it implies `clock: 'client'`. */
  now?: () => number
}

export interface RedisStore extends Store {
  /** Which client library and topology the store detected. */
  readonly client: { library: 'ioredis' | 'node-redis'; cluster: boolean }
}

/** In client clock mode keys live this much longer than they are meaningful, to absorb host clock skew. */
const CLIENT_CLOCK_SLACK_MS = 1000

const optionsSchema = z.strictObject({
  prefix: z
    .string()
    .regex(/^[^{}]{1,64}$/, { error: 'prefix must be 1-64 characters without { or }' })
    .optional(),
  clock: z.enum(['server', 'client'], { error: "clock must be 'server' or 'client'" }).optional(),
  now: z
    .custom<() => number>((v) => typeof v === 'function', { error: 'now must be a function returning ms' })
    .optional(),
})

interface Script {
  readonly source: string
  readonly sha: string
  loading?: Promise<void> | undefined
}

function script(source: string): Script {
  return { source, sha: createHash('sha1').update(source).digest('hex') }
}

/** Step arguments shared by every script: algorithm, limit, windowMs, capacity, cost, leaseId. */
function stepArgs(step: Step): string[] {
  const p = step.policy
  return [
    p.algorithm,
    String(p.limit),
    String(p.windowMs),
    String(p.capacity),
    String(step.cost),
    step.leaseId ?? '',
  ]
}

interface Group {
  /** The one algorithm of every step in the group, or undefined when they mix. */
  algorithm: AlgorithmName | undefined
  indexes: number[]
  keys: string[]
  args: string[]
}

/**
 * A store backed by Redis or Redis Cluster. The store does not own the client: `close()` stops the
 * store, and the caller closes the client.
 * @example
 * const store = redisStore(new Redis(), { prefix: 'rl' })
 * const limiter = createLimiter({ store, policies: { api: { algorithm: 'gcra', limit: 100, window: '1m' } } })
 */
export function redisStore(client: RedisClient, options: RedisStoreOptions = {}): RedisStore {
  const adapter: ClientAdapter | undefined = adaptClient(client)
  if (adapter === undefined) {
    throw new InvalidOptionsError(
      'redisStore: pass an ioredis Redis or Cluster, or a node-redis v5 client or cluster (createClient/createCluster)',
    )
  }
  const parsed = optionsSchema.safeParse(options)
  if (!parsed.success) {
    throw new InvalidOptionsError(`redisStore: ${parsed.error.issues[0]!.message}`)
  }
  const prefix = parsed.data.prefix ?? 'sluice'
  if (parsed.data.clock === 'server' && parsed.data.now !== undefined) {
    throw new InvalidOptionsError("redisStore: now is only used with clock: 'client'; remove one of them")
  }
  const clientClock = parsed.data.clock === 'client' || parsed.data.now !== undefined
  const now = parsed.data.now ?? Date.now
  const slack = String(clientClock ? CLIENT_CLOCK_SLACK_MS : 0)
  const scripts = new Map<string, Script>(
    Object.entries(luaSources).map(([name, source]) => [name, script(source)]),
  )
  /** The script for a group: the single-algorithm variant when every step shares one algorithm. */
  const pick = (name: 'apply' | 'refund' | 'block', g: Group): Script =>
    scripts.get(g.algorithm === undefined || name === 'block' ? name : `${name}/${g.algorithm}`)!
  let closed = false

  function clock(): string {
    return clientClock ? String(Math.floor(now())) : ''
  }

  function check(): void {
    if (closed) throw new StoreClosedError('redisStore: the store is closed')
  }

  async function load(s: Script): Promise<void> {
    // Concurrent calls that all meet NOSCRIPT share one SCRIPT LOAD.
    s.loading ??= adapter!.loadScript(s.source).finally(() => {
      s.loading = undefined
    })
    await s.loading
  }

  /** EVALSHA; on NOSCRIPT (after a restart, SCRIPT FLUSH or failover) load the script and retry once. */
  async function run(s: Script, keys: string[], args: string[]): Promise<unknown> {
    try {
      return await adapter!.evalsha(s.sha, keys, args)
    } catch (error) {
      if (replyErrorCode(error) !== 'NOSCRIPT') throw wrap(error)
    }
    try {
      await load(s)
      return await adapter!.evalsha(s.sha, keys, args)
    } catch (error) {
      throw wrap(error)
    }
  }

  function wrap(error: unknown): StoreError {
    const detail = error instanceof Error ? error.message : String(error)
    return new StoreError(`redis store: ${detail}`, { cause: error })
  }

  /** Steps grouped so that each group is one script call: by hash tag in Cluster, all at once otherwise. */
  function group(steps: readonly Step[]): Group[] {
    const groups = new Map<string, Group>()
    steps.forEach((step, index) => {
      const keys = stepKeys(prefix, step)
      const id = adapter!.cluster ? keys.tag : ''
      let g = groups.get(id)
      if (g === undefined) {
        g = { algorithm: step.policy.algorithm, indexes: [], keys: [], args: [] }
        groups.set(id, g)
      } else if (g.algorithm !== step.policy.algorithm) {
        g.algorithm = undefined
      }
      g.indexes.push(index)
      g.keys.push(keys.state, keys.block)
      g.args.push(...stepArgs(step))
    })
    return [...groups.values()]
  }

  async function applyGroup(g: Group, mode: 'consume' | 'peek', at: string): Promise<StepResult[]> {
    const reply = await run(pick('apply', g), g.keys, [mode, at, slack, ...g.args])
    if (!Array.isArray(reply) || reply.length !== g.indexes.length * 5) {
      throw new StoreError(`redis store: unexpected reply from the apply script: ${String(reply)}`)
    }
    const results: StepResult[] = []
    for (let i = 0; i < reply.length; i += 5) {
      results.push({
        allowed: Number(reply[i]) === 1,
        remaining: Number(reply[i + 1]),
        resetMs: Number(reply[i + 2]),
        retryAfterMs: Number(reply[i + 3]),
        blocked: Number(reply[i + 4]) === 1,
      })
    }
    return results
  }

  async function refundGroup(g: Group, at: string): Promise<void> {
    await run(pick('refund', g), g.keys, [at, slack, ...g.args])
  }

  function merge(count: number, groups: readonly Group[], results: readonly StepResult[][]): StepResult[] {
    const out = new Array<StepResult>(count)
    groups.forEach((g, gi) => {
      g.indexes.forEach((index, i) => {
        out[index] = results[gi]![i]!
      })
    })
    return out
  }

  const store: RedisStore = {
    name: adapter.cluster ? 'redis-cluster' : 'redis',
    client: { library: adapter.library, cluster: adapter.cluster },
    async apply(steps, mode) {
      check()
      if (steps.length === 0) return []
      const at = clock()
      const groups = group(steps)
      if (groups.length === 1) return applyGroup(groups[0]!, mode, at)
      // Layers in different slots: each group commits atomically by itself. When one group denies,
      // the groups that committed are refunded (compensation) and reported as they stand.
      const results = await Promise.all(groups.map((g) => applyGroup(g, mode, at)))
      const admitted = results.map((r) => r.every((x) => x.allowed))
      if (mode === 'peek' || admitted.every(Boolean)) return merge(steps.length, groups, results)
      await Promise.all(groups.map((g, gi) => (admitted[gi] ? refundGroup(g, at) : undefined)))
      const after = await Promise.all(
        groups.map((g, gi) => (admitted[gi] ? applyGroup(g, 'peek', at) : results[gi]!)),
      )
      return merge(steps.length, groups, after)
    },
    async refund(steps) {
      check()
      if (steps.length === 0) return
      const at = clock()
      await Promise.all(group(steps).map((g) => refundGroup(g, at)))
    },
    async block(steps, durationMs) {
      check()
      if (steps.length === 0) return
      if (!Number.isSafeInteger(durationMs) || durationMs <= 0) {
        throw new InvalidOptionsError(
          `block: duration must be a positive whole number of ms, got ${durationMs}`,
        )
      }
      const at = clock()
      await Promise.all(
        group(steps).map((g) => run(pick('block', g), g.keys, [at, slack, String(durationMs), ...g.args])),
      )
    },
    async reset(steps) {
      check()
      if (steps.length === 0) return
      try {
        await Promise.all(group(steps).map((g) => adapter.del(g.keys)))
      } catch (error) {
        throw wrap(error)
      }
    },
    async close() {
      closed = true
    },
  }
  return store
}
