// The limiter's override methods (setOverride, clearOverride, getOverride, listOverrides): checked
// like every other input, written to the store's records, and applied by this limiter at once.
import type { Store } from '../store.js'
import {
  checkOverride,
  type Override,
  type OverrideCache,
  type OverrideOptions,
  overrideOf,
} from './overrides.js'
import type { Limiter } from './types.js'
import type { Validator } from './validate.js'

type OverrideMethod = 'setOverride' | 'clearOverride' | 'getOverride' | 'listOverrides'

export function overrideMethods<Name extends string>(
  store: Store,
  validate: Validator,
  cache: OverrideCache,
): Pick<Limiter<Name>, OverrideMethod> {
  const { records } = store
  return {
    async setOverride(policy: Name, key: string, options: OverrideOptions): Promise<Override> {
      const step = validate.step(policy, key)
      const { stored, ttlMs } = checkOverride(step.policy, options)
      const setAt = store.now()
      const value = { ...stored, setAt }
      await records.put('override', step.policy.id, key, JSON.stringify(value), ttlMs)
      const expiresAt = ttlMs === undefined ? 0 : setAt + ttlMs
      cache.put(step.policy.id, key, value, expiresAt)
      return overrideOf(step.policy.name, {
        subject: key,
        value: JSON.stringify(value),
        ...(expiresAt === 0 ? {} : { expiresAt }),
      })!
    },
    async clearOverride(policy: Name, key: string): Promise<boolean> {
      const step = validate.step(policy, key)
      const removed = await records.delete('override', step.policy.id, key)
      cache.put(step.policy.id, key, undefined, 0)
      return removed
    },
    async getOverride(policy: Name, key: string): Promise<Override | undefined> {
      const step = validate.step(policy, key)
      const record = await records.get('override', step.policy.id, key)
      return record === undefined ? undefined : overrideOf(step.policy.name, record)
    },
    async listOverrides(policy: Name): Promise<Override[]> {
      const p = validate.step(policy, 'listing').policy
      const out: Override[] = []
      for (const record of await records.list('override', p.id)) {
        const o = overrideOf(p.name, record)
        if (o !== undefined) out.push(o)
      }
      return out
    },
  }
}
