// Differential test: random sequences of operations on the memory store and on the memcached store,
// same fake clock, including blocks, refunds, resets and layered all-or-nothing steps: every
// StepResult must match. Then the same through two limiters, deny cache on and off.
import { afterAll, describe, expect, it } from 'vitest'
import { createLimiter } from '../../src/limiter.js'
import { type Policy, type ResolvedPolicy, resolvePolicy } from '../../src/policy.js'
import type { Step } from '../../src/store.js'
import { memcachedStore } from '../../src/stores/memcached/index.js'
import { memoryStore } from '../../src/stores/memory.js'
import { freshPrefix, memcachedClient } from './clients.js'

const client = memcachedClient()
afterAll(() => client.close())

/** Small deterministic PRNG (mulberry32) so a failure can be replayed from its seed. */
function random(seed: number): () => number {
  let a = seed
  return () => {
    a = (a + 0x6d2b79f5) | 0
    let t = Math.imul(a ^ (a >>> 15), 1 | a)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const policies = {
  fw: { algorithm: 'fixed-window', limit: 5, window: 1000 },
  swl: { algorithm: 'sliding-window-log', limit: 6, window: 1000 },
  swc: { algorithm: 'sliding-window-counter', limit: 7, window: 1000 },
  tb: { algorithm: 'token-bucket', limit: 10, window: 1000, burst: 4 },
  gcra: { algorithm: 'gcra', limit: 7, window: 333, burst: 7 },
  conc: { algorithm: 'concurrency', limit: 3, timeout: 500 },
} as const satisfies Record<string, Policy>
type Name = keyof typeof policies
const names = Object.keys(policies) as Name[]
const resolved = Object.fromEntries(names.map((n) => [n, resolvePolicy(n, policies[n])])) as Record<
  Name,
  ResolvedPolicy
>
// Subjects memcached cannot take as they are: a space, unicode, a NUL.
const keys = ['a', 'user 1', 'ключ\u0000']

async function compareStores(seed: number, only: readonly Name[]): Promise<void> {
  const rand = random(seed)
  let clock = 1_700_000_000_000 + Math.floor(rand() * 5000)
  const now = () => clock
  const memory = memoryStore({ now })
  const memcached = memcachedStore(client, { now, prefix: freshPrefix('diff') })
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!
  const log: string[] = []
  for (let i = 0; i < 120; i++) {
    const r = rand()
    clock += Math.floor(r * r * 300)
    const count = rand() < 0.2 ? 2 : 1
    const steps: Step[] = []
    const used = new Set<string>()
    for (let s = 0; s < count; s++) {
      const name = pick(only)
      const key = pick(keys)
      if (used.has(`${name}/${key}`)) continue
      used.add(`${name}/${key}`)
      const policy = resolved[name]
      const cost = rand() < 0.2 ? 2 : 1
      steps.push(
        policy.algorithm === 'concurrency'
          ? { policy, key, cost, leaseId: `l${Math.floor(rand() * 4)}` }
          : { policy, key, cost },
      )
    }
    const op = rand()
    const what = steps.map((s) => `${s.policy.name}/${JSON.stringify(s.key)}x${s.cost}`).join(',')
    const where = `seed ${seed} op ${i}`
    if (op < 0.6) {
      const mode = rand() < 0.2 ? 'peek' : 'consume'
      log.push(`${where}: ${mode} ${what} at ${clock}`)
      const expected = await memory.apply(steps, mode)
      expect(await memcached.apply(steps, mode), log.slice(-15).join('\n')).toEqual(expected)
    } else if (op < 0.8) {
      log.push(`${where}: refund ${what} at ${clock}`)
      await memory.refund(steps)
      await memcached.refund(steps)
    } else if (op < 0.88) {
      const ms = 1 + Math.floor(rand() * 600)
      log.push(`${where}: block ${what} ${ms} at ${clock}`)
      await memory.block(steps, ms)
      await memcached.block(steps, ms)
    } else {
      log.push(`${where}: reset ${what} at ${clock}`)
      await memory.reset(steps)
      await memcached.reset(steps)
    }
  }
}

const SEEDS = Number(process.env.SLUICE_DIFF_SEEDS ?? 6)
describe('memcached store equals the memory store (random sequences)', () => {
  for (const name of names) {
    it(name, async () => {
      for (let seed = 1; seed <= SEEDS; seed++) await compareStores(seed, [name])
    })
  }
  it('mixed algorithms, layered', async () => {
    for (let seed = 100; seed < 100 + 2 * SEEDS; seed++) await compareStores(seed, names)
  })
})

describe.each([
  ['deny cache on', true],
  ['deny cache off', false],
])('through a limiter, %s: the same decisions as over memory', (_label, cache) => {
  it('random consumes, layered checks, refunds and blocks', async () => {
    const rand = random(cache ? 7 : 8)
    let clock = 1_700_000_000_000
    const now = () => clock
    const make = (store: ReturnType<typeof memoryStore> | ReturnType<typeof memcachedStore>) =>
      createLimiter({ store, policies, localDenyCache: cache ? { maxKeys: 100 } : false })
    const memory = make(memoryStore({ now }))
    const memcached = make(memcachedStore(client, { now, prefix: freshPrefix('diff-lim') }))
    const rates = names.filter((n) => n !== 'conc')
    for (let i = 0; i < 200; i++) {
      clock += Math.floor(rand() * rand() * 200)
      const name = rates[Math.floor(rand() * rates.length)]!
      const key = keys[Math.floor(rand() * keys.length)]!
      const op = rand()
      if (op < 0.7) {
        const a = await memory.consume(name, key)
        expect(await memcached.consume(name, key), `op ${i}: consume ${name}/${key}`).toEqual(a)
      } else if (op < 0.85) {
        const checks = [
          { policy: name, key },
          { policy: 'fw' as const, key: 'shared' },
        ]
        const a = await memory.consume(checks)
        expect(await memcached.consume(checks), `op ${i}: layered ${name}/${key}`).toEqual(a)
      } else if (op < 0.95) {
        await memory.refund(name, key)
        await memcached.refund(name, key)
      } else {
        await memory.block(name, key, 300)
        await memcached.block(name, key, 300)
      }
    }
    await memory.close()
    await memcached.close()
  })
})
