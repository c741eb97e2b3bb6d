// The single-policy scripts (apply/<algorithm>) and the layered, refund and block scripts, all
// generated from one source per algorithm, read and write the same stored values: one key's state
// passes between the paths, and every answer is the memory store's.
import { afterAll, describe, expect, it } from 'vitest'
import {
  ALGORITHMS,
  type AlgorithmName,
  type Policy,
  resolvePolicy,
} from '../../../packages/sluice/src/policy.js'
import type { Step, StepResult } from '../../../packages/sluice/src/store.js'
import { memoryStore } from '../../../packages/sluice/src/stores/memory.js'
import { redisStore } from '../../../packages/sluice/src/stores/redis/index.js'
import { freshPrefix, ioredis, storedKeys } from '../../helpers/redis-clients.js'

const client = ioredis()
afterAll(() => client.disconnect())

const policyOf = (algorithm: AlgorithmName, limit: number, ms: number): Policy =>
  algorithm === 'concurrency' ? { algorithm, limit, timeout: ms } : { algorithm, limit, window: ms }

describe('flat and module scripts share stored state', () => {
  for (const algorithm of ALGORITHMS) {
    it(`${algorithm}: single-step (flat) and layered (module) decisions on one key agree with memory`, async () => {
      let x = ALGORITHMS.indexOf(algorithm) + 11
      const rand = (n: number) => {
        x = (x * 1103515245 + 12345) % 2147483648
        return Math.floor((x / 2147483648) * n) // high bits: the low ones of this generator cycle
      }
      let now = 1_700_000_000_000
      const clock = () => now
      const redis = redisStore(client, { prefix: freshPrefix('mixed'), clock: 'client', now: clock })
      const memory = memoryStore({ now: clock })
      const p = resolvePolicy('p', policyOf(algorithm, 3, 1000))
      // Roomy second layer: a layered decision is decided by p, but it runs the module apply script.
      const q = resolvePolicy('q', policyOf(algorithm, 1000, 1000))
      const step = (policy: typeof p, cost: number, lease: string): Step =>
        algorithm === 'concurrency' ? { policy, key: 'k', cost, leaseId: lease } : { policy, key: 'k', cost }
      // How often each path answered allowed / denied / blocked, and how often the state changed hands.
      const seen = new Map<string, number>()
      const count = (label: string) => seen.set(label, (seen.get(label) ?? 0) + 1)
      let last: 'flat' | 'module' | undefined
      for (let i = 0; i < 240; i++) {
        // Forward only: a clock stepping back behind an expiry finds the state gone in Redis but
        // possibly not yet swept in memory (the conformance vectors pin backward clocks).
        now += [0, 1, 40, 150, 400, 900][rand(6)]!
        const lease = `l${rand(4)}`
        const own = step(p, 1 + rand(2), lease)
        const op = rand(20)
        const where = `${algorithm} op ${i} at +${now - 1_700_000_000_000}`
        if (op < 18) {
          const path = op < 9 ? 'flat' : 'module'
          const steps = path === 'flat' ? [own] : [own, step(q, 1, lease)]
          const mode = rand(4) === 0 ? 'peek' : 'consume'
          const got = await redis.apply(steps, mode)
          expect(got, `${where}: ${path} ${mode}`).toEqual(await memory.apply(steps, mode))
          const r = got[0] as StepResult
          count(`${path} ${r.blocked ? 'blocked' : r.allowed ? 'allowed' : 'denied'}`)
          if (mode === 'consume' && r.allowed) {
            if (last !== undefined && last !== path) count('handover')
            last = path
          }
        } else if (op === 18) {
          // The block script; a block longer than the window keeps a dead state under it.
          const ms = 1 + rand(2500)
          await redis.block([own], ms)
          await memory.block([own], ms)
        } else {
          await redis.refund([own])
          await memory.refund([own])
        }
      }
      for (const path of ['flat', 'module'])
        for (const what of ['allowed', 'denied', 'blocked'])
          expect(seen.get(`${path} ${what}`) ?? 0, `${path} ${what}`).toBeGreaterThan(0)
      expect(seen.get('handover') ?? 0).toBeGreaterThan(20)
    })
  }

  for (const algorithm of ALGORITHMS) {
    it(`${algorithm}: the flat path stores the same bytes, block keys and expiries as the module path`, async () => {
      let x = ALGORITHMS.indexOf(algorithm) + 31
      const rand = (n: number) => {
        x = (x * 1103515245 + 12345) % 2147483648
        return Math.floor((x / 2147483648) * n)
      }
      let now = 1_700_000_000_000
      const clock = () => now
      // Twin stores on one server: `flat` decides single steps, `module` the same step layered with
      // a roomy second policy (the apply script); blocks and refunds are module scripts in both.
      const prefixes = { flat: freshPrefix('twin'), module: freshPrefix('twin') }
      const flat = redisStore(client, { prefix: prefixes.flat, clock: 'client', now: clock })
      const module = redisStore(client, { prefix: prefixes.module, clock: 'client', now: clock })
      const p = resolvePolicy('p', policyOf(algorithm, 3, 1000))
      const q = resolvePolicy('q', policyOf(algorithm, 1000, 1000))
      const step = (policy: typeof p, cost: number, lease: string): Step =>
        algorithm === 'concurrency' ? { policy, key: 'k', cost, leaseId: lease } : { policy, key: 'k', cost }
      const stored = (prefix: string) => storedKeys(client, prefix)
      let written = 0
      // Per key: the expiries last seen, and how long the op that set them took (the twins' calls
      // run a few ms apart against the server's real clock).
      let seen = [
        [0, 0],
        [0, 0],
      ]
      const bounds = [0, 0]
      for (let i = 0; i < 200; i++) {
        now += [0, 1, 40, 150, 400, 900][rand(6)]!
        const own = step(p, 1 + rand(2), `l${rand(4)}`)
        const op = rand(10)
        const where = `${algorithm} op ${i} at +${now - 1_700_000_000_000}`
        const started = Date.now()
        if (op < 8) {
          const mode = rand(4) === 0 ? 'peek' : 'consume'
          const [single] = await flat.apply([own], mode)
          const [layered] = await module.apply([own, step(q, 1, own.leaseId ?? '')], mode)
          expect(single, `${where}: ${mode}`).toEqual(layered)
        } else if (op === 8) {
          const ms = 1 + rand(2500)
          await flat.block([own], ms)
          await module.block([own], ms)
        } else {
          await flat.refund([own])
          await module.refund([own])
        }
        const elapsed = Date.now() - started
        const a = await stored(prefixes.flat)
        const b = await stored(prefixes.module)
        for (const [j, what] of ['state', 'block'].entries()) {
          const [typeA, rawA, expiresA] = a[j]!
          const [typeB, rawB, expiresB] = b[j]!
          expect([typeA, rawA], `${where}: ${what} value`).toEqual([typeB, rawB])
          if (expiresA !== seen[j]![0] || expiresB !== seen[j]![1]) bounds[j] = elapsed
          expect(Math.abs(expiresA - expiresB), `${where}: ${what} expiry`).toBeLessThanOrEqual(
            bounds[j]! + 2,
          )
          if (j === 0 && typeA !== 'none') written++
        }
        seen = [
          [a[0]![2], b[0]![2]],
          [a[1]![2], b[1]![2]],
        ]
      }
      expect(written).toBeGreaterThan(50)
    })
  }

  it('concurrency: leases stored out of expiry order (timeout changed, clock stepped back) give the wait memory gives', async () => {
    let now = 2_000_000
    const clock = () => now
    const redis = redisStore(client, { prefix: freshPrefix('mixed'), clock: 'client', now: clock })
    const memory = memoryStore({ now: clock })
    const long = resolvePolicy('c', { algorithm: 'concurrency', limit: 4, timeout: 1000 })
    // The same policy after a config change: new leases expire before the older ones.
    const short = resolvePolicy('c', { algorithm: 'concurrency', limit: 4, timeout: 300 })
    const plan: [number, typeof long, number, string, 'consume' | 'peek'][] = [
      [0, long, 1, 'a', 'consume'], // expires 2_001_000
      [100, short, 1, 'b', 'consume'], // 2_000_400
      [-50, short, 1, 'c', 'consume'], // 2_000_350, the clock stepped back
      [0, short, 3, 'd', 'peek'], // denied until c and b expire (a, stored first, expires last)
      [0, short, 3, 'd', 'consume'],
      [0, long, 1, 'e', 'consume'], // fills the last slot
      [10, short, 1, 'f', 'consume'], // denied: a slot frees when c expires
      [310, short, 1, 'g', 'consume'], // c has expired: the live leases are rewritten without it
      [0, short, 3, 'h', 'peek'],
      [100, long, 4, 'i', 'consume'],
    ]
    const waits: number[] = []
    for (const [move, policy, cost, lease, mode] of plan) {
      now += move
      const steps: Step[] = [{ policy, key: 'k', cost, leaseId: lease }]
      const got = await redis.apply(steps, mode)
      expect(got, `${lease} ${mode} at ${now}`).toEqual(await memory.apply(steps, mode))
      waits.push(got[0]!.retryAfterMs)
    }
    // The out-of-order cases really waited for the earliest expiries, not the stored order.
    expect(waits[3]).toBe(400 - 50)
    expect(waits[6]).toBe(350 - 60)
    expect(waits[8]).toBe(1000 - 370)
  })
})
