// multiRegionStore in one process over two real redis-servers (two regions, no latency): options
// are checked at construction; region-scope policies never cross regions; a global limit starts
// split in equal shares, the idle region hands its share to the busy one after a sync (once, even
// with two of its instances planning the same hand-over), and a region without share denies,
// charging nothing.
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { conformanceCases } from '../../../packages/sluice/src/conformance/run.js'
import { createLimiter } from '../../../packages/sluice/src/limiter.js'
import { multiRegionStore } from '../../../packages/sluice/src/stores/multi-region/index.js'
import { GIVE } from '../../../packages/sluice/src/stores/multi-region/scripts.js'
import { type RedisServer, startRedis } from '../../helpers/redis-harness.js'

const invalidOptions = expect.objectContaining({ code: 'SLUICE_INVALID_OPTIONS' })

describe('multiRegionStore', () => {
  let servers: RedisServer[] = []
  let eu: Redis
  let us: Redis
  beforeAll(async () => {
    servers = await Promise.all([startRedis(), startRedis()])
    eu = new Redis(servers[0]!.port, '127.0.0.1')
    us = new Redis(servers[1]!.port, '127.0.0.1')
  })
  afterAll(async () => {
    eu.disconnect()
    us.disconnect()
    await Promise.all(servers.map((s) => s.stop()))
  })

  it("records are the local region's: the records conformance cases pass, and the other region does not see them", async () => {
    let n = 0
    const cases = conformanceCases(
      () => multiRegionStore({ region: 'eu', regions: { eu, us }, prefix: `mrr${Date.now()}x${n++}` }),
      { vectors: [], throughLimiter: false },
    )
    expect(cases.map((c) => c.name).every((name) => name.startsWith('records:'))).toBe(true)
    for (const c of cases) await c.run()
    const prefix = `mrl${Date.now()}`
    const here = multiRegionStore({ region: 'eu', regions: { eu, us }, prefix })
    const there = multiRegionStore({ region: 'us', regions: { eu, us }, prefix })
    try {
      await here.records.put('override', 'api', 'k', 'v')
      expect(await here.records.get('override', 'api', 'k')).toEqual({ subject: 'k', value: 'v' })
      expect(await there.records.get('override', 'api', 'k')).toBeUndefined()
    } finally {
      await here.close()
      await there.close()
    }
  })

  it('refuses bad options at construction', () => {
    const regions = { eu, us }
    expect(() => multiRegionStore({ region: 'ap', regions })).toThrow(invalidOptions)
    expect(() => multiRegionStore({ region: 'eu', regions, syncEvry: '1s' } as never)).toThrow(/syncEvery/)
    expect(() => multiRegionStore({ region: 'eu', regions: {} })).toThrow(invalidOptions)
    expect(() => multiRegionStore({ region: 'eu', regions: { eu, us: {} as never } })).toThrow(invalidOptions)
    expect(() => multiRegionStore({ region: 'eu', regions: { eu, 'u s': us } })).toThrow(invalidOptions)
    expect(() => multiRegionStore({ region: 'eu', regions, syncEvery: '1s', staleAfter: '1s' })).toThrow(
      invalidOptions,
    )
    expect(() => multiRegionStore({ region: 'eu', regions, syncEvery: 'often' })).toThrow(
      expect.objectContaining({ code: 'SLUICE_INVALID_DURATION' }),
    )
  })

  it('a global limit starts in equal shares; the idle region hands its share to the busy one once; a region without share charges nothing', async () => {
    const prefix = `mrs${Date.now()}`
    const policies = {
      api: { algorithm: 'sliding-window-counter', limit: 5, window: '1h', scope: 'global' },
      login: { algorithm: 'sliding-window-counter', limit: 5, window: '1h' },
    } as const
    // staleAfter is also the exchange calls' timeout: 5 s, so a loaded machine (a 100 ms stall, the
    // default 5 x syncEvery) cannot turn a sync this test relies on into a timed-out one. syncEvery
    // 1h: the test runs every sync itself.
    const options = { regions: { eu, us }, syncEvery: '1h', staleAfter: '2h', prefix }
    const storeEu = multiRegionStore({ region: 'eu', ...options })
    const storeUs = multiRegionStore({ region: 'us', ...options })
    const storeUs2 = multiRegionStore({ region: 'us', ...options })
    // A decision that timed out would be answered open (allowed): 5 s so a loaded machine cannot.
    const a = createLimiter({ store: storeEu, policies, localDenyCache: false, storeTimeout: '5s' })
    const b = createLimiter({ store: storeUs, policies, localDenyCache: false, storeTimeout: '5s' })
    try {
      // 5 split in two: eu (first by name) 3, us 2.
      for (let i = 0; i < 3; i++) {
        expect((await a.consume('api', 'k')).allowed).toBe(true)
        expect((await a.consume('login', 'k')).allowed).toBe(true)
      }
      expect(await a.consume('api', 'k')).toMatchObject({ allowed: false, reason: 'limit' })
      expect(await b.peek('api', 'k')).toMatchObject({ allowed: true, remaining: 2 })
      // eu publishes its demand; both us instances read it and plan the same hand-over of us's 2,
      // which only one of them applies (the other's planned version is gone); eu reads it.
      await storeEu.sync()
      await Promise.all([storeUs.sync(), storeUs2.sync()])
      await storeEu.sync()
      const ledger = await us.hgetall(`${prefix}:mrs:{k}:api`)
      expect(ledger).toEqual({ v: '1', 'g:eu': '2' })
      expect(storeUs.syncs).toBe(1)
      expect(storeEu.shares()).toEqual([{ policy: 'api', keys: 1, shareOfLimit: 1 }])
      expect(storeUs.shares()).toEqual([{ policy: 'api', keys: 1, shareOfLimit: 0 }])
      expect((await a.consume('api', 'k')).allowed).toBe(true)
      expect((await a.consume('api', 'k')).allowed).toBe(true)
      expect(await a.consume('api', 'k')).toMatchObject({ allowed: false, remaining: 0 })
      // us holds nothing of the global limit now; its regional one is untouched.
      const denied = await b.consume('api', 'k')
      expect(denied).toMatchObject({ allowed: false, reason: 'limit', remaining: 0 })
      expect(denied.retryAfterMs).toBeGreaterThan(0)
      expect(await b.peek('login', 'k')).toMatchObject({ allowed: true, remaining: 5 })
      // A layered check with the global layer at no share charges no layer.
      const layered = await b.consume([
        { policy: 'login', key: 'k' },
        { policy: 'api', key: 'k' },
      ])
      expect(layered).toMatchObject({ allowed: false, deniedBy: 'api' })
      expect(await b.peek('login', 'k')).toMatchObject({ remaining: 5 })
      // What each region stored is what it admitted.
      await storeEu.sync()
      await storeUs.sync()
      const index = Math.floor(Date.now() / 3_600_000)
      const sum = async (c: Redis) => (await c.hvals(`${prefix}:mr:{k}:api:${index}`)).map(Number)
      expect(await sum(eu)).toEqual([5])
      expect(await sum(us)).toEqual([])
      expect(storeEu.regions()).toMatchObject([
        { region: 'eu', local: true, stale: false },
        { region: 'us', local: false, stale: false },
      ])
    } finally {
      await a.close()
      await b.close()
      await storeUs2.close()
    }
  })

  it('a hand-over is applied only on the ledger version it was planned on', async () => {
    const ledger = `mrv${Date.now()}:mrs:{k}:api`
    // Two instances of one region plan on version 0; the first applies, the second is refused.
    expect(await us.eval(GIVE, 1, ledger, '0', '60000', 'eu', '2')).toBe(1)
    expect(await us.eval(GIVE, 1, ledger, '0', '60000', 'eu', '2')).toBe(-2)
    expect(await us.hgetall(ledger)).toEqual({ v: '1', 'g:eu': '2' })
    // Planned on the version it read again: applied, cumulative.
    expect(await us.eval(GIVE, 1, ledger, '1', '60000', 'eu', '1', 'ap', '3')).toBe(2)
    expect(await us.hgetall(ledger)).toEqual({ v: '2', 'g:eu': '3', 'g:ap': '3' })
    expect(await us.pttl(ledger)).toBeGreaterThan(0)
  })
})
