// The flat scripts' compact wire format (scripts/one-prelude.lua): the cost signed by mode (peek:
// -1 - cost), the 3-integer reply (r1 = allowed ? remaining : -1 - remaining, r2 = resetMs,
// r3 = blocked ? -1 - retryAfterMs : retryAfterMs), the slack they derive from the clock argument,
// and the '%d' / PSETEX forms they write with, which must store what the module scripts store.
import { createHash } from 'node:crypto'
import { afterAll, describe, expect, it } from 'vitest'
import {
  ALGORITHMS,
  type AlgorithmName,
  type Policy,
  resolvePolicy,
} from '../../../packages/sluice/src/policy.js'
import type { Step } from '../../../packages/sluice/src/store.js'
import { memoryStore } from '../../../packages/sluice/src/stores/memory.js'
import { redisStore } from '../../../packages/sluice/src/stores/redis/index.js'
import { luaSources } from '../../../packages/sluice/src/stores/redis/lua.generated.js'
import { freshPrefix, ioredis, storedKeys } from '../../helpers/redis-clients.js'

const client = ioredis()
afterAll(() => client.disconnect())

const policyOf = (algorithm: AlgorithmName, limit: number, ms: number): Policy =>
  algorithm === 'concurrency' ? { algorithm, limit, timeout: ms } : { algorithm, limit, window: ms }

const stepOf = (
  algorithm: AlgorithmName,
  policy: ReturnType<typeof resolvePolicy>,
  cost: number,
  lease = 'l1',
) =>
  (algorithm === 'concurrency'
    ? { policy, key: 'k', cost, leaseId: lease }
    : { policy, key: 'k', cost }) as Step

const stored = (prefix: string) => storedKeys(client, prefix)

describe('flat script wire format', () => {
  it('raw reply: allowed, denied and blocked decisions and a peek of cost 0, as the header says', async () => {
    const source = luaSources['apply/fixed-window']
    const sha = createHash('sha1').update(source).digest('hex')
    await client.script('LOAD', source)
    const prefix = freshPrefix('wire')
    const keys = [`${prefix}:{k}:p`, `${prefix}:{k}:p:block`]
    // Client clock 1_000_000; limit 2 per 10 s; per decision a run of one: the count (1, then -1:
    // the key again), limit, windowMs, no calendar period (-1), signed cost.
    const call = (...costs: number[]) =>
      client.evalsha(
        sha,
        keys.length * costs.length,
        ...costs.flatMap(() => keys),
        '1000000',
        ...costs.flatMap((c, i) => [i === 0 ? '1' : '-1', '2', '10000', '-1', String(c)]),
      )
    // consume 1 (allowed, 1 left), peek 0 (-1: allowed, 1 left), consume 1 (allowed, 0 left),
    // peek 0 (allowed with 0 left: r1 = 0), peek 1 (-2: denied, r1 = -1), consume 1 (denied).
    expect(await call(1, -1, 1, -1, -2, 1)).toEqual([
      1, 10000, 0, 1, 10000, 0, 0, 10000, 0, 0, 10000, 0, -1, 10000, 10000, -1, 10000, 10000,
    ])
    // A block until 1_030_000 (written as the block script writes it): every decision is denied
    // and blocked, r1 = -1 and r3 = -1 - the block's wait (longer than the window's).
    await client.set(keys[1]!, '1030000', 'PX', 60_000)
    expect(await call(-1, 1)).toEqual([-1, 30000, -30001, -1, 30000, -30001])
    // The peeks and the denied consumes wrote nothing: the count is the two admitted units (start:count:span).
    expect(await client.get(keys[0]!)).toBe('1000000:2:10000')
  })

  it('runs: a count of decisions that share the arguments after it, each with its own keys and reply', async () => {
    const source = luaSources['apply/fixed-window']
    const sha = createHash('sha1').update(source).digest('hex')
    await client.script('LOAD', source)
    const prefix = freshPrefix('runs')
    const keysOf = (s: string) => [`${prefix}:{k}:${s}`, `${prefix}:{k}:${s}:block`]
    // Keys a, b, a, a, c: a run of two consumes of cost 1 under limit 2 per 10 s (a, b), the same
    // for a again (a count of -1: a key named before in the call), a peek of cost 0 on a again (-1),
    // then a run of one consume under limit 5 (c).
    const keys = ['a', 'b', 'a', 'a', 'c'].flatMap(keysOf)
    const reply = await client.evalsha(
      sha,
      keys.length,
      ...keys,
      '1000000',
      ...['2', '2', '10000', '-1', '1'],
      ...['-1', '2', '10000', '-1', '1'],
      ...['-1', '2', '10000', '-1', '-1'],
      ...['1', '5', '10000', '-1', '1'],
    )
    // The second decision on a sees the first's write (its MGET value is not reused).
    expect(reply).toEqual([1, 10000, 0, 1, 10000, 0, 0, 10000, 0, 0, 10000, 0, 4, 10000, 0])
    expect(await client.get(keysOf('a')[0]!)).toBe('1000000:2:10000')
    expect(await client.get(keysOf('b')[0]!)).toBe('1000000:1:10000')
    expect(await client.get(keysOf('c')[0]!)).toBe('1000000:1:10000')
  })

  it('coalesced runs: equal decisions in a row and a change of policy, cost or mode between them, as the memory store decides', async () => {
    const now = 7_000_000
    const clock = () => now
    const prefix = freshPrefix('runs-store')
    const coalesced = redisStore(client, { prefix, clock: 'client', now: clock })
    const memory = memoryStore({ now: clock })
    const two = resolvePolicy('two', { algorithm: 'token-bucket', limit: 2, window: 10_000 })
    const three = resolvePolicy('three', { algorithm: 'token-bucket', limit: 3, window: 10_000 })
    const plan: [ReturnType<typeof resolvePolicy>, string, number, 'consume' | 'peek'][] = [
      [two, 'a', 1, 'consume'],
      [two, 'a', 1, 'consume'],
      [two, 'b', 1, 'consume'],
      [two, 'a', 1, 'consume'],
      [three, 'a', 1, 'consume'],
      [three, 'a', 1, 'consume'],
      [three, 'a', 2, 'consume'],
      [three, 'a', 0, 'peek'],
      [three, 'a', 0, 'peek'],
      [two, 'b', 1, 'consume'],
      [two, 'b', 1, 'consume'],
    ]
    const steps = plan.map(([policy, key, cost]): Step => ({ policy, key, cost }))
    const got = await Promise.all(plan.map(([, , , mode], i) => coalesced.apply([steps[i]!], mode)))
    for (const [i, [policy, key, cost, mode]] of plan.entries()) {
      const expected = await memory.apply([steps[i]!], mode)
      expect(got[i], `#${i} ${policy.name} ${key} ${mode} ${cost}`).toEqual(expected)
    }
    expect(got.map((r) => r[0]!.allowed)).toEqual([
      true,
      true,
      true,
      false,
      true,
      true,
      false,
      true,
      true,
      true,
      false,
    ])
  })

  for (const algorithm of ALGORITHMS) {
    it(`${algorithm}: peek of cost 0 and decisions under block() through the flat path, alone and coalesced`, async () => {
      let now = 5_000_000
      const clock = () => now
      const prefix = freshPrefix('wire')
      const single = redisStore(client, { prefix, clock: 'client', now: clock, coalesce: false })
      const coalesced = redisStore(client, { prefix, clock: 'client', now: clock })
      const memory = memoryStore({ now: clock })
      const p = resolvePolicy('p', policyOf(algorithm, 2, 10_000))
      const step = (cost: number) => stepOf(algorithm, p, cost, `l${now}`)
      const same = async (steps: Step[], mode: 'consume' | 'peek', what: string) => {
        const got = await single.apply(steps, mode)
        expect(got, what).toEqual(await memory.apply(steps, mode))
        return got[0]!
      }

      // A peek of cost 0 on an empty key: allowed with everything left, and it stores nothing.
      expect(await same([step(0)], 'peek', 'peek 0, empty')).toMatchObject({ allowed: true, remaining: 2 })
      expect(await client.exists(`${prefix}:{k}:p`)).toBe(0)
      await same([step(2)], 'consume', 'drain')
      const before = await stored(prefix)
      now += 1
      // Drained: a peek of cost 0 is still allowed (remaining 0), a peek of cost 1 is not.
      const zero = await same([step(0)], 'peek', 'peek 0, drained')
      expect(zero).toMatchObject({ allowed: true, remaining: 0, blocked: false })
      const one = await same([step(1)], 'peek', 'peek 1, drained')
      expect(one.allowed).toBe(false)
      expect(one.retryAfterMs).toBeGreaterThan(0)
      expect(await stored(prefix), 'peeks commit nothing').toEqual(before)

      // Blocked for 60 s (longer than the window): denied, blocked, the block's wait.
      await single.block([step(1)], 60_000)
      await memory.block([step(1)], 60_000)
      now += 1_000
      for (const mode of ['peek', 'consume'] as const) {
        const held = await same([step(1)], mode, `${mode} while blocked`)
        expect(held).toEqual({
          allowed: false,
          remaining: 0,
          resetMs: 59_000,
          retryAfterMs: 59_000,
          blocked: true,
        })
        const free = await same([step(0)], mode, `${mode} 0 while blocked`)
        expect(free).toMatchObject({ allowed: false, blocked: true, retryAfterMs: 59_000 })
      }

      // Coalesced: one flat call carries these decisions, in order, each its own encoding.
      now += 60_000
      await single.reset([step(1)])
      await memory.reset([step(1)])
      const plan: [number, 'consume' | 'peek'][] = [
        [0, 'peek'],
        [1, 'consume'],
        [1, 'peek'],
        [1, 'consume'],
        [0, 'peek'],
        [1, 'consume'],
        [2, 'peek'],
      ]
      const steps = plan.map(([cost]) => step(cost))
      const got = await Promise.all(plan.map(([, mode], i) => coalesced.apply([steps[i]!], mode)))
      for (const [i, [cost, mode]] of plan.entries()) {
        expect(got[i], `coalesced ${mode} ${cost} (#${i})`).toEqual(await memory.apply([steps[i]!], mode))
      }
      expect(got.map((r) => r[0]!.allowed)).toEqual([true, true, true, true, true, false, false])
      // Blocked for longer than any wait of the units; five decisions in one tick leave as flat calls
      // of two, two and one: all blocked.
      await coalesced.block([step(1)], 60_000)
      await memory.block([step(1)], 60_000)
      const held: [number, 'consume' | 'peek'][] = [
        [0, 'peek'],
        [1, 'consume'],
        [1, 'peek'],
        [2, 'peek'],
        [1, 'consume'],
      ]
      const heldSteps = held.map(([cost]) => step(cost))
      const during = await Promise.all(held.map(([, mode], i) => coalesced.apply([heldSteps[i]!], mode)))
      for (const [i, [cost, mode]] of held.entries()) {
        expect(during[i], `coalesced ${mode} ${cost} while blocked`).toEqual(
          await memory.apply([heldSteps[i]!], mode),
        )
        expect(during[i]![0]).toMatchObject({ allowed: false, blocked: true, retryAfterMs: 60_000 })
      }
    })
  }

  for (const algorithm of ALGORITHMS) {
    it(`${algorithm}: numbers near 2^52 and TTLs of centuries are stored as the module path stores them (client clock slack included)`, async () => {
      // The flat scripts write with '%d' and PSETEX, the module scripts with '%.0f' and SET ... PX;
      // the flat scripts derive the client clock slack, the module scripts are given it.
      let now = 2 ** 52
      const clock = () => now
      const prefixes = { flat: freshPrefix('big'), module: freshPrefix('big') }
      const flat = redisStore(client, { prefix: prefixes.flat, clock: 'client', now: clock })
      const module = redisStore(client, { prefix: prefixes.module, clock: 'client', now: clock })
      const memory = memoryStore({ now: clock })
      // A window of 2^45 ms (about 1,100 years), so the values have many digits; q is the roomy second
      // layer that sends the same step through the module apply script (limit x window <= 2^50).
      const p = resolvePolicy('p', policyOf(algorithm, 3, 2 ** 45))
      const q = resolvePolicy('q', policyOf(algorithm, 8, 2 ** 45))
      let compared = 0
      for (const [i, move] of [0, 1, 7, 2 ** 40, 3, 2 ** 44].entries()) {
        now += move
        const mode = i === 2 ? 'peek' : 'consume'
        const own = stepOf(algorithm, p, 1, `l${i}`)
        const started = Date.now()
        const [single] = await flat.apply([own], mode)
        const [layered] = await module.apply([own, stepOf(algorithm, q, 1, `l${i}`)], mode)
        const elapsed = Date.now() - started
        expect(single, `op ${i}`).toEqual(layered)
        expect(single, `op ${i}`).toEqual((await memory.apply([own], mode))[0])
        const a = await stored(prefixes.flat)
        const b = await stored(prefixes.module)
        for (const j of [0, 1]) {
          expect(a[j]!.slice(0, 2), `op ${i} key ${j}`).toEqual(b[j]!.slice(0, 2))
          expect(Math.abs(a[j]![2] - b[j]![2]), `op ${i} key ${j} expiry`).toBeLessThanOrEqual(elapsed + 2)
          if (a[j]![0] !== 'none') compared++
        }
      }
      expect(compared).toBeGreaterThanOrEqual(5)
    })
  }
})
