// The Redis store: every algorithm runs as its Lua twin inside Redis, a decision's steps of one hash
// slot in one atomic script call (with coalescing, one call carries several single-slot decisions).
// Works with ioredis and node-redis v5, standalone or Cluster.
// The scripts and their registry are in script.ts, the tick coalescer in coalescer.ts.

import { type Answer, APPLY_TO, type ApplyTo, type ApplyToSlot } from '../../answer.js'
import { type CalendarPeriod, type CalendarSpec, periodAt } from '../../calendar.js'
import { InvalidOptionsError, StoreClosedError, StoreError } from '../../errors.js'
import { ALGORITHMS, type AlgorithmName, type ResolvedPolicy } from '../../policy.js'
import { promiseWith, takenReject, takenResolve } from '../../resolvers.js'
import type { Step, StepResult, Store } from '../../store.js'
import { adaptClient, type ClientAdapter, clientProblem, NOT_A_CLIENT, type RedisClient } from './client.js'
import { type Pending, tickCoalescer } from './coalescer.js'
import { type KeyLayout, keyedLayout, type SharedLayout, sharedLayout, subjectLayout } from './keys.js'
import { luaAlgorithms } from './lua.generated.js'
import { type RedisStoreOptions, redisStoreSettings } from './options.js'
import { RECORD_SCRIPTS, redisRecords } from './records.js'
import { type Script, script, scriptRunner } from './script.js'

export type { IORedisClientLike, NodeRedisClientLike, NodeRedisClusterLike, RedisClient } from './client.js'
export type { HybridRedisOptions } from './hybrid.js'
export { hybridRedis } from './hybrid.js'
export { subjectTag } from './keys.js'
export type { RedisStoreOptions } from './options.js'

export interface RedisStore extends Store {
  /** A network store: always a promise. */
  apply(steps: readonly Step[], mode: 'consume' | 'peek'): Promise<StepResult[]>
  /** Which client library and topology the store detected. */
  readonly client: { library: 'ioredis' | 'node-redis'; cluster: boolean }
  /**
   * Make the first decision cost one round trip: connect (a lazy client connects on this), load every
   * script on every master that lacks it, and read (or create) the slot secret when it is kept in
   * Redis. Rejects with `StoreError` when Redis does not answer. Cheap to call again (a readiness
   * probe): it loads only what is missing and writes the slot secret back if it was lost.
   * @example
   * const store = redisStore(new Cluster(nodes))
   * await store.ready() // before the process reports ready
   */
  ready(): Promise<void>
}

/** What a step of each algorithm sends after limit and windowMs (lua.generated.ts: luaAlgorithms). */
interface Layout {
  /** The calendar period's start (fixed window, sliding window counter). */
  period: boolean
  /** The next calendar period's length (sliding window counter). */
  following: boolean
  capacity: boolean
  lease: boolean
}

/**
 * Each algorithm's argument layout, read once from the generated module: limit, windowMs, capacity
 * where the algorithm takes one, the cost, the lease id where it takes one. Any other layout is a
 * build error, caught here at load rather than as wrong arguments at run time.
 */
const LAYOUTS = new Map<AlgorithmName, Layout>(
  ALGORITHMS.map((algorithm) => {
    const args: readonly string[] = luaAlgorithms[algorithm]
    const layout = {
      period: args.includes('period'),
      following: args.includes('following'),
      capacity: args.includes('capacity'),
      lease: args.includes('lease'),
    }
    const expected = ['limit', 'window']
    if (layout.period) expected.push('period')
    if (layout.following) expected.push('following')
    if (layout.capacity) expected.push('capacity')
    expected.push('cost')
    if (layout.lease) expected.push('lease')
    if (args.join() !== expected.join())
      throw new StoreError(`redis store: unexpected Lua arguments for ${algorithm}`)
    return [algorithm, layout]
  }),
)

/**
 * The policy's part of a step's arguments (scripts/variants/apply.lua): limit, windowMs, no calendar
 * period (-1) and the window as the next one's length where the algorithm takes them, and the
 * capacity where it takes one, as strings made once per policy rather than per decision.
 */
const policyArgs = new WeakMap<ResolvedPolicy, readonly string[]>()
function argsOf(p: ResolvedPolicy): readonly string[] {
  const known = policyArgs.get(p)
  if (known !== undefined) return known
  const layout = LAYOUTS.get(p.algorithm)!
  const args = [String(p.limit), String(p.windowMs)]
  if (layout.period) args.push('-1')
  if (layout.following) args.push(String(p.windowMs))
  if (layout.capacity) args.push(String(p.capacity))
  policyArgs.set(p, args)
  return args
}

/**
 * A calendar policy's part of a step's arguments: the period holding `nowMs` by this process's
 * clock (its length as the window, its start, the next period's length), made once per period.
 */
const calendarArgs = new WeakMap<ResolvedPolicy, { period: CalendarPeriod; args: readonly string[] }>()
function calendarArgsOf(p: ResolvedPolicy, calendar: CalendarSpec, nowMs: number): readonly string[] {
  const period = periodAt(nowMs, calendar)
  const known = calendarArgs.get(p)
  if (known !== undefined && known.period === period) return known.args
  const args = [String(p.limit), String(period.endMs - period.startMs), String(period.startMs)]
  if (LAYOUTS.get(p.algorithm)!.following) args.push(String(period.nextEndMs - period.endMs))
  calendarArgs.set(p, { period, args })
  return args
}

/**
 * One step's arguments (scripts/variants/apply.lua): limit, windowMs, capacity (token bucket and
 * GCRA), the cost (signed by mode in apply calls: peek is -1 - cost), the lease id (concurrency).
 * Every value costs Redis time per call, so nothing the script can do without is sent.
 */
function pushStepArgs(out: string[], step: Step, cost: number): void {
  const calendar = step.policy.calendar
  // Every script's first argument is its clock: a client clock's now, or '' or 'v' for the Redis
  // clock, when the period is this process's (docs/policies.md#calendar-quotas: clock skew).
  const at = out[0]!
  const args =
    calendar === undefined
      ? argsOf(step.policy)
      : calendarArgsOf(step.policy, calendar, at === '' || at === 'v' ? Date.now() : Number(at))
  for (const arg of args) out.push(arg)
  out.push(String(cost))
  if (LAYOUTS.get(step.policy.algorithm)!.lease) out.push(step.leaseId ?? '')
}

const signed = (mode: 'consume' | 'peek', step: Step): number =>
  mode === 'peek' ? -1 - step.cost : step.cost

/**
 * One-step decisions of one algorithm as the apply script's runs (scripts/variants/apply.lua): each
 * run is a count, then the arguments its decisions share. Decisions in a row with the same policy
 * and signed cost are one run: at 64 in flight most of a call's decisions are, and each argument
 * costs this process (the client encodes it) and Redis (it parses it) per call. A calendar policy's
 * arguments follow the clock and a lease is each decision's own: those decisions are runs of one.
 * Decisions on a key a decision before them in the call named are runs of their own, counted
 * negative: the script reads their values itself (the call's MGET may hold values written since),
 * and needs no table of the keys it has seen to tell.
 */
function pushRuns(args: string[], keys: string[], entries: readonly Pending<Group>[]): void {
  const named = new Set<string>()
  let countAt = -1
  let count = 0
  let policy: ResolvedPolicy | undefined
  let cost = 0
  let again = false
  for (const e of entries) {
    const g = e.group
    const key = g.keys[0]!
    keys.push(key, g.keys[1]!)
    const repeated = named.has(key)
    if (!repeated) named.add(key)
    const step = g.steps[0]!
    const c = signed(e.mode, step)
    if (count > 0 && step.policy === policy && c === cost && repeated === again) {
      count++
      continue
    }
    if (count > 0) args[countAt] = String(again ? -count : count)
    policy = step.policy
    cost = c
    again = repeated
    count = 1
    countAt = args.length
    args.push('1')
    pushStepArgs(args, step, c)
    // Never extended: the next decision starts its own run.
    if (policy.calendar !== undefined || LAYOUTS.get(policy.algorithm)!.lease) policy = undefined
  }
  if (count > 1 || again) args[countAt] = String(again ? -count : count)
}

/**
 * `count` step results from a reply of 3 integers per step, from step `from`: r1 is remaining when
 * allowed, else -1 - remaining; r2 resetMs; r3 retryAfterMs, or -1 - it when blocked.
 */
function parseReply(reply: unknown[], from: number, count: number): StepResult[] {
  // One step (every coalesced single-policy decision): a one-element literal, not a growing list.
  if (count === 1) return [stepResult(reply, from * 3)]
  const results: StepResult[] = []
  for (let i = from * 3; i < (from + count) * 3; i += 3) results.push(stepResult(reply, i))
  return results
}

/** The step result of the 3 reply integers from `i`. */
function stepResult(reply: unknown[], i: number): StepResult {
  const r1 = Number(reply[i])
  const r3 = Number(reply[i + 2])
  return {
    allowed: r1 >= 0,
    remaining: r1 >= 0 ? r1 : -1 - r1,
    resetMs: Number(reply[i + 1]),
    retryAfterMs: r3 >= 0 ? r3 : -1 - r3,
    blocked: r3 < 0,
  }
}

/** A reply of 3 integers per step. */
function checkReply(reply: unknown, steps: number, what: string): asserts reply is unknown[] {
  if (!Array.isArray(reply) || reply.length !== steps * 3) {
    throw new StoreError(`redis store: unexpected reply from the ${what} script: ${String(reply)}`)
  }
}

const same = <T>(value: T): T => value

interface Group {
  /** The hash tag shared by the group's keys in Cluster; '' when standalone. */
  id: string
  /** The one algorithm of every step in the group, or undefined when they mix. */
  algorithm: AlgorithmName | undefined
  indexes: readonly number[]
  keys: string[]
  steps: readonly Step[]
}

const FIRST: readonly number[] = [0]

function wrap(error: unknown): StoreError {
  const detail = error instanceof Error ? error.message : String(error)
  return new StoreError(`redis store: ${detail}`, { cause: error })
}

/** A decision's steps for the layered script: the step count, then per step its algorithm and arguments. */
function pushLayered(out: string[], mode: 'consume' | 'peek', steps: readonly Step[]): void {
  out.push(String(steps.length))
  for (const step of steps) {
    out.push(step.policy.algorithm)
    pushStepArgs(out, step, signed(mode, step))
  }
}

/** Steps for the refund and block scripts: per step its algorithm and arguments (cost unsigned). */
function pushSteps(out: string[], steps: readonly Step[]): string[] {
  for (const step of steps) {
    out.push(step.policy.algorithm)
    pushStepArgs(out, step, step.cost)
  }
  return out
}

/** The apply script of each algorithm, with the reader of a one-decision reply, made once. */
const SINGLE = new Map<AlgorithmName, { script: Script; readOne(reply: unknown): StepResult[] }>(
  ALGORITHMS.map((a) => {
    const s = script(`apply/${a}`)
    const readOne = (reply: unknown): StepResult[] => {
      checkReply(reply, 1, s.name)
      return parseReply(reply, 0, 1)
    }
    return [a, { script: s, readOne }]
  }),
)

/** Every script a store may call: what `ready()` loads. */
const STORE_SCRIPTS: readonly Script[] = [
  ...[...SINGLE.values()].map((s) => s.script),
  ...(['layered', 'refund', 'block', 'charge'] as const).map((name) => script(name)),
  ...RECORD_SCRIPTS,
]

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
  const {
    prefix,
    clientClock,
    now,
    coalesce,
    coalesceWrites: shareWrites,
    slotSecret,
    scriptRetryMs,
    compactValues,
  } = redisStoreSettings(options)
  // A Cluster with no secret given keeps one in Redis; else the layout is known now.
  const shared: SharedLayout | undefined =
    slotSecret === undefined && adapter.cluster ? sharedLayout(prefix, adapter) : undefined
  const fixed: KeyLayout | undefined =
    shared !== undefined
      ? undefined
      : typeof slotSecret === 'string'
        ? keyedLayout(prefix, slotSecret)
        : subjectLayout(prefix)
  const runner = scriptRunner(adapter, wrap, {
    retryMs: scriptRetryMs,
    // A lost script cache may be a restart that lost the slot secret too: write it back (or adopt
    // the one another process wrote) before a process that starts now makes a different one.
    ...(shared === undefined ? {} : { onNoScript: () => void shared.sync().catch(() => {}) }),
  })
  const layered = script('layered')
  const refundScript = script('refund')
  const blockScript = script('block')
  const chargeScript = script('charge')
  let closed = false

  /** The key layout in force, once known (always, but for a Cluster's first call). */
  const layoutNow = (): KeyLayout | undefined => fixed ?? shared!.current

  /** The key layout, reading the slot secret from Redis first when it is not known yet. */
  async function layout(): Promise<KeyLayout> {
    const known = layoutNow()
    if (known !== undefined) return known
    try {
      await shared!.sync()
    } catch (error) {
      throw wrap(error)
    }
    return shared!.current!
  }

  // The scripts' first argument: now on the client clock; on the server clock '' (compact values
  // allowed) or 'v' (value layouts only).
  const serverClock = compactValues ? '' : 'v'
  function clock(): string {
    return clientClock ? String(Math.floor(now())) : serverClock
  }

  function assertOpen(): void {
    if (closed) throw new StoreClosedError('redisStore: the store is closed')
  }

  /** Steps grouped so that each group is one script call: by hash tag in Cluster, all at once otherwise. */
  function group(steps: readonly Step[], stepKeys: KeyLayout): Group[] {
    if (steps.length === 1) {
      const step = steps[0]!
      const keys = stepKeys(step)
      const id = adapter!.cluster ? keys.tag : ''
      // The caller's one-step list as the group's (never changed), and a shared index list.
      return [{ id, algorithm: step.policy.algorithm, indexes: FIRST, keys: [keys.state, keys.block], steps }]
    }
    const groups = new Map<string, Group & { indexes: number[]; steps: Step[] }>()
    steps.forEach((step, index) => {
      const keys = stepKeys(step)
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

  /**
   * One decision of a group: the algorithm's apply script for one step, else the layered script;
   * its results to `resolve`, a failure to `reject`.
   */
  function callGroup(
    g: Group,
    mode: 'consume' | 'peek',
    at: string,
    shareWrite: boolean,
    resolve: (results: StepResult[]) => void,
    reject: (error: unknown) => void,
  ): void {
    const args = [at]
    const one = g.steps.length === 1 ? SINGLE.get(g.steps[0]!.policy.algorithm) : undefined
    if (one === undefined) {
      pushLayered(args, mode, g.steps)
      const count = g.steps.length
      runner.call(
        layered,
        g.keys,
        args,
        shareWrite,
        (reply) => {
          checkReply(reply, count, layered.name)
          resolve(parseReply(reply, 0, count))
        },
        reject,
      )
      return
    }
    const step = g.steps[0]!
    args.push('1')
    pushStepArgs(args, step, signed(mode, step))
    runner.call(one.script, g.keys, args, shareWrite, (reply) => resolve(one.readOne(reply)), reject)
  }

  function applyGroup(g: Group, mode: 'consume' | 'peek', at: string): Promise<StepResult[]> {
    return new Promise((resolve, reject) => callGroup(g, mode, at, shareWrites, resolve, reject))
  }

  /**
   * Send coalesced decisions: alone, as applyGroup; all of one step of one algorithm, that algorithm's
   * apply script; else the layered script (layered decisions, mixed algorithms). Batch calls do not
   * share socket writes: the coalescer splits them on purpose.
   */
  function send(
    at: string,
    entries: Pending<Group>[],
    algorithm: AlgorithmName | undefined,
    done: () => void,
    shareWrite: boolean,
  ): void {
    if (entries.length === 1) {
      const e = entries[0]!
      callGroup(
        e.group,
        e.mode,
        at,
        shareWrite && shareWrites,
        (results) => {
          done()
          e.to.ok(results)
        },
        (error) => {
          done()
          e.to.fail(error)
        },
      )
      return
    }
    const keys: string[] = []
    let steps = 0
    for (const e of entries) steps += e.group.steps.length
    const batch = steps === entries.length && algorithm !== undefined
    const args: string[] = [at]
    if (batch) pushRuns(args, keys, entries)
    else {
      for (const e of entries) {
        for (const key of e.group.keys) keys.push(key)
        pushLayered(args, e.mode, e.group.steps)
      }
    }
    const s = batch ? SINGLE.get(algorithm)!.script : layered
    runner.call(
      s,
      keys,
      args,
      false,
      (reply) => {
        checkReply(reply, steps, s.name)
        done()
        let from = 0
        for (const e of entries) {
          const count = e.group.steps.length
          e.to.ok(parseReply(reply, from, count))
          from += count
        }
      },
      (error) => {
        done()
        for (const e of entries) e.to.fail(error)
      },
    )
  }

  const coalescer = tickCoalescer<Group>(send)

  async function refundGroup(g: Group, at: string): Promise<void> {
    await runner.run(refundScript, g.keys, pushSteps([at], g.steps), false, same)
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

  /**
   * A decision's steps to Redis, its results or failure to `to`: one slot, with the decisions of this
   * tick (coalescer); across slots, each slot's group at once (applyAcross). Never throws.
   */
  function applyInto(steps: readonly Step[], mode: 'consume' | 'peek', to: Answer<StepResult[]>): void {
    try {
      assertOpen()
      if (steps.length === 0) {
        to.ok([])
        return
      }
      const stepKeys = layoutNow()
      if (stepKeys === undefined) {
        layout().then(
          () => applyInto(steps, mode, to),
          (error: unknown) => to.fail(error),
        )
        return
      }
      const at = clock()
      const groups = group(steps, stepKeys)
      if (groups.length > 1) {
        coalescer.flush()
        applyAcross(steps, groups, mode, at).then(
          (results) => to.ok(results),
          (error: unknown) => to.fail(error),
        )
      } else if (coalesce) {
        const g = groups[0]!
        coalescer.add(g.id, g, g.algorithm, mode, at, to)
      } else {
        callGroup(
          groups[0]!,
          mode,
          at,
          shareWrites,
          (results) => to.ok(results),
          (error) => to.fail(error),
        )
      }
    } catch (error) {
      to.fail(error)
    }
  }

  // Not async: one promise per decision, settled by its coalesced call (applyInto).
  function apply(steps: readonly Step[], mode: 'consume' | 'peek'): Promise<StepResult[]> {
    const promise = promiseWith<StepResult[]>()
    applyInto(steps, mode, { ok: takenResolve(), fail: takenReject() })
    return promise
  }
  // The limiter's chain hands each decision's results up from the coalesced call's reply.
  const applyToAnswer: ApplyTo = (steps, mode, to) => {
    applyInto(steps, mode, to)
    return undefined
  }
  const store: RedisStore & { [APPLY_TO]: ApplyToSlot } = {
    name: adapter.cluster ? 'redis-cluster' : 'redis',
    inProcess: false,
    // Client clock: the scripts decide on `now`, so the limiter's deny cache must time with it too.
    now: clientClock ? () => Math.floor(now()) : Date.now,
    client: { library: adapter.library, cluster: adapter.cluster },
    records: redisRecords({
      adapter,
      runner,
      prefix,
      now: clientClock ? now : Date.now,
      assertOpen,
      wrap,
    }),
    apply,
    [APPLY_TO]: { apply, to: applyToAnswer },
    async refund(steps) {
      assertOpen()
      if (steps.length === 0) return
      const stepKeys = layoutNow() ?? (await layout())
      coalescer.flush() // decisions issued before this command leave before it
      const at = clock()
      await Promise.all(group(steps, stepKeys).map((g) => refundGroup(g, at)))
    },
    // Commit without the admit check (settle's forced charge), one call per hash slot.
    async charge(steps) {
      assertOpen()
      if (steps.length === 0) return
      const stepKeys = layoutNow() ?? (await layout())
      coalescer.flush() // decisions issued before this command leave before it
      const at = clock()
      await Promise.all(
        group(steps, stepKeys).map((g) =>
          runner.run(chargeScript, g.keys, pushSteps([at], g.steps), false, same),
        ),
      )
    },
    async block(steps, durationMs) {
      assertOpen()
      if (steps.length === 0) return
      if (!Number.isSafeInteger(durationMs) || durationMs <= 0) {
        throw new InvalidOptionsError(
          `block: duration must be a positive whole number of ms, got ${durationMs}`,
        )
      }
      const stepKeys = layoutNow() ?? (await layout())
      coalescer.flush()
      const at = clock()
      await Promise.all(
        group(steps, stepKeys).map((g) =>
          runner.run(blockScript, g.keys, pushSteps([at, String(durationMs)], g.steps), false, same),
        ),
      )
    },
    async reset(steps) {
      assertOpen()
      if (steps.length === 0) return
      const stepKeys = layoutNow() ?? (await layout())
      coalescer.flush() // decisions issued before this command leave before it
      try {
        await Promise.all(group(steps, stepKeys).map((g) => adapter.del(g.keys)))
      } catch (error) {
        throw wrap(error)
      }
    },
    async ready() {
      assertOpen()
      try {
        await Promise.all([adapter.loadMissing(STORE_SCRIPTS), shared?.sync()])
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
