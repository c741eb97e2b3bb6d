// The limiter: named policies over one store. createLimiter validates the options, composes the
// decision path once (chain.ts: validate -> steps -> hybrid? -> deny cache? -> failover? -> store)
// and turns what the chain answers into Decisions. In-process links answer synchronously, so a
// decision on the memory store is a plain call all the way down.
import { randomUUID } from 'node:crypto'
import { answersTo } from '../answer.js'
import { parseDuration } from '../duration.js'
import { InvalidOptionsError } from '../errors.js'
import type { FailoverLimiterOptions } from '../failover/index.js'
import { resolveFailover } from '../failover/index.js'
import { FAILOVER_OPTION_KEYS } from '../failover/options.js'
import { checkKnownKeys, keysOf } from '../options.js'
import type { Policy, ResolvedPolicy } from '../policy.js'
import { resolvePolicy } from '../policy.js'
import { RuntimeLists } from '../runtime-lists.js'
import { denyCacheOptions } from '../scale/deny-cache.js'
import { isPending, type MaybePromise, type Step, type StepResult, type Store } from '../store.js'
import { memoryStore, singleStepOf } from '../stores/memory.js'
import { createWaiting, waitBounds } from '../waiting/index.js'
import { singleDecisionFrom } from './answered.js'
import { buildChain, type Chain } from './chain.js'
import { layeredDecision, plainDecisionFor, singleDecision } from './decisions.js'
import { type DecisionEvents, decisionEvents, type Run, type RunOne } from './events.js'
import { type ListMethod, listMethods } from './list-methods.js'
import { listsStore } from './lists-store.js'
import { overrideMethods } from './override-methods.js'
import { DEFAULT_STALENESS_MS, OverrideCache, overrideStore } from './overrides.js'

export { nearLimitCrossings } from './near-limit.js'

import type {
  AcquireDecision,
  Check,
  ConsumeOptions,
  Decision,
  LayeredDecision,
  Limiter,
  LimiterOptions,
  WaitingMethod,
} from './types.js'
import { type Validator, validator } from './validate.js'

export type {
  AcquireDecision,
  Check,
  ConsumeOptions,
  Decision,
  DecisionEvent,
  DecisionListener,
  DenyReason,
  LayeredDecision,
  Lease,
  Limiter,
  LimiterOptions,
  Override,
  OverrideOptions,
  PenaltyApplied,
  WaitingMethod,
} from './types.js'

/** Every key `createLimiter` accepts; anything else is a misspelling to report. */
const LIMITER_OPTION_KEYS = [
  ...keysOf<Omit<LimiterOptions<Record<string, Policy>>, keyof FailoverLimiterOptions>>({
    store: true,
    policies: true,
    onDecision: true,
    localDenyCache: true,
    hybrid: true,
    waiting: true,
    staleness: true,
  }),
  ...FAILOVER_OPTION_KEYS,
]

/**
 * Create a limiter over named policies.
 * @example
 * const limiter = createLimiter({ policies: { api: { algorithm: 'token-bucket', limit: 10, window: '1s' } } })
 * const d = await limiter.consume('api', 'user-42')
 */
export function createLimiter<const P extends Record<string, Policy>>(
  options: LimiterOptions<P>,
): Limiter<keyof P & string> {
  type Name = keyof P & string
  const settings = limiterSettings(options)
  const userStore = options.store === undefined ? memoryStore() : sealedStore(options.store)
  const chain = buildChain({
    store: userStore,
    policies: settings.policies,
    failover: settings.failover,
    denyCache: settings.denyCache,
    hybrid: options.hybrid,
  })
  const validate = validator(settings.policies)
  // Allow and deny lists at the very head (a denied key never reaches an override), then per-key
  // overrides. The override cache reads the store's records, run-time list entries included, at
  // start and every `staleness`; while there is no list and no override, a single check on the
  // memory store takes the single-step path below both links.
  const policyIds = [...new Set([...settings.policies.values()].map((p) => p.id))]
  const runtimeLists = new RuntimeLists(() => userStore.now())
  const ownLists = [...settings.policies.values()].some((p) => p.lists !== undefined)
  const overrides = new OverrideCache({
    records: userStore.records,
    policyIds,
    stalenessMs: settings.stalenessMs,
    poll: !userStore.inProcess,
    now: () => userStore.now(),
    changed: (policyId, key) => chain.forgetDenial(policyId, key),
    lists: runtimeLists,
  })
  const head = listsStore(overrideStore(chain.store, overrides), runtimeLists)
  const events = decisionPath(
    head,
    chain.store,
    () => overrides.size === 0 && !ownLists && runtimeLists.size === 0,
    userStore.name,
    options.onDecision,
  )
  overrides.start()
  const base = Object.assign(
    limiterMethods<Name>(
      { ...chain, store: head },
      overrides,
      userStore,
      validate,
      events,
      settings.policies,
      (policyId: string, key: string): void => waiting.queues.released(policyId, key),
    ),
    listMethods<Name>(userStore, validate, runtimeLists),
  )
  // wait / reserve / throttle over the methods above; settle's forced charge goes down the chain to
  // the store's `charge`, which a store that cannot refuses itself (costs were checked by reserve; a
  // charge may pass the capacity, so its steps skip the validator's cost bound).
  const waiting = createWaiting(
    base,
    async (checks) => {
      await chain.store.charge(checks.map((c) => ({ ...validate.step(c.policy, c.key), cost: c.cost })))
    },
    settings.waitingBounds,
  )
  const limiter: Limiter<Name> = Object.assign(base, {
    wait: waiting.wait,
    reserve: waiting.reserve,
    throttle: waiting.throttle,
  })
  return limiter
}

/** Every member of the Store contract, and what it must be. */
const STORE_MEMBERS = {
  name: 'string',
  inProcess: 'boolean',
  apply: 'function',
  refund: 'function',
  charge: 'function',
  block: 'function',
  reset: 'function',
  now: 'function',
  records: 'object',
  close: 'function',
} as const satisfies Record<keyof Store, 'string' | 'boolean' | 'function' | 'object'>

/**
 * `store` when it has every member of the contract: a member missing would otherwise fail later, in
 * the middle of a decision, as a TypeError.
 */
function sealedStore(store: Store): Store {
  if (store === null || typeof store !== 'object')
    throw new InvalidOptionsError('createLimiter: store must be a Store (see sluice/store)')
  const wrong = Object.entries(STORE_MEMBERS)
    .filter(([member, type]) => typeof (store as unknown as Record<string, unknown>)[member] !== type)
    .map(([member, type]) => `${member} (${type})`)
  if (wrong.length > 0)
    throw new InvalidOptionsError(
      `createLimiter: store ${JSON.stringify(String(store.name))} lacks ${wrong.join(', ')}; every member of the Store contract is required (a capability it cannot serve rejects with UnsupportedError), and forwardStore(inner, changes) from sluice/store makes a wrapper that has them all`,
    )
  return store
}

/** createLimiter's options, checked once and resolved: everything but the store and the listeners. */
function limiterSettings(options: LimiterOptions<Record<string, Policy>>) {
  if (
    options === null ||
    typeof options !== 'object' ||
    options.policies === null ||
    typeof options.policies !== 'object'
  ) {
    throw new InvalidOptionsError('createLimiter: pass { policies: { name: { algorithm, limit, window } } }')
  }
  checkKnownKeys('createLimiter', options, LIMITER_OPTION_KEYS)
  const denyCache = denyCacheOptions(options.localDenyCache)
  const waitingBounds = waitBounds(options.waiting)
  const policies = new Map<string, ResolvedPolicy>()
  for (const [name, policy] of Object.entries(options.policies))
    policies.set(name, resolvePolicy(name, policy))
  if (policies.size === 0)
    throw new InvalidOptionsError('createLimiter: policies is empty; define at least one policy')
  for (const p of policies.values()) {
    if (p.syncEveryMs !== undefined && options.hybrid === undefined) {
      throw new InvalidOptionsError(
        `createLimiter: policy ${p.name} is hybrid; pass hybrid: hybridRedis(client) (from sluice/redis) so it can sync its counts`,
      )
    }
  }
  return {
    policies,
    stalenessMs:
      options.staleness === undefined ? DEFAULT_STALENESS_MS : parseDuration(options.staleness, 'staleness'),
    failover: resolveFailover(options),
    denyCache: options.localDenyCache === false ? undefined : denyCache,
    waitingBounds,
  }
}

/**
 * The decision path over the head of the chain: steps down, Decisions back, at once when the chain
 * answered at once, and timed for the listeners while anyone listens.
 */
function decisionPath(
  store: Store,
  below: Store,
  direct: () => boolean,
  storeName: string,
  onDecision: LimiterOptions<Record<string, Policy>>['onDecision'],
): DecisionEvents {
  const plain: Run = (_operation, steps, mode, layered) => {
    const answer = store.apply(steps, mode)
    const consumed = mode === 'consume'
    if (!isPending(answer))
      return layered ? layeredDecision(steps, answer, consumed) : singleDecision(steps, answer, consumed)
    return answer.then((results) =>
      layered ? layeredDecision(steps, results, consumed) : singleDecision(steps, results, consumed),
    )
  }
  // A single check: straight to the memory store's single-step path when the chain is that store
  // alone (no Step, no arrays, one result object reused: the Decision copies it at once); otherwise
  // down the chain as a one-step list.
  // The list and override links are above the memory store: while there is no list and no
  // override, the single-step path is taken; with one, the check goes down through the links.
  const single = singleStepOf(below)
  const scratch: StepResult = { allowed: false, remaining: 0, resetMs: 0, retryAfterMs: 0, blocked: false }
  const plainOne: RunOne =
    single !== undefined
      ? (operation, policy, key, cost, mode) =>
          direct()
            ? plainDecisionFor(
                policy,
                key,
                single(policy, key, cost, mode, scratch),
                mode === 'consume' ? cost : 0,
              )
            : plain(operation, [{ policy, key, cost }], mode, false)
      : answersTo(below)
        ? // A remote store: its results come up the chain to the Decision without a promise per link.
          (operation, policy, key, cost, mode) =>
            direct()
              ? singleDecisionFrom(below, [{ policy, key, cost }], mode)
              : plain(operation, [{ policy, key, cost }], mode, false)
        : (operation, policy, key, cost, mode) => plain(operation, [{ policy, key, cost }], mode, false)
  return decisionEvents(plain, plainOne, storeName, onDecision)
}

/** The limiter's own methods (all but wait, reserve and throttle), over the decision path. */
function limiterMethods<Name extends string>(
  chain: Chain,
  overrides: OverrideCache,
  userStore: Store,
  validate: Validator,
  events: DecisionEvents,
  policies: ReadonlyMap<string, ResolvedPolicy>,
  released: (policyId: string, key: string) => void,
): Omit<Limiter<Name>, WaitingMethod | ListMethod> {
  const store = chain.store

  function decide(
    mode: 'consume' | 'peek',
    a: unknown,
    key?: unknown,
    opts?: ConsumeOptions,
  ): MaybePromise<Decision | LayeredDecision> {
    if (Array.isArray(a)) return events.run(mode, validate.steps(a), mode, true)
    const cost = opts?.cost === undefined ? 1 : opts.cost
    return events.runOne(mode, validate.single(a, key, cost, true), key as string, cost, mode)
  }
  /** A promise of the decision; bad input rejects like any other failure, never throws. */
  function promised(
    mode: 'consume' | 'peek',
    a: unknown,
    key?: unknown,
    opts?: ConsumeOptions,
  ): Promise<Decision | LayeredDecision> {
    try {
      // A promise the chain answered with comes back as it is (Promise.resolve of a native promise).
      return Promise.resolve(decide(mode, a, key, opts))
    } catch (error) {
      return Promise.reject(error)
    }
  }

  function consume(policy: Name, key: string, options?: ConsumeOptions): Promise<Decision>
  function consume(checks: readonly Check<Name>[]): Promise<LayeredDecision>
  function consume(
    a: Name | readonly Check<Name>[],
    key?: string,
    opts?: ConsumeOptions,
  ): Promise<Decision | LayeredDecision> {
    // One check (the common call) goes straight down the decision path; the rest, bad input
    // included, through `decide`, which tells layered checks from single ones.
    if (typeof a !== 'string') return promised('consume', a, key, opts)
    try {
      const cost = opts?.cost === undefined ? 1 : opts.cost
      const policy = validate.single(a, key, cost, true)
      return Promise.resolve(events.runOne('consume', policy, key as string, cost, 'consume'))
    } catch (error) {
      return Promise.reject(error)
    }
  }
  function peek(policy: Name, key: string, options?: ConsumeOptions): Promise<Decision>
  function peek(checks: readonly Check<Name>[]): Promise<LayeredDecision>
  function peek(
    a: Name | readonly Check<Name>[],
    key?: string,
    opts?: ConsumeOptions,
  ): Promise<Decision | LayeredDecision> {
    return promised('peek', a, key, opts)
  }
  function decideNow(policy: Name, key: string, options?: ConsumeOptions): MaybePromise<Decision>
  function decideNow(checks: readonly Check<Name>[]): MaybePromise<LayeredDecision>
  function decideNow(
    a: Name | readonly Check<Name>[],
    key?: string,
    opts?: ConsumeOptions,
  ): MaybePromise<Decision | LayeredDecision> {
    return decide('consume', a, key, opts)
  }

  /** Releasing a lease frees units a waiter of this process may fit in now. */
  const freed = (s: Step): void => released(s.policy.id, s.key)

  const methods: Omit<Limiter<Name>, WaitingMethod | ListMethod> = {
    store: userStore,
    policies: Object.fromEntries(policies) as Record<Name, ResolvedPolicy>,
    consume,
    peek,
    decide: decideNow,
    consumeSync(policy, key, opts) {
      const cost = opts?.cost === undefined ? 1 : opts.cost
      const d = events.runOne('consume', validate.single(policy, key, cost, true), key, cost, 'consume')
      if (isPending(d)) {
        // The store has the call; its answer is not ours to return. Settled, never left unhandled.
        d.catch(() => {})
        throw new InvalidOptionsError(
          `consumeSync needs an in-process store; the ${userStore.name} store is asynchronous, use consume`,
        )
      }
      return d
    },
    async refund(policy, key, amount = 1) {
      await store.refund([validate.step(policy, key, amount)])
    },
    async reset(policy, key) {
      await store.reset([validate.step(policy, key)])
    },
    async block(policy, key, duration) {
      const durationMs = parseDuration(duration, 'block duration')
      await store.block([validate.step(policy, key)], durationMs)
    },
    async acquire(policy, key, opts) {
      const id = randomUUID()
      const s = validate.step(policy, key, opts?.cost, id, true)
      if (s.policy.algorithm !== 'concurrency') {
        throw new InvalidOptionsError(
          `acquire: policy ${s.policy.name} is ${s.policy.algorithm}; acquire needs a concurrency policy, use consume`,
        )
      }
      const d: AcquireDecision = await events.run('acquire', [s], 'consume', false)
      if (d.allowed) d.lease = lease(s, id)
      return d
    },
    async release(policy, key, leaseId) {
      if (typeof leaseId !== 'string' || leaseId.length === 0)
        throw new InvalidOptionsError('release: pass the lease id from acquire')
      const s = validate.step(policy, key, 1, leaseId)
      await store.refund([s])
      freed(s)
    },
    subscribe: (listener) => events.subscribe(listener),
    health: () => chain.health(),
    ...overrideMethods<Name>(userStore, validate, overrides),
    close: () => {
      overrides.stop()
      return store.close()
    },
  }

  function lease(s: Step, id: string): NonNullable<AcquireDecision['lease']> {
    let done = false
    return {
      id,
      policy: s.policy.name,
      key: s.key,
      cost: s.cost,
      async release() {
        if (done) return
        done = true
        await store.refund([s])
        freed(s)
      },
    }
  }
  return methods
}
