// A policy's storage id: stores and caches key its counters on `id` (default: the name), decisions
// and events show the name. Memory and Redis alike, deny cache on and off.
import { afterAll, describe, expect, it } from 'vitest'
import { InvalidPolicyError } from '../../packages/sluice/src/errors.js'
import { createLimiter, type DecisionEvent } from '../../packages/sluice/src/limiter.js'
import { resolvePolicy } from '../../packages/sluice/src/policy.js'
import type { Store } from '../../packages/sluice/src/store.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { redisStore } from '../../packages/sluice/src/stores/redis/index.js'
import { freshPrefix, ioredis } from '../helpers/redis-clients.js'

const client = ioredis()
afterAll(() => client.disconnect())

const stores: [string, () => Store, boolean][] = [
  ['memory', () => memoryStore(), false],
  ['redis', () => redisStore(client, { prefix: freshPrefix('policy-id') }), false],
  ['redis, deny cache off', () => redisStore(client, { prefix: freshPrefix('policy-id') }), true],
]

describe.each(stores)('policy id on %s', (_label, makeStore, noCache) => {
  it('two names with one id share counters; decisions and events carry the name', async () => {
    const events: DecisionEvent[] = []
    const limiter = createLimiter({
      store: makeStore(),
      ...(noCache ? { localDenyCache: false } : {}),
      onDecision: (e) => events.push(e),
      policies: {
        api: { algorithm: 'fixed-window', limit: 3, window: '1m', id: 'shared.v1' },
        'api.pro': { algorithm: 'fixed-window', limit: 3, window: '1m', id: 'shared.v1' },
        other: { algorithm: 'fixed-window', limit: 3, window: '1m' },
      },
    })
    expect((await limiter.consume('api', 'k')).remaining).toBe(2)
    const d = await limiter.consume('api.pro', 'k')
    expect(d.remaining).toBe(1)
    expect(d.policy).toBe('api.pro')
    expect((await limiter.consume('other', 'k')).remaining).toBe(2)
    await limiter.consume('api', 'k')
    const denied = await limiter.consume('api.pro', 'k')
    expect(denied.allowed).toBe(false)
    expect(denied.policy).toBe('api.pro')
    // Denied under one name: the deny cache answers for the id, under the other name too.
    expect((await limiter.consume('api', 'k')).allowed).toBe(false)
    expect(events.map((e) => e.decision.policy)).toEqual(['api', 'api.pro', 'other', 'api', 'api.pro', 'api'])
    await limiter.reset('api', 'k')
    expect((await limiter.consume('api.pro', 'k')).remaining).toBe(2)
    await limiter.close()
  })

  it('a new id starts fresh counters for the same name', async () => {
    const store = makeStore()
    const before = createLimiter({
      store,
      policies: { api: { algorithm: 'token-bucket', limit: 2, window: '1m', id: 'api.a' } },
    })
    await before.consume('api', 'k')
    await before.consume('api', 'k')
    expect((await before.consume('api', 'k')).allowed).toBe(false)
    const after = createLimiter({
      store,
      policies: { api: { algorithm: 'token-bucket', limit: 2, window: '1m', id: 'api.b' } },
    })
    expect((await after.consume('api', 'k')).remaining).toBe(1)
    await after.close()
  })
})

describe('policy id validation', () => {
  it('defaults to the name', () => {
    expect(resolvePolicy('api', { algorithm: 'gcra', limit: 1, window: '1s' }).id).toBe('api')
  })

  it('a policy with an id may have any name without control characters (the service names Envoy limits as written)', () => {
    const p = resolvePolicy('envoy:edge.path_/v1/{x} *', {
      algorithm: 'gcra',
      limit: 1,
      window: '1s',
      id: 'e.1',
    })
    expect(p).toMatchObject({ name: 'envoy:edge.path_/v1/{x} *', id: 'e.1' })
    // Without an id the name is the id, so it keeps the id's characters.
    expect(() => resolvePolicy('a b', { algorithm: 'gcra', limit: 1, window: '1s' })).toThrow(
      /give the policy an id/,
    )
    for (const name of ['', 'a\nb', 'x'.repeat(257)])
      expect(() => resolvePolicy(name, { algorithm: 'gcra', limit: 1, window: '1s', id: 'ok' })).toThrow(
        InvalidPolicyError,
      )
  })

  it.each([
    ['', 'empty'],
    ['a b', 'a space'],
    ['x{y}', 'braces'],
    [42, 'a number'],
  ])('refuses %j (%s) with InvalidPolicyError', (id, _what) => {
    expect(() => resolvePolicy('api', { algorithm: 'gcra', limit: 1, window: '1s', id })).toThrow(
      InvalidPolicyError,
    )
  })
})
