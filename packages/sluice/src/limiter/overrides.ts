// Per-key overrides: a different limit, window or burst for one (policy, key), or `unlimited`, or
// `blocked`, kept as `override` records in the store (src/records.ts) so every instance sharing it
// applies them. Each limiter keeps a local copy of the records, refreshed when the store's records
// version moves (polled every `staleness`), and the link at the head of the chain applies them.
import { type Duration, parseDuration } from '../duration.js'
import { InvalidOptionsError, InvalidPolicyError, UnsupportedError } from '../errors.js'
import { checkKnownKeys, isOptionsObject, keysOf } from '../options.js'
import { type ResolvedPolicy, resolvePolicy } from '../policy.js'
import type { StoreRecord, StoreRecords } from '../records.js'
import type { RuntimeLists } from '../runtime-lists.js'
import {
  forwardStore,
  isPending,
  type MaybePromise,
  type Step,
  type StepResult,
  type Store,
} from '../store.js'

/** What `setOverride` takes: at least one field. */
export interface OverrideOptions {
  /** A different limit for this key (rate policies: per window; concurrency: leases). */
  limit?: number
  /** A different window for this key (rate policies). */
  window?: Duration
  /** A different burst for this key (token-bucket and gcra). */
  burst?: number
  /** Admit every request of this key without a store call. */
  unlimited?: boolean
  /** Deny every request of this key with `reason: 'blocked'`, without a store call. */
  blocked?: boolean
  /** The override removes itself after this long. */
  ttl?: Duration
  /** Why, for people: kept and shown (at most 256 characters). */
  reason?: string
}

/** An override as stored and listed. */
export interface Override {
  /** The policy's name as the limiter knows it. */
  policy: string
  key: string
  limit?: number
  windowMs?: number
  burst?: number
  unlimited?: true
  blocked?: true
  reason?: string
  /** When it was set, ms since the epoch (store clock). */
  setAt?: number
  /** When it ends by itself (ms since the epoch, store clock); absent: never. */
  expiresAt?: number
}

const OPTION_KEYS = keysOf<OverrideOptions>({
  limit: true,
  window: true,
  burst: true,
  unlimited: true,
  blocked: true,
  ttl: true,
  reason: true,
})

/** What a blocked override without a ttl answers as its retry time: one minute, asked again then. */
export const BLOCKED_RETRY_MS = 60_000
/** The staleness when the limiter is given none. */
export const DEFAULT_STALENESS_MS = 1000
const MAX_REASON_LENGTH = 256

/** The stored form (the record's JSON value). */
interface Stored {
  limit?: number
  windowMs?: number
  burst?: number
  unlimited?: true
  blocked?: true
  reason?: string
  setAt?: number
}

const isCount = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) > 0

/**
 * Check `options` for `policy` and turn them into the stored form and the ttl (ms). Bad input
 * throws a typed error; nothing is written by the caller then.
 */
export function checkOverride(
  policy: ResolvedPolicy,
  options: unknown,
): { stored: Stored; ttlMs: number | undefined; derived: ResolvedPolicy | undefined } {
  const where = `setOverride(${JSON.stringify(policy.name)})`
  if (!isOptionsObject(options))
    throw new InvalidOptionsError(
      `${where}: options must be an object like { limit: 100 } or { blocked: true }`,
    )
  checkKnownKeys(where, options, OPTION_KEYS)
  const o = options as OverrideOptions
  const stored: Stored = {}
  for (const flag of ['unlimited', 'blocked'] as const) {
    if (o[flag] === undefined || o[flag] === false) continue
    if (o[flag] !== true) throw new InvalidOptionsError(`${where}.${flag}: must be true or false`)
    stored[flag] = true
  }
  if (stored.unlimited && stored.blocked)
    throw new InvalidOptionsError(`${where}: unlimited and blocked contradict each other; set one`)
  for (const field of ['limit', 'burst'] as const) {
    if (o[field] === undefined) continue
    if (!isCount(o[field]))
      throw new InvalidPolicyError(
        `${where}.${field}: must be a whole number above 0, got ${JSON.stringify(o[field])}`,
      )
    stored[field] = o[field]
  }
  if (o.window !== undefined) stored.windowMs = parseDuration(o.window, `${where}.window`)
  const ttlMs = o.ttl === undefined ? undefined : parseDuration(o.ttl, `${where}.ttl`)
  if (o.reason !== undefined) {
    if (typeof o.reason !== 'string' || o.reason.length > MAX_REASON_LENGTH)
      throw new InvalidOptionsError(
        `${where}.reason: must be text of at most ${MAX_REASON_LENGTH} characters`,
      )
    stored.reason = o.reason
  }
  const changesParameters =
    stored.limit !== undefined || stored.windowMs !== undefined || stored.burst !== undefined
  if (!changesParameters && !stored.unlimited && !stored.blocked)
    throw new InvalidOptionsError(
      `${where}: say what the override does: limit, window, burst, unlimited or blocked`,
    )
  if (changesParameters && (stored.unlimited || stored.blocked))
    throw new InvalidOptionsError(
      `${where}: an unlimited or blocked key has no limit to change; set limit, window and burst, or unlimited or blocked`,
    )
  const derived = changesParameters ? derivedPolicy(policy, stored, where) : undefined
  return { stored, ttlMs, derived }
}

/**
 * `policy` with the override's parameters and the same storage id, so the key's counts carry over
 * (docs/policies.md#when-the-parameters-change). Throws for what an override cannot change.
 */
function derivedPolicy(policy: ResolvedPolicy, stored: Stored, where: string): ResolvedPolicy {
  if (policy.syncEveryMs !== undefined)
    throw new InvalidOptionsError(
      `${where}: a hybrid policy counts on its own parameters in every instance; only unlimited or blocked override it`,
    )
  if (policy.algorithm === 'concurrency' && (stored.windowMs !== undefined || stored.burst !== undefined))
    throw new InvalidOptionsError(`${where}: a concurrency policy takes only limit (or unlimited or blocked)`)
  if (policy.calendar !== undefined && stored.windowMs !== undefined)
    throw new InvalidOptionsError(
      `${where}.window: a calendar policy's windows are the calendar's periods; override its limit only`,
    )
  if (policy.scope === 'global' && stored.windowMs !== undefined)
    throw new InvalidOptionsError(
      `${where}.window: a global policy's windows are counted alike in every region; override its limit only`,
    )
  const usesBurst = policy.algorithm === 'token-bucket' || policy.algorithm === 'gcra'
  if (!usesBurst && stored.burst !== undefined)
    throw new InvalidPolicyError(`${where}.burst: only token-bucket and gcra take a burst`)
  const limit = stored.limit ?? policy.limit
  const windowMs = stored.windowMs ?? policy.windowMs
  // A bucket keeps its own burst unless the override names one; one without a burst follows the limit.
  const burst = stored.burst ?? (usesBurst && policy.capacity !== policy.limit ? policy.capacity : undefined)
  // The same checks a policy gets (limit x window exact, the log's bound), under the same id.
  // The near-limit line is drawn again on the override's capacity.
  const near = policy.nearLimit === undefined ? {} : { nearLimit: policy.nearLimit }
  const shape =
    policy.algorithm === 'concurrency'
      ? { algorithm: 'concurrency' as const, id: policy.id, limit, timeout: windowMs, ...near }
      : {
          algorithm: policy.algorithm,
          id: policy.id,
          limit,
          window: windowMs,
          ...(burst === undefined ? {} : { burst }),
          ...near,
        }
  const checked = resolvePolicy(policy.name, shape)
  return Object.freeze({
    ...policy,
    limit: checked.limit,
    windowMs: checked.windowMs,
    capacity: checked.capacity,
    ...(checked.nearLimitRemaining === undefined ? {} : { nearLimitRemaining: checked.nearLimitRemaining }),
  })
}

/** One override as this limiter applies it. */
interface Entry {
  readonly stored: Stored
  /** 0: never. */
  readonly expiresAt: number
  /** The derived policy of each base policy (policies may share an id), made when first needed. */
  derived?: Map<string, ResolvedPolicy | null>
}

function parseStored(value: string): Stored | undefined {
  try {
    const parsed: unknown = JSON.parse(value)
    return isOptionsObject(parsed) ? (parsed as Stored) : undefined
  } catch {
    return undefined
  }
}

/** An override as callers see it, from its record. */
export function overrideOf(policyName: string, record: StoreRecord): Override | undefined {
  const stored = parseStored(record.value)
  if (stored === undefined) return undefined
  const out: Override = { policy: policyName, key: record.subject }
  for (const field of ['limit', 'windowMs', 'burst', 'reason', 'setAt'] as const)
    if (stored[field] !== undefined) (out as unknown as Record<string, unknown>)[field] = stored[field]
  if (stored.unlimited) out.unlimited = true
  if (stored.blocked) out.blocked = true
  if (record.expiresAt !== undefined) out.expiresAt = record.expiresAt
  return out
}

export interface OverrideCacheOptions {
  readonly records: StoreRecords
  /** Every storage id the limiter's policies use. */
  readonly policyIds: readonly string[]
  readonly stalenessMs: number
  /** Poll the records version (false for an in-process store: every change goes through this process). */
  readonly poll: boolean
  /** The store's clock: expiry is judged on it. */
  now(): number
  /** A key's override changed: forget what was cached about its units (the deny cache). */
  changed(policyId: string, key: string): void
  /** The run-time allow and deny entries (records too): read with the overrides, at each new version. */
  readonly lists?: RuntimeLists
}

/**
 * The limiter's copy of the store's override records. `size` is 0 while no override is known, so
 * the head link costs one comparison then. A failing poll keeps the last copy (and is counted in
 * `failures`); a store without records stops the polling.
 */
export class OverrideCache {
  private sets = new Map<string, Map<string, Entry>>()
  size = 0
  failures = 0
  lastError: unknown
  private version: string | undefined
  private timer: ReturnType<typeof setInterval> | undefined
  private refreshing: Promise<void> | undefined
  /** Moves with every change made here: a refresh that started before one does not overwrite it. */
  private generation = 0
  private stopped = false
  constructor(private readonly options: OverrideCacheOptions) {}

  start(): void {
    void this.refresh()
    if (!this.options.poll) return
    // The timer holds the copy weakly: a limiter dropped without close() (the service replaces its
    // limiter on every reload, over the same store) stops polling once it is collected.
    const ref = new WeakRef(this)
    const timer: ReturnType<typeof setInterval> = setInterval(() => {
      const cache = ref.deref()
      if (cache === undefined) clearInterval(timer)
      else void cache.refresh()
    }, this.options.stalenessMs)
    timer.unref()
    this.timer = timer
  }

  stop(): void {
    this.stopped = true
    if (this.timer !== undefined) clearInterval(this.timer)
    this.timer = undefined
  }

  /** Read the version; when it moved, every policy's overrides. Never rejects. */
  refresh(): Promise<void> {
    this.refreshing ??= this.load().finally(() => {
      this.refreshing = undefined
    })
    return this.refreshing
  }

  private async load(): Promise<void> {
    const { records, policyIds } = this.options
    const generation = this.generation
    try {
      const version = await records.version()
      if (version === this.version) return
      // A store where no record was ever put has nothing to read: a fresh store pays one read.
      const nothing = version === ''
      const [lists] = await Promise.all([
        nothing ? policyIds.map(() => []) : Promise.all(policyIds.map((id) => records.list('override', id))),
        this.options.lists?.read(records, policyIds, nothing),
      ])
      if (this.stopped || generation !== this.generation) return
      const next = new Map<string, Map<string, Entry>>()
      let size = 0
      policyIds.forEach((id, i) => {
        const set = new Map<string, Entry>()
        for (const record of lists[i]!) {
          const stored = parseStored(record.value)
          if (stored === undefined) continue
          set.set(record.subject, { stored, expiresAt: record.expiresAt ?? 0 })
        }
        if (set.size > 0) next.set(id, set)
        size += set.size
      })
      const before = this.sets
      this.sets = next
      this.size = size
      this.version = version
      this.notifyChanges(before, next)
    } catch (error) {
      if (error instanceof UnsupportedError) {
        this.stop()
        return
      }
      this.failures++
      this.lastError = error
    }
  }

  private notifyChanges(
    before: Map<string, Map<string, Entry>>,
    after: Map<string, Map<string, Entry>>,
  ): void {
    for (const [id, set] of before)
      for (const [key, entry] of set) {
        const now = after.get(id)?.get(key)
        if (now === undefined || JSON.stringify(now.stored) !== JSON.stringify(entry.stored))
          this.options.changed(id, key)
      }
    for (const [id, set] of after)
      for (const key of set.keys()) if (!before.get(id)?.has(key)) this.options.changed(id, key)
  }

  /** A change made through this limiter: applied here at once. */
  put(policyId: string, key: string, stored: Stored | undefined, expiresAt: number): void {
    this.generation++
    let set = this.sets.get(policyId)
    const had = set?.delete(key) ?? false
    if (had) this.size--
    if (stored !== undefined) {
      if (set === undefined) {
        set = new Map()
        this.sets.set(policyId, set)
      }
      set.set(key, { stored, expiresAt })
      this.size++
    }
    this.options.changed(policyId, key)
  }

  /**
   * The policy to decide `key` under: `policy` itself (no override), its derived policy, or
   * 'unlimited' / 'blocked' with the ms the block has left (BLOCKED_RETRY_MS without a ttl).
   */
  lookup(
    policy: ResolvedPolicy,
    key: string,
  ): ResolvedPolicy | { readonly unlimited: true } | { readonly blockedMs: number } {
    const set = this.sets.get(policy.id)
    const entry = set?.get(key)
    if (entry === undefined) return policy
    let blockedMs = BLOCKED_RETRY_MS
    if (entry.expiresAt !== 0) {
      const left = entry.expiresAt - this.options.now()
      if (left <= 0) {
        // Ended by itself: what was cached under it (a denial) ends with it.
        set!.delete(key)
        this.size--
        this.options.changed(policy.id, key)
        return policy
      }
      blockedMs = left
    }
    if (entry.stored.unlimited) return UNLIMITED
    if (entry.stored.blocked) return { blockedMs }
    entry.derived ??= new Map()
    let derived = entry.derived.get(policy.name)
    if (derived === undefined) {
      try {
        derived = derivedPolicy(policy, entry.stored, `override of ${policy.name}`)
      } catch {
        // Set for another shape of this policy (another instance's config): not one this one can apply.
        derived = null
      }
      entry.derived.set(policy.name, derived)
    }
    return derived ?? policy
  }
}

const UNLIMITED = Object.freeze({ unlimited: true as const })

/** What the head link answers for an unlimited or blocked step, without the store. */
function localResult(
  policy: ResolvedPolicy,
  applied: { unlimited: true } | { blockedMs: number },
): StepResult {
  if ('unlimited' in applied)
    return {
      allowed: true,
      remaining: policy.capacity,
      resetMs: 0,
      retryAfterMs: 0,
      blocked: false,
      override: true,
    }
  const ms = Math.ceil(applied.blockedMs)
  return { allowed: false, remaining: 0, resetMs: ms, retryAfterMs: ms, blocked: true, override: true }
}

/**
 * The link at the head of the chain that applies overrides: a step of a key with an override goes
 * down under its derived policy (same id), or is answered here (unlimited, blocked). A layered check
 * with a blocked layer commits nothing: the other layers are only peeked.
 */
export function overrideStore(inner: Store, cache: OverrideCache): Store {
  /** The steps as the store must see them, or undefined when no step has an override. */
  function mapped(steps: readonly Step[]): (Step | StepResult)[] | undefined {
    let out: (Step | StepResult)[] | undefined
    for (let i = 0; i < steps.length; i++) {
      const s = steps[i]!
      const applied = cache.lookup(s.policy, s.key)
      if (applied === s.policy) {
        if (out !== undefined) out.push(s)
        continue
      }
      out ??= steps.slice(0, i)
      out.push('algorithm' in applied ? { ...s, policy: applied } : localResult(s.policy, applied))
    }
    return out
  }
  const isStep = (x: Step | StepResult): x is Step => 'policy' in x
  /** Steps whose override changes parameters or ends a unit count: what refund, charge, block, reset send. */
  function forChanges(steps: readonly Step[]): Step[] {
    const out: Step[] = []
    for (const s of steps) {
      const applied = cache.lookup(s.policy, s.key)
      if (applied === s.policy) out.push(s)
      else if ('algorithm' in applied) out.push({ ...s, policy: applied })
      // Unlimited and blocked keys spent nothing here: nothing to give back or charge.
    }
    return out
  }
  return forwardStore(inner, {
    apply(steps, mode): MaybePromise<StepResult[]> {
      if (cache.size === 0) return inner.apply(steps, mode)
      const plan = mapped(steps)
      if (plan === undefined) return inner.apply(steps, mode)
      const down = plan.filter(isStep)
      const marked = (results: StepResult[]): StepResult[] => {
        let j = 0
        return plan.map((p, i) => {
          if (!isStep(p)) return p
          const r = results[j++]!
          if (p.policy !== steps[i]!.policy) {
            r.override = true
            r.capacity = p.policy.capacity
          }
          return r
        })
      }
      if (down.length === 0) return marked([])
      // All or nothing: a layer denied here means nothing is committed below.
      const denied = plan.some((p) => !isStep(p) && !p.allowed)
      const answer = inner.apply(down, denied ? 'peek' : mode)
      return isPending(answer) ? answer.then(marked) : marked(answer)
    },
    refund(steps) {
      if (cache.size === 0) return inner.refund(steps)
      const down = forChanges(steps)
      return down.length === 0 ? Promise.resolve() : inner.refund(down)
    },
    charge(steps) {
      if (cache.size === 0) return inner.charge(steps)
      const down = forChanges(steps)
      return down.length === 0 ? Promise.resolve() : inner.charge(down)
    },
  })
}
