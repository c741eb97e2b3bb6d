// The memcached store itself: options checked at construction, keys of any bytes, every item with
// an expiry, layered checks that give back what they took, and store failures as StoreError.
import { afterAll, describe, expect, inject, it } from 'vitest'
import { InvalidOptionsError, StoreClosedError, StoreError } from '../../../packages/sluice/src/errors.js'
import { createLimiter } from '../../../packages/sluice/src/limiter.js'
import { resolvePolicy } from '../../../packages/sluice/src/policy.js'
import type { Step } from '../../../packages/sluice/src/store.js'
import { itemKey, memcachedStore } from '../../../packages/sluice/src/stores/memcached/index.js'
import { freshPrefix, memcachedClient } from '../../helpers/memcached-clients.js'
import { dumpKeys, itemTtl } from '../../helpers/memcached-text-protocol.js'

const client = memcachedClient()
const other = memcachedClient()
afterAll(() => {
  client.close()
  other.close()
})
const port = () => inject('memcached').port

describe('memcachedStore options', () => {
  it.each([
    [{ prefix: '' }, 'empty prefix'],
    [{ prefix: 'a b' }, 'a space'],
    [{ prefix: 'a:b' }, 'a colon'],
    [{ prefix: 'x'.repeat(65) }, 'too long'],
    [{ prefix: 'é' }, 'not ASCII'],
    [{ clock: 'server' }, "clock 'server'"],
    [{ now: 5 }, 'now not a function'],
    [{ prfix: 'x' }, 'a misspelled key'],
  ])('refuses %j (%s) with InvalidOptionsError', (options, _what) => {
    expect(() => memcachedStore(client, options as never)).toThrow(InvalidOptionsError)
  })

  it('says "did you mean" for a misspelled key', () => {
    expect(() => memcachedStore(client, { prfix: 'x' } as never)).toThrow(/did you mean 'prefix'/)
  })

  it('refuses something that is not a memjs client', () => {
    expect(() => memcachedStore({} as never)).toThrow(InvalidOptionsError)
  })

  it('after close(), calls fail with StoreClosedError', async () => {
    const store = memcachedStore(client, { prefix: freshPrefix('closed') })
    await store.close()
    const step = {
      policy: resolvePolicy('p', { algorithm: 'gcra', limit: 1, window: '1s' }),
      key: 'k',
      cost: 1,
    }
    await expect(store.apply([step], 'consume')).rejects.toBeInstanceOf(StoreClosedError)
  })
})

describe('keys of any bytes', () => {
  const policy = resolvePolicy('p', { algorithm: 'fixed-window', limit: 2, window: '1m' })
  const subjects = [
    'plain',
    'with space',
    'line\nbreak',
    'nul\u0000byte',
    '"quotes" \'and\' `ticks`',
    'ключ-日本語-🙂',
    '\uD800 lone surrogate',
    '#looks-hashed',
    'x'.repeat(10_000),
    'y'.repeat(249),
    '',
  ]

  it('every subject gets its own counter, under a key memcached accepts', async () => {
    const prefix = freshPrefix('bytes')
    const store = memcachedStore(client, { prefix })
    for (const key of subjects) {
      const step = { policy, key, cost: 1 }
      expect((await store.apply([step], 'consume'))[0], JSON.stringify(key.slice(0, 20))).toMatchObject({
        allowed: true,
        remaining: 1,
      })
    }
    const keys = new Set(subjects.map((key) => itemKey(prefix, { policy, key, cost: 1 })))
    expect(keys.size).toBe(subjects.length)
    for (const k of keys) {
      expect(Buffer.byteLength(k), k).toBeLessThanOrEqual(250)
      expect(k, 'printable ASCII, no space').toMatch(/^[!-~]+$/)
    }
    // The second consume of each sees only its own first one.
    for (const key of subjects)
      expect((await store.apply([{ policy, key, cost: 1 }], 'consume'))[0]!.remaining).toBe(0)
  })

  it('no two policies or subjects share an item, hashed or not', () => {
    const a = resolvePolicy('a', { algorithm: 'gcra', limit: 1, window: '1s' })
    const ab = resolvePolicy('a.b', { algorithm: 'gcra', limit: 1, window: '1s' })
    const keys = [
      itemKey('s', { policy: a, key: 'b:c', cost: 1 }),
      itemKey('s', { policy: ab, key: 'c', cost: 1 }),
      itemKey('s', { policy: a, key: 'x'.repeat(300), cost: 1 }),
      itemKey('s', { policy: ab, key: 'x'.repeat(300), cost: 1 }),
      itemKey('s', { policy: a, key: ' ', cost: 1 }),
      itemKey('s', { policy: a, key: '#', cost: 1 }),
    ]
    expect(new Set(keys).size).toBe(keys.length)
  })

  it('keys on policy.id: two names with one id share an item', () => {
    const one = resolvePolicy('api', { algorithm: 'gcra', limit: 1, window: '1s', id: 'shared' })
    const two = resolvePolicy('api.pro', { algorithm: 'gcra', limit: 1, window: '1s', id: 'shared' })
    expect(itemKey('s', { policy: one, key: 'k', cost: 1 })).toBe(
      itemKey('s', { policy: two, key: 'k', cost: 1 }),
    )
  })
})

describe('items carry an expiry', () => {
  it('every item written by every operation expires, a little after its state does', async () => {
    const prefix = freshPrefix('ttl')
    const store = memcachedStore(client, { prefix })
    const policies = {
      fw: resolvePolicy('fw', { algorithm: 'fixed-window', limit: 5, window: '10s' }),
      swl: resolvePolicy('swl', { algorithm: 'sliding-window-log', limit: 5, window: '10s' }),
      swc: resolvePolicy('swc', { algorithm: 'sliding-window-counter', limit: 5, window: '10s' }),
      tb: resolvePolicy('tb', { algorithm: 'token-bucket', limit: 5, window: '10s' }),
      gcra: resolvePolicy('gcra', { algorithm: 'gcra', limit: 5, window: '10s' }),
      conc: resolvePolicy('conc', { algorithm: 'concurrency', limit: 5, timeout: '10s' }),
    }
    for (const policy of Object.values(policies)) {
      const step: Step = { policy, key: 'k', cost: 1, leaseId: 'l1' }
      const [first] = await store.apply([step], 'consume')
      await store.apply(
        [
          { ...step, key: 'layered' },
          { ...step, key: 'layered-2' },
        ],
        'consume',
      )
      await store.refund([{ ...step, key: 'layered' }])
      await store.block([{ ...step, key: 'blocked' }], 30_000)
      const ttl = await itemTtl(port(), itemKey(prefix, step))
      // The state means something for resetMs (up to two windows for the sliding counter); the item
      // lives that plus 2 s of slack.
      const meaningful = Math.ceil(first!.resetMs / 1000)
      expect(ttl, policy.name).toBeGreaterThanOrEqual(meaningful)
      expect(ttl, policy.name).toBeLessThanOrEqual(meaningful + 2)
      const blockTtl = await itemTtl(port(), itemKey(prefix, { ...step, key: 'blocked' }))
      expect(blockTtl, `${policy.name} block`).toBeGreaterThan(29)
      expect(blockTtl, `${policy.name} block`).toBeLessThanOrEqual(33)
    }
    const dumped = await dumpKeys(port(), prefix)
    expect(dumped.length).toBe(Object.keys(policies).length * 4)
    for (const { key, exp } of dumped) expect(exp, key).toBeGreaterThan(0)
  })

  it('a window longer than 30 days is written as a Unix time, not as a short relative TTL', async () => {
    const prefix = freshPrefix('ttl-long')
    const store = memcachedStore(client, { prefix })
    const step = {
      policy: resolvePolicy('p', { algorithm: 'fixed-window', limit: 5, window: '40d' }),
      key: 'k',
      cost: 1,
    }
    await store.apply([step], 'consume')
    const ttl = await itemTtl(port(), itemKey(prefix, step))
    expect(ttl).toBeGreaterThan(39 * 86_400)
    // The window and the store's slack (2 s), on memcached's own clock, which ticks once a second
    // and falls behind the wall clock on a loaded machine: a minute of room, far below a second window.
    expect(ttl).toBeLessThanOrEqual(40 * 86_400 + 60)
  })
})

describe('the remembered last write (one CAS per admit instead of a read and a CAS)', () => {
  const policy = resolvePolicy('p', { algorithm: 'fixed-window', limit: 3, window: '1m' })
  const step = { policy, key: 'k', cost: 1 }

  it("another process's writes are never missed: its consume, its reset, its block", async () => {
    const prefix = freshPrefix('remembered')
    const a = memcachedStore(client, { prefix })
    const b = memcachedStore(other, { prefix })
    expect((await a.apply([step], 'consume'))[0]!.remaining).toBe(2)
    expect((await b.apply([step], 'consume'))[0]!.remaining).toBe(1)
    // a remembers the item as it wrote it (remaining 2); its CAS loses and it decides on a re-read.
    expect((await a.apply([step], 'consume'))[0]!.remaining).toBe(0)
    expect((await a.apply([step], 'consume'))[0]!.allowed).toBe(false)
    // A denial is never taken from the remembered item: b's reset frees the key for a at once.
    await b.reset([step])
    expect((await a.apply([step], 'consume'))[0]).toMatchObject({ allowed: true, remaining: 2 })
    await b.block([step], 60_000)
    expect((await a.apply([step], 'consume'))[0]).toMatchObject({ allowed: false, blocked: true })
  })
})

describe('layered checks: check, commit, give back', () => {
  it('under contention from two clients, no layer admits past its limit and nothing is left charged', async () => {
    const prefix = freshPrefix('layered')
    const stores = [memcachedStore(client, { prefix }), memcachedStore(other, { prefix })]
    const user = resolvePolicy('user', { algorithm: 'fixed-window', limit: 1, window: '1m' })
    const global = resolvePolicy('global', { algorithm: 'fixed-window', limit: 150, window: '1m' })
    const decisions = 400
    let next = 0
    const admittedUsers: string[] = []
    let failed = 0
    // The user layer first: a decision that loses the global CAS has committed its user layer, and
    // must give it back.
    const lane = async (store: (typeof stores)[number]) => {
      while (next < decisions) {
        const key = `u${next++}`
        try {
          const [u, g] = await store.apply(
            [
              { policy: user, key, cost: 1 },
              { policy: global, key: 'all', cost: 1 },
            ],
            'consume',
          )
          // A denied layered check reports the layers that would admit as they are (allowed).
          if (u!.allowed && g!.allowed) admittedUsers.push(key)
        } catch (error) {
          expect(error).toBeInstanceOf(StoreError)
          failed++
        }
      }
    }
    await Promise.all(stores.flatMap((store) => Array.from({ length: 32 }, () => lane(store))))
    expect(admittedUsers.length).toBe(150)
    expect(failed).toBe(0)
    const [g] = await stores[0]!.apply([{ policy: global, key: 'all', cost: 1 }], 'peek')
    expect(g!.remaining).toBe(0)
    // Exactly the admitted users hold a unit; every denied one was given back.
    const admitted = new Set(admittedUsers)
    for (let i = 0; i < decisions; i++) {
      const [u] = await stores[0]!.apply([{ policy: user, key: `u${i}`, cost: 1 }], 'peek')
      expect(u!.remaining, `u${i}`).toBe(admitted.has(`u${i}`) ? 0 : 1)
    }
  })
})

describe('failures are StoreErrors, and the limiter fails over', () => {
  it('a dead server: apply rejects with StoreError; a limiter answers per onStoreError', async () => {
    const dead = memcachedClient('127.0.0.1:1')
    const store = memcachedStore(dead, { prefix: freshPrefix('dead') })
    const step = {
      policy: resolvePolicy('p', { algorithm: 'gcra', limit: 1, window: '1s' }),
      key: 'k',
      cost: 1,
    }
    await expect(store.apply([step], 'consume')).rejects.toBeInstanceOf(StoreError)
    await expect(store.apply([step, { ...step, key: 'j' }], 'consume')).rejects.toBeInstanceOf(StoreError)
    const limiter = createLimiter({
      store,
      policies: {
        open: { algorithm: 'gcra', limit: 1, window: '1s' },
        closed: { algorithm: 'gcra', limit: 1, window: '1s', onStoreError: 'closed' },
      },
    })
    expect(await limiter.consume('open', 'k')).toMatchObject({ allowed: true, degraded: true })
    expect(await limiter.consume('closed', 'k')).toMatchObject({
      allowed: false,
      reason: 'store_unavailable',
    })
    await limiter.close()
    dead.close()
  })

  it('an item too large for memcached (over its 1 MB item limit) is a StoreError, not a silent admit', async () => {
    const store = memcachedStore(client, { prefix: freshPrefix('big') })
    const policy = resolvePolicy('p', { algorithm: 'concurrency', limit: 2, timeout: '1m' })
    const leaseId = 'x'.repeat(1_100_000)
    const error = await store
      .apply([{ policy, key: 'k', cost: 1, leaseId }], 'consume')
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(StoreError)
    expect((error as Error).message).toMatch(/too large/)
  })
})
