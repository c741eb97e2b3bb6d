// Overrides across limiters sharing one real Redis: an override set through one applies in the
// other after its next version poll (staleness), a key with no override costs no extra store call,
// a failing poll keeps the last copy, and close() stops the polling.
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import type { StoreRecords } from '../../packages/sluice/src/records.js'
import { forwardStore, type Store } from '../../packages/sluice/src/store.js'
import { redisStore } from '../../packages/sluice/src/stores/redis/index.js'
import { type RedisServer, startRedis } from '../helpers/redis-harness.js'

const policies = { api: { algorithm: 'fixed-window', limit: 2, window: '1m' } } as const

/** Resolves once `check` holds, polling every 10 ms; fails after `boundMs`. */
async function eventually(check: () => Promise<boolean>, boundMs = 5_000): Promise<number> {
  const started = Date.now()
  for (;;) {
    if (await check()) return Date.now() - started
    if (Date.now() - started > boundMs) throw new Error(`not within ${boundMs} ms`)
    await new Promise((done) => setTimeout(done, 10))
  }
}

/** `store` with its records calls counted (and `version` failing while `failing` is set). */
function counted(store: Store) {
  const calls = { version: 0, list: 0, get: 0 }
  const state = { failing: false }
  const records: StoreRecords = {
    ...store.records,
    version: async () => {
      calls.version++
      if (state.failing) throw new Error('connection lost (test)')
      return store.records.version()
    },
    list: async (kind, id) => {
      calls.list++
      return store.records.list(kind, id)
    },
    get: async (kind, id, subject) => {
      calls.get++
      return store.records.get(kind, id, subject)
    },
  }
  return { store: forwardStore(store, { records }), calls, state }
}

describe('override staleness on one real Redis', () => {
  let server: RedisServer
  let client: Redis
  beforeAll(async () => {
    server = await startRedis()
    client = new Redis(server.port, '127.0.0.1')
  })
  afterAll(async () => {
    client.disconnect()
    await server.stop()
  })

  it('an override set through one limiter applies in the other after its poll; clearing it too', async () => {
    const prefix = `st${Date.now()}`
    const a = createLimiter({ store: redisStore(client, { prefix }), policies, staleness: '50ms' })
    const b = createLimiter({ store: redisStore(client, { prefix }), policies, staleness: '50ms' })
    try {
      await a.setOverride('api', 'vip', { limit: 100 })
      // Through a: at once.
      expect(await a.peek('api', 'vip')).toMatchObject({ limit: 100, override: true })
      // Through b: within its staleness (bounded wait, polled).
      await eventually(async () => (await b.peek('api', 'vip')).limit === 100)
      await a.clearOverride('api', 'vip')
      expect((await a.peek('api', 'vip')).limit).toBe(2)
      await eventually(async () => (await b.peek('api', 'vip')).limit === 2)
    } finally {
      await a.close()
      await b.close()
    }
  })

  it('decisions read no records: the poll reads the version, and the lists only when it moved', async () => {
    const prefix = `sc${Date.now()}`
    const { store, calls } = counted(redisStore(client, { prefix }))
    const limiter = createLimiter({ store, policies, staleness: '20ms' })
    const writer = createLimiter({ store: redisStore(client, { prefix }), policies })
    try {
      await eventually(async () => calls.version >= 3)
      const listsBefore = calls.list
      for (let i = 0; i < 20; i++) await limiter.consume('api', `k${i}`)
      await eventually(async () => calls.version >= 6)
      expect(calls.list).toBe(listsBefore)
      expect(calls.get).toBe(0)
      await writer.setOverride('api', 'k1', { unlimited: true })
      await eventually(async () => calls.list > listsBefore)
      await eventually(async () => (await limiter.consume('api', 'k1')).override === true)
      const gets = calls.get
      for (let i = 0; i < 5; i++) expect((await limiter.consume('api', 'k1')).allowed).toBe(true)
      expect(calls.get).toBe(gets)
    } finally {
      await limiter.close()
      await writer.close()
    }
  })

  it('a failing poll keeps the last copy; close() stops the polling', async () => {
    const prefix = `sf${Date.now()}`
    const { store, calls, state } = counted(redisStore(client, { prefix }))
    const writer = createLimiter({ store: redisStore(client, { prefix }), policies })
    await writer.setOverride('api', 'k', { limit: 9 })
    const limiter = createLimiter({ store, policies, staleness: '20ms' })
    try {
      await eventually(async () => (await limiter.peek('api', 'k')).limit === 9)
      state.failing = true
      const failingFrom = calls.version
      await writer.clearOverride('api', 'k')
      await eventually(async () => calls.version >= failingFrom + 3)
      expect((await limiter.peek('api', 'k')).limit).toBe(9)
      state.failing = false
      await eventually(async () => (await limiter.peek('api', 'k')).limit === 2)
    } finally {
      await limiter.close()
      await writer.close()
    }
    const afterClose = calls.version
    await new Promise((done) => setTimeout(done, 100))
    expect(calls.version).toBe(afterClose)
  })
})
