// The allow and deny lists of a policy, as options: every bad value is a SLUICE_INVALID_LIST at
// createLimiter (nothing is created), and the decisions of the in-process paths (consumeSync, wait).
import { describe, expect, it } from 'vitest'
import { InvalidListError } from '../../packages/sluice/src/errors.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { MAX_LIST_ENTRIES } from '../../packages/sluice/src/lists.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'

const base = { algorithm: 'fixed-window', limit: 1, window: '1m' } as const

function refused(lists: Record<string, unknown>): unknown {
  try {
    createLimiter({ policies: { api: { ...base, ...lists } as never } })
  } catch (error) {
    return error
  }
  return undefined
}

describe('allow and deny list options', () => {
  it.each([
    ['a list that is not an object', { deny: ['1.2.3.4'] }, 'policies.api.deny'],
    ['null', { allow: null }, 'policies.api.allow'],
    ['an unknown key, with a did-you-mean', { deny: { ip: ['1.2.3.4'] } }, "did you mean 'ips'"],
    ['entries that are not a list', { deny: { keys: 'mallory' } }, 'policies.api.deny.keys'],
    ['an empty key', { allow: { keys: [''] } }, 'policies.api.allow.keys[0]'],
    ['a key that is not a string', { allow: { keys: [42] } }, 'policies.api.allow.keys[0]'],
    ['an over-long key', { allow: { keys: ['k'.repeat(1025)] } }, 'policies.api.allow.keys[0]'],
    ['an empty address', { deny: { ips: [''] } }, 'policies.api.deny.ips[0]'],
    ['a bad address', { deny: { ips: ['10.0.0.256'] } }, 'policies.api.deny.ips[0]'],
    ['a bad CIDR', { deny: { ips: ['10.0.0.0/x'] } }, 'policies.api.deny.ips[0]'],
    ['an empty prefix length', { deny: { ips: ['10.0.0.0/'] } }, 'policies.api.deny.ips[0]'],
    ['an IPv4 prefix out of range', { deny: { ips: ['10.0.0.0/33'] } }, 'policies.api.deny.ips[0]'],
    ['an IPv6 prefix out of range', { deny: { ips: ['2001:db8::/129'] } }, 'policies.api.deny.ips[0]'],
    ['a negative prefix', { deny: { ips: ['10.0.0.0/-1'] } }, 'policies.api.deny.ips[0]'],
    [
      `more than ${MAX_LIST_ENTRIES} entries`,
      { deny: { keys: Array.from({ length: MAX_LIST_ENTRIES + 1 }, (_, i) => `k${i}`) } },
      `at most ${MAX_LIST_ENTRIES}`,
    ],
  ])('refuses %s with SLUICE_INVALID_LIST', (_, lists, named) => {
    const error = refused(lists)
    expect(error).toBeInstanceOf(InvalidListError)
    expect(error).toMatchObject({ code: 'SLUICE_INVALID_LIST' })
    expect((error as Error).message).toContain(named)
  })

  it('takes the bound itself, named ranges, and empty lists', () => {
    expect(
      refused({
        deny: { keys: Array.from({ length: MAX_LIST_ENTRIES }, (_, i) => `k${i}`), ips: [] },
        allow: { ips: ['loopback', '::ffff:10.0.0.1', '[2001:db8::1]'] },
      }),
    ).toBeUndefined()
  })

  it('concurrency policies take lists too', async () => {
    const limiter = createLimiter({
      policies: { jobs: { algorithm: 'concurrency', limit: 1, timeout: '1m', deny: { keys: ['bad'] } } },
    })
    expect(await limiter.acquire('jobs', 'bad')).toMatchObject({ allowed: false, reason: 'denied' })
    const held = await limiter.acquire('jobs', 'good')
    expect(held).toMatchObject({ allowed: true })
    expect(await limiter.acquire('jobs', 'good')).toMatchObject({ allowed: false, reason: 'limit' })
  })

  it('answers synchronously on the memory store, and wait does not wait on a denied key', async () => {
    const limiter = createLimiter({
      store: memoryStore(),
      policies: { api: { ...base, deny: { keys: ['bad'] }, allow: { keys: ['good'] } } },
    })
    expect(limiter.consumeSync('api', 'bad')).toMatchObject({ allowed: false, reason: 'denied' })
    expect(limiter.consumeSync('api', 'good')).toMatchObject({ allowed: true, listed: 'allow' })
    expect(limiter.consumeSync('api', 'other')).toMatchObject({ allowed: true, remaining: 0 })
    expect(limiter.consumeSync('api', 'other')).toMatchObject({ allowed: false, reason: 'limit' })
    // A denied key never fits: the wait answers at once rather than waiting out maxWait.
    expect(await limiter.wait('api', 'bad', { maxWaitMs: 3_600_000 })).toMatchObject({
      allowed: false,
      reason: 'denied',
    })
  })
})
