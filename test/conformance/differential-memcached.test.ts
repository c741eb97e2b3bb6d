// Differential test: random sequences of operations on the memory store and on the memcached store,
// same fake clock, including blocks, refunds, resets and layered all-or-nothing steps: every
// StepResult must match. Then the same through two limiters, deny cache on and off.
import { afterAll, describe, expect, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import type { Policy } from '../../packages/sluice/src/policy.js'
import { memcachedStore } from '../../packages/sluice/src/stores/memcached/index.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { compareWithMemory, random, policies as shared } from '../helpers/differential.js'
import { freshPrefix, memcachedClient } from '../helpers/memcached-clients.js'

const client = memcachedClient()
afterAll(() => client.close())

// The shared policies under the names of the memcached test (gcra7 is the gcra of this file).
const names = ['fw', 'swl', 'swc', 'tb', 'gcra7', 'conc'] as const
type Name = (typeof names)[number]
const policies = Object.fromEntries(names.map((n) => [n, shared[n]!])) as Record<Name, Policy>
// Subjects memcached cannot take as they are: a space, unicode, a NUL.
const keys = ['a', 'user 1', 'ключ\u0000']

const compareStores = (seed: number, only: readonly Name[]) =>
  compareWithMemory(
    'memcached',
    (now) => memcachedStore(client, { now, prefix: freshPrefix('diff') }),
    seed,
    only,
    keys,
  )

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
