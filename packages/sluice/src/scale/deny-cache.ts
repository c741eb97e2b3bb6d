// The local deny cache: once the store denies a key with a known retry time, this instance denies
// that policy+key itself until then, so a hammered key costs the store nothing. Bounded in entries.
import { InvalidOptionsError } from '../errors.js'
import { checkKnownKeys, isOptionsObject, keysOf } from '../options.js'
import type { Step, StepResult } from '../store.js'

export interface LocalDenyCacheOptions {
  /** Most keys remembered at once; the oldest entry is dropped first. Default 10,000. */
  maxKeys?: number
}

const OPTION_KEYS = keysOf<LocalDenyCacheOptions>({ maxKeys: true })

/**
 * Check `createLimiter`'s `localDenyCache` option (`true`, `false`, or the options), whether or not
 * the limiter will use a cache; returns the options. Throws `InvalidOptionsError`.
 */
export function denyCacheOptions(
  value: unknown,
  where = 'createLimiter: localDenyCache',
): LocalDenyCacheOptions {
  if (value === undefined || typeof value === 'boolean') return {}
  if (!isOptionsObject(value))
    throw new InvalidOptionsError(`${where}: use true, false or { maxKeys }, got ${JSON.stringify(value)}`)
  checkKnownKeys(where, value, OPTION_KEYS)
  const { maxKeys } = value as { maxKeys?: unknown }
  if (maxKeys !== undefined && (typeof maxKeys !== 'number' || !Number.isSafeInteger(maxKeys) || maxKeys < 1))
    throw new InvalidOptionsError(`${where}.maxKeys: a whole number >= 1, got ${JSON.stringify(maxKeys)}`)
  return value as LocalDenyCacheOptions
}

interface Entry {
  /** Local clock (ms) from which the store may admit again. */
  until: number
  /** Local clock (ms) at which the key is back to full. */
  fullAt: number
  /** Smallest cost known to be denied until `until`; a cheaper request may pass earlier. */
  cost: number
  blocked: boolean
}

/**
 * Remembered denials by policy and key. `remember` takes the time the request was *sent*, so a
 * cached denial never outlives the store's own (the store decided after that moment).
 */
export class LocalDenyCache {
  readonly maxKeys: number
  private readonly entries = new Map<string, Map<string, Entry>>()
  private size = 0
  /** Bumped by every invalidation: an answer sent before it must not be cached after it. */
  epoch = 0

  constructor(options: LocalDenyCacheOptions = {}) {
    this.maxKeys = denyCacheOptions(options, 'LocalDenyCache').maxKeys ?? 10_000
  }

  get entryCount(): number {
    return this.size
  }

  /** The cached denial for a step at local time `now`, or undefined when the store must decide. */
  lookup(step: Step, now: number): StepResult | undefined {
    const byKey = this.entries.get(step.policy.id)
    if (byKey === undefined) return undefined
    const e = byKey.get(step.key)
    if (e === undefined) return undefined
    if (now >= e.until) {
      byKey.delete(step.key)
      this.size--
      return undefined
    }
    if (step.cost < e.cost) return undefined
    return {
      allowed: false,
      remaining: 0,
      resetMs: Math.max(0, Math.ceil(e.fullAt - now)),
      retryAfterMs: Math.ceil(e.until - now),
      blocked: e.blocked,
    }
  }

  /** Record a store answer for `step`, sent at local time `sentAt` with the cache at `epoch`. */
  remember(step: Step, result: StepResult, sentAt: number, epoch: number): void {
    if (epoch !== this.epoch) return
    if (result.allowed || result.degraded || result.unavailable || result.retryAfterMs <= 0) return
    let byKey = this.entries.get(step.policy.id)
    if (byKey === undefined) {
      byKey = new Map()
      this.entries.set(step.policy.id, byKey)
    }
    const existing = byKey.get(step.key)
    if (existing !== undefined) byKey.delete(step.key)
    else if (this.size >= this.maxKeys) this.evictOne()
    else this.size++
    // A re-insert moves the key to the back: the front of each map is its least recently denied key.
    byKey.set(step.key, {
      until: sentAt + result.retryAfterMs,
      fullAt: sentAt + Math.max(result.resetMs, result.retryAfterMs),
      cost: step.cost,
      blocked: result.blocked,
    })
  }

  /** Forget a policy+key (refund, reset, block) and void answers still in flight. */
  forget(step: Step): void {
    this.epoch++
    const byKey = this.entries.get(step.policy.id)
    if (byKey?.delete(step.key)) this.size--
  }

  private evictOne(): void {
    // Drop the oldest entry of the first policy holding any (per policy, maps keep insertion order).
    for (const byKey of this.entries.values()) {
      const oldest = byKey.keys().next()
      if (!oldest.done) {
        byKey.delete(oldest.value)
        return
      }
    }
  }
}
