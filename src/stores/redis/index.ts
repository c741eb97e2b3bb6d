// The Redis store: every algorithm runs as its Lua twin inside Redis, one atomic script call per
// decision (per hash slot in Cluster). Works with ioredis and node-redis v5, standalone or Cluster.
import { createHash } from 'node:crypto'
import { z } from 'zod'
import { InvalidOptionsError, StoreClosedError, StoreError } from '../../errors.js'
import { checkKnownKeys, isOptionsObject, keysOf } from '../../options.js'
import { ALGORITHMS, type AlgorithmName } from '../../policy.js'
import type { Step, StepResult, Store } from '../../store.js'
import {
  adaptClient,
  type ClientAdapter,
  clientProblem,
  NOT_A_CLIENT,
  type RedisClient,
  replyErrorCode,
} from './client.js'
import { stepKeys } from './keys.js'
import { luaSources } from './lua.generated.js'

export type { HybridRedisOptions } from '../../scale/hybrid-redis.js'
export { hybridRedis } from '../../scale/hybrid-redis.js'
export type { IORedisClientLike, NodeRedisClientLike, NodeRedisClusterLike, RedisClient } from './client.js'
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
  /**
   * Coalescing (default `true`): single-slot decisions issued in the same tick go to Redis together,
   * several per script call (sized to keep about four calls in flight, at most 128 per call),
   * evaluated in the order they were issued, each one still all or nothing. `false` sends one script
   * call per decision.
   */
  coalesce?: boolean
  /**
   * Write coalescing (default `true`): script calls of single decisions issued in the same tick leave
   * in shared socket writes, 16 calls at most per write, instead of one system call each. Each call
   * is still its own EVALSHA with its own reply. Applies to ioredis (node-redis already writes a
   * tick's commands together); other commands issued on the client in that tick share the writes too,
   * in order.
   */
  coalesceWrites?: boolean
}

export interface RedisStore extends Store {
  /** A network store: always a promise. */
  apply(steps: readonly Step[], mode: 'consume' | 'peek'): Promise<StepResult[]>
  /** Which client library and topology the store detected. */
  readonly client: { library: 'ioredis' | 'node-redis'; cluster: boolean }
}

/**
 * In client clock mode keys live this much longer than they are meaningful, to absorb host clock skew.
 * The module scripts get it as an argument; the flat ones derive it from their clock argument: keep
 * CLIENT_CLOCK_SLACK_MS in scripts/one-prelude.lua equal (flat-scripts.test.ts compares expiries).
 */
const CLIENT_CLOCK_SLACK_MS = 1000

const OPTION_KEYS = keysOf<RedisStoreOptions>({
  prefix: true,
  clock: true,
  now: true,
  coalesce: true,
  coalesceWrites: true,
})

const optionsSchema = z.strictObject({
  prefix: z
    .string()
    .regex(/^[^{}]{1,64}$/, { error: 'prefix must be 1-64 characters without { or }' })
    .optional(),
  clock: z.enum(['server', 'client'], { error: "clock must be 'server' or 'client'" }).optional(),
  now: z
    .custom<() => number>((v) => typeof v === 'function', { error: 'now must be a function returning ms' })
    .optional(),
  coalesce: z.boolean({ error: 'coalesce must be true or false' }).optional(),
  coalesceWrites: z.boolean({ error: 'coalesceWrites must be true or false' }).optional(),
})

/** Most decisions carried by one batch script call: bounds the time one call holds Redis. */
const MAX_BATCH = 128
/** Coalesced script calls the store aims to keep in flight (see dispatch). */
const PIPELINE = 4

interface Pending {
  group: Group
  mode: 'consume' | 'peek'
  resolve(results: StepResult[]): void
  reject(error: unknown): void
}

interface Batch {
  /** The clock argument every decision of the batch shares. */
  at: string
  entries: Pending[]
  /** The one algorithm of every step, or undefined when they mix. */
  algorithm: AlgorithmName | undefined
}

interface Script {
  /** Its name in scripts/ (`one-gcra`, `apply/token-bucket`, ...), for error messages. */
  readonly name: string
  readonly source: string
  readonly sha: string
  loading?: Promise<void> | undefined
}

function script(name: string, source: string): Script {
  return { name, source, sha: createHash('sha1').update(source).digest('hex') }
}

/** Step arguments of the module scripts (apply, batch, refund, block): algorithm, limit, windowMs, capacity, cost, leaseId. */
function pushStepArgs(out: string[], step: Step): void {
  const p = step.policy
  out.push(
    p.algorithm,
    String(p.limit),
    String(p.windowMs),
    String(p.capacity),
    String(step.cost),
    step.leaseId ?? '',
  )
}

/**
 * One decision of a flat one-<algorithm> script (scripts/one-prelude.lua): limit, windowMs, capacity
 * (token bucket and GCRA only), the cost signed by mode (peek: -1 - cost), and for concurrency the
 * lease id. Every value costs Redis time per call, so nothing the script can do without is sent.
 */
function pushFlatArgs(out: string[], mode: 'consume' | 'peek', step: Step): void {
  const p = step.policy
  out.push(String(p.limit), String(p.windowMs))
  if (p.algorithm === 'token-bucket' || p.algorithm === 'gcra') out.push(String(p.capacity))
  out.push(String(mode === 'peek' ? -1 - step.cost : step.cost))
  if (p.algorithm === 'concurrency') out.push(step.leaseId ?? '')
}

/**
 * `count` step results from a flat script's reply of 3 integers per step, from step `from`: r1 is
 * remaining when allowed, else -1 - remaining; r2 resetMs; r3 retryAfterMs, or -1 - it when blocked.
 */
function parseFlat(reply: unknown[], from: number, count: number): StepResult[] {
  const results: StepResult[] = []
  for (let i = from * 3; i < (from + count) * 3; i += 3) {
    const r1 = Number(reply[i])
    const r3 = Number(reply[i + 2])
    results.push({
      allowed: r1 >= 0,
      remaining: r1 >= 0 ? r1 : -1 - r1,
      resetMs: Number(reply[i + 1]),
      retryAfterMs: r3 >= 0 ? r3 : -1 - r3,
      blocked: r3 < 0,
    })
  }
  return results
}

const same = <T>(value: T): T => value

interface Group {
  /** The hash tag shared by the group's keys in Cluster; '' when standalone. */
  id: string
  /** The one algorithm of every step in the group, or undefined when they mix. */
  algorithm: AlgorithmName | undefined
  indexes: number[]
  keys: string[]
  steps: Step[]
}

/**
 * A store backed by Redis or Redis Cluster. The store does not own the client: `close()` stops the
 * store, and the caller closes the client.
 * @example
 * const store = redisStore(new Redis(), { prefix: 'rl' })
 * const limiter = createLimiter({ store, policies: { api: { algorithm: 'gcra', limit: 100, window: '1m' } } })
 */
export function redisStore(client: RedisClient, options: RedisStoreOptions = {}): RedisStore {
  // A client that cannot work would turn every decision into a store failure, i.e. a silent
  // fail-open admit: it is a configuration error, here.
  const problem = clientProblem(client)
  const adapter: ClientAdapter | undefined = problem === undefined ? adaptClient(client) : undefined
  if (adapter === undefined) throw new InvalidOptionsError(`redisStore: ${problem ?? NOT_A_CLIENT}`)
  if (!isOptionsObject(options)) throw new InvalidOptionsError('redisStore: options must be an object')
  checkKnownKeys('redisStore', options, OPTION_KEYS)
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
    Object.entries(luaSources).map(([name, source]) => [name, script(name, source)]),
  )
  /** The script for a group: the single-algorithm variant when every step shares one algorithm. */
  const pick = (name: 'apply' | 'batch' | 'refund' | 'block', g: Pick<Group, 'algorithm'>): Script =>
    scripts.get(g.algorithm === undefined || name === 'block' ? name : `${name}/${g.algorithm}`)!
  /**
   * Flat single-step apply scripts, by algorithm (see scripts/one-*.lua), each with the reader of a
   * one-decision reply, made once here rather than per call.
   */
  const flat = new Map<AlgorithmName, { script: Script; readOne(reply: unknown): StepResult[] }>(
    ALGORITHMS.map((a) => {
      const s = scripts.get(`one-${a}`)!
      const readOne = (reply: unknown): StepResult[] => {
        checkReply(reply, 1, 3, s.name)
        return parseFlat(reply, 0, 1)
      }
      return [a, { script: s, readOne }]
    }),
  )
  const coalesce = parsed.data.coalesce ?? true
  const shareWrites = parsed.data.coalesceWrites ?? true
  /** Decisions waiting for the end of the tick, by hash slot group ('' when standalone). */
  const pending = new Map<string, Batch>()
  let closed = false
  /** Coalesced decisions sent and not yet answered. */
  let sent = 0

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

  /**
   * EVALSHA, then `read` of the reply; on NOSCRIPT (after a restart, SCRIPT FLUSH or failover) load
   * the script and retry once. `single`: a call of one decision, which may share a socket write with
   * the tick's others (batch calls do not: the store splits them on purpose, see dispatch). One
   * continuation of the client's promise: this is every decision's path.
   */
  function run<R>(
    s: Script,
    keys: string[],
    args: string[],
    single: boolean,
    read: (reply: unknown) => R,
  ): Promise<R> {
    let call: Promise<unknown>
    try {
      call = adapter!.evalsha(s.sha, keys, args, single && shareWrites)
    } catch (error) {
      call = Promise.reject(error)
    }
    return call.then(read, (error: unknown) => retry(s, keys, args, error).then(read))
  }

  async function retry(s: Script, keys: string[], args: string[], error: unknown): Promise<unknown> {
    if (replyErrorCode(error) !== 'NOSCRIPT') throw wrap(error)
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
    if (steps.length === 1) {
      const step = steps[0]!
      const keys = stepKeys(prefix, step)
      const id = adapter!.cluster ? keys.tag : ''
      return [
        { id, algorithm: step.policy.algorithm, indexes: [0], keys: [keys.state, keys.block], steps: [step] },
      ]
    }
    const groups = new Map<string, Group>()
    steps.forEach((step, index) => {
      const keys = stepKeys(prefix, step)
      const id = adapter!.cluster ? keys.tag : ''
      let g = groups.get(id)
      if (g === undefined) {
        g = { id, algorithm: step.policy.algorithm, indexes: [], keys: [], steps: [] }
        groups.set(id, g)
      } else if (g.algorithm !== step.policy.algorithm) {
        g.algorithm = undefined
      }
      g.indexes.push(index)
      g.keys.push(keys.state, keys.block)
      g.steps.push(step)
    })
    return [...groups.values()]
  }

  /** The module-script arguments of a group's steps, after `head`. */
  function moduleArgs(head: string[], g: Group): string[] {
    for (const step of g.steps) pushStepArgs(head, step)
    return head
  }

  /** `count` step results from a reply of 5 integers per step, starting at step `from`. */
  function parse(reply: unknown[], from: number, count: number): StepResult[] {
    const results: StepResult[] = []
    for (let i = from * 5; i < (from + count) * 5; i += 5) {
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

  /** A reply of `width` integers per step (5 from the module scripts, 3 from the flat ones). */
  function checkReply(reply: unknown, steps: number, width: 3 | 5, what: string): asserts reply is unknown[] {
    if (!Array.isArray(reply) || reply.length !== steps * width) {
      throw new StoreError(`redis store: unexpected reply from the ${what} script: ${String(reply)}`)
    }
  }

  function applyGroup(g: Group, mode: 'consume' | 'peek', at: string): Promise<StepResult[]> {
    const one = g.steps.length === 1 && g.algorithm !== undefined ? flat.get(g.algorithm) : undefined
    if (one === undefined) {
      const s = pick('apply', g)
      return run(s, g.keys, moduleArgs([mode, at, slack], g), true, (reply) => {
        checkReply(reply, g.steps.length, 5, s.name)
        return parse(reply, 0, g.steps.length)
      })
    }
    const args = [at]
    pushFlatArgs(args, mode, g.steps[0]!)
    return run(one.script, g.keys, args, true, one.readOne)
  }

  /** Send coalesced decisions: one apply call for a single decision, else one batch script call. */
  async function send(at: string, entries: Pending[], algorithm: AlgorithmName | undefined): Promise<void> {
    sent += entries.length
    try {
      if (entries.length === 1) {
        const e = entries[0]!
        e.resolve(await applyGroup(e.group, e.mode, at))
        return
      }
      const keys: string[] = []
      let steps = 0
      for (const e of entries) steps += e.group.steps.length
      // All one-step decisions of an algorithm with a flat script: that script. Otherwise the batch
      // script (layered decisions, mixed algorithms).
      const one = steps === entries.length && algorithm !== undefined ? flat.get(algorithm) : undefined
      const args: string[] = one === undefined ? [at, slack] : [at]
      for (const e of entries) {
        for (const key of e.group.keys) keys.push(key)
        if (one !== undefined) pushFlatArgs(args, e.mode, e.group.steps[0]!)
        else {
          args.push(e.mode, String(e.group.steps.length))
          moduleArgs(args, e.group)
        }
      }
      const s = one?.script ?? pick('batch', { algorithm })
      const reply = await run(s, keys, args, false, same)
      checkReply(reply, steps, one === undefined ? 5 : 3, s.name)
      let from = 0
      for (const e of entries) {
        const count = e.group.steps.length
        e.resolve(one === undefined ? parse(reply, from, count) : parseFlat(reply, from, count))
        from += count
      }
    } catch (error) {
      for (const e of entries) e.reject(error)
    } finally {
      sent -= entries.length
    }
  }

  /**
   * Send a batch as calls of at most `size` decisions, in order. The size keeps about PIPELINE calls
   * in flight: while Redis runs one call, this process reads the last reply and builds the next, so
   * the two overlap instead of taking turns (which one call of every waiting decision would cause).
   */
  function dispatch(batch: Batch): void {
    const { entries } = batch
    const size = Math.min(MAX_BATCH, Math.max(1, Math.ceil((entries.length + sent) / PIPELINE)))
    for (let i = 0; i < entries.length; i += size) {
      void send(batch.at, entries.length <= size ? entries : entries.slice(i, i + size), batch.algorithm)
    }
  }

  function flush(): void {
    const batches = [...pending.values()]
    pending.clear()
    for (const b of batches) dispatch(b)
  }

  /**
   * One single-slot decision, coalesced with the others issued in the same tick. A batch is sent
   * when the tick ends, when it is full, or when a decision with another clock value arrives, so the
   * calls leave in the order they were issued and one key's decisions are never reordered.
   */
  function applyCoalesced(id: string, g: Group, mode: 'consume' | 'peek', at: string): Promise<StepResult[]> {
    return new Promise<StepResult[]>((resolve, reject) => {
      let batch = pending.get(id)
      if (batch !== undefined && batch.at !== at) {
        pending.delete(id)
        dispatch(batch)
        batch = undefined
      }
      if (batch === undefined) {
        if (pending.size === 0) process.nextTick(flush)
        batch = { at, entries: [], algorithm: g.algorithm }
        pending.set(id, batch)
      } else if (batch.algorithm !== g.algorithm) {
        batch.algorithm = undefined
      }
      batch.entries.push({ group: g, mode, resolve, reject })
      if (batch.entries.length >= MAX_BATCH) {
        pending.delete(id)
        dispatch(batch)
      }
    })
  }

  async function refundGroup(g: Group, at: string): Promise<void> {
    await run(pick('refund', g), g.keys, moduleArgs([at, slack], g), false, same)
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

  /**
   * Layers in different slots: each group commits atomically by itself. When one group denies, the
   * groups that committed are refunded (compensation) and reported as they stand.
   */
  async function applyAcross(
    steps: readonly Step[],
    groups: readonly Group[],
    mode: 'consume' | 'peek',
    at: string,
  ): Promise<StepResult[]> {
    const results = await Promise.all(groups.map((g) => applyGroup(g, mode, at)))
    const admitted = results.map((r) => r.every((x) => x.allowed))
    if (mode === 'peek' || admitted.every(Boolean)) return merge(steps.length, groups, results)
    await Promise.all(groups.map((g, gi) => (admitted[gi] ? refundGroup(g, at) : undefined)))
    const after = await Promise.all(
      groups.map((g, gi) => (admitted[gi] ? applyGroup(g, 'peek', at) : results[gi]!)),
    )
    return merge(steps.length, groups, after)
  }

  const store: RedisStore = {
    name: adapter.cluster ? 'redis-cluster' : 'redis',
    client: { library: adapter.library, cluster: adapter.cluster },
    // Not async: the one-slot path returns its call's promise as is, without another layer.
    apply(steps, mode) {
      try {
        check()
        if (steps.length === 0) return Promise.resolve([])
        const at = clock()
        const groups = group(steps)
        if (groups.length === 1) {
          const g = groups[0]!
          return coalesce ? applyCoalesced(g.id, g, mode, at) : applyGroup(g, mode, at)
        }
        return applyAcross(steps, groups, mode, at)
      } catch (error) {
        return Promise.reject(error)
      }
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
        group(steps).map((g) =>
          run(pick('block', g), g.keys, moduleArgs([at, slack, String(durationMs)], g), false, same),
        ),
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
  // Client clock: the scripts decide on `now`, so the limiter's deny cache must time with it too.
  if (clientClock) store.now = () => Math.floor(now())
  return store
}
