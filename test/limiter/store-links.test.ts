// Every capability of the store contract, called through each link of the decision chain (the
// forwarding helper itself, failover, the local deny cache, hybrid) and through a whole limiter
// with every link and a listener, must reach the store underneath. The table of capabilities is
// typed by the contract, so a capability added to it fails the typecheck here until it is tested.
import { describe, expect, it } from 'vitest'
import { protectStore } from '../../packages/sluice/src/failover/index.js'
import { denyCacheStore } from '../../packages/sluice/src/limiter/deny-cache-store.js'
import { hybridStore } from '../../packages/sluice/src/limiter/hybrid-store.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { resolvePolicy } from '../../packages/sluice/src/policy.js'
import { LocalDenyCache } from '../../packages/sluice/src/scale/deny-cache.js'
import type { HybridBackend } from '../../packages/sluice/src/scale/hybrid.js'
import { HybridPolicy } from '../../packages/sluice/src/scale/hybrid.js'
import type { Step, StepResult, Store } from '../../packages/sluice/src/store.js'
import { forwardStore } from '../../packages/sluice/src/store.js'

type Capability = Exclude<keyof Store, 'name' | 'inProcess'>

/** A remote-looking store that answers every call and records which capability was called. */
function recordingStore(): Store & { calls: string[] } {
  const calls: string[] = []
  const answer = (steps: readonly Step[]): StepResult[] =>
    steps.map((s) => ({
      allowed: true,
      remaining: s.policy.capacity - s.cost,
      resetMs: 1_000,
      retryAfterMs: 0,
      blocked: false,
    }))
  return {
    name: 'recording',
    inProcess: false,
    calls,
    async apply(steps, mode) {
      calls.push(mode === 'peek' ? 'peek' : 'apply')
      return answer(steps)
    },
    async refund() {
      calls.push('refund')
    },
    async charge() {
      calls.push('charge')
    },
    async block() {
      calls.push('block')
    },
    async reset() {
      calls.push('reset')
    },
    now() {
      calls.push('now')
      return 1_700_000_000_000
    },
    records: {
      async put() {
        calls.push('records.put')
      },
      async delete() {
        calls.push('records.delete')
        return true
      },
      async get() {
        calls.push('records.get')
        return undefined
      },
      async list() {
        calls.push('records.list')
        return []
      },
      async version() {
        calls.push('records.version')
        return '1'
      },
    },
    async close() {
      calls.push('close')
    },
  }
}

const policy = resolvePolicy('api', { algorithm: 'fixed-window', limit: 10, window: '1s' })
const step: Step = { policy, key: 'user-1', cost: 1 }

/** One call of each capability on a Store-shaped link, and what the store underneath must record. */
const CAPABILITIES: { [K in Capability]-?: { call: (link: Store) => unknown; records: string[] } } = {
  apply: {
    call: async (link) => {
      await link.apply([step], 'consume')
      await link.apply([step], 'peek')
    },
    records: ['apply', 'peek'],
  },
  refund: { call: (link) => link.refund([step]), records: ['refund'] },
  charge: { call: (link) => link.charge([step]), records: ['charge'] },
  block: { call: (link) => link.block([step], 1_000), records: ['block'] },
  reset: { call: (link) => link.reset([step]), records: ['reset'] },
  now: { call: (link) => link.now(), records: ['now'] },
  records: {
    call: async (link) => {
      await link.records.put('override', 'api', 'user-1', '{}')
      await link.records.get('override', 'api', 'user-1')
      await link.records.list('override', 'api')
      await link.records.delete('override', 'api', 'user-1')
      await link.records.version()
    },
    records: ['records.put', 'records.get', 'records.list', 'records.delete', 'records.version'],
  },
  close: { call: (link) => link.close(), records: ['close'] },
}

/** A hybrid backend in this process: the link under test only has to be there, not to lease. */
function localBackend(): HybridBackend {
  return {
    async lease() {
      return {
        allowed: true,
        grant: 0,
        remaining: 0,
        retryAfterMs: 0,
        resetMs: 0,
        tag: 0,
        underAdmitted: 0,
        denials: 0,
        endsAtMs: Number.MAX_SAFE_INTEGER,
      }
    },
    async remove() {},
    keyOf: (p, subject) => `${p}:${subject}`,
  }
}

const LINKS: [string, (inner: Store) => Store][] = [
  ['forwardStore with no changes', (inner) => forwardStore(inner, {})],
  ['protectStore (failover)', (inner) => protectStore(inner, { policies: [policy] })],
  [
    'the local deny cache',
    (inner) => denyCacheStore(inner, new LocalDenyCache({ maxKeys: 100 }), () => inner.now()),
  ],
  [
    'hybrid, for a policy that is not hybrid',
    (inner) => {
      const hybrid = resolvePolicy('h', {
        algorithm: 'fixed-window',
        limit: 10,
        window: '1s',
        mode: 'hybrid',
        syncEvery: '1s',
      })
      return hybridStore(inner, new Map([['h', new HybridPolicy(hybrid, localBackend())]]))
    },
  ],
]

describe('every link of the chain forwards every capability of the store contract', () => {
  for (const [label, link] of LINKS) {
    for (const [name, capability] of Object.entries(CAPABILITIES)) {
      it(`${label}: ${name} reaches the store`, async () => {
        const store = recordingStore()
        const head = link(store)
        store.calls.length = 0
        await capability.call(head)
        for (const call of capability.records) expect(store.calls).toContain(call)
      })
    }
  }

  it('a link keeps the name and the kind of the store it wraps', () => {
    const store = recordingStore()
    for (const [, link] of LINKS) expect(link(store)).toMatchObject({ name: 'recording', inProcess: false })
  })
})

describe('through a whole limiter: failover, deny cache, hybrid and a listener in front of the store', () => {
  it('consume, peek, refund, block, reset, a settle above its estimate (charge), now, records and close reach the store', async () => {
    const store = recordingStore()
    const events: string[] = []
    const limiter = createLimiter({
      store,
      hybrid: localBackend(),
      policies: {
        api: { algorithm: 'fixed-window', limit: 10, window: '1s' },
        h: { algorithm: 'fixed-window', limit: 10, window: '1s', mode: 'hybrid', syncEvery: '1s' },
      },
      onDecision: (e) => events.push(e.operation),
    })
    await limiter.consume('api', 'user-1')
    await limiter.consume([{ policy: 'api', key: 'user-2' }])
    await limiter.peek('api', 'user-1')
    await limiter.refund('api', 'user-1')
    await limiter.block('api', 'user-3', '1s')
    await limiter.reset('api', 'user-3')
    const reservation = await limiter.reserve('api', 'user-4', { cost: 2 })
    await reservation.settle(5)
    await limiter.setOverride('api', 'user-5', { limit: 3 })
    await limiter.getOverride('api', 'user-5')
    await limiter.listOverrides('api')
    await limiter.clearOverride('api', 'user-5')
    await limiter.close()
    expect(new Set(store.calls)).toEqual(
      new Set([
        'apply',
        'peek',
        'refund',
        'block',
        'reset',
        'charge',
        'now',
        'close',
        // The limiter's copy of the overrides (its first read) and the override methods.
        'records.version',
        'records.list',
        'records.put',
        'records.get',
        'records.delete',
      ]),
    )
    expect(events).toEqual(['consume', 'consume', 'peek', 'consume'])
  })
})

describe('createLimiter takes only a whole store', () => {
  it.each([
    ['charge', 'charge (function)'],
    ['now', 'now (function)'],
    ['inProcess', 'inProcess (boolean)'],
  ] as const)('a store without %s is refused at once, naming what it lacks', (member, named) => {
    const store: Record<string, unknown> = { ...recordingStore() }
    delete store[member]
    const make = () =>
      createLimiter({
        store: store as unknown as Store,
        policies: { api: { algorithm: 'fixed-window', limit: 10, window: '1s' } },
      })
    expect(make).toThrow(expect.objectContaining({ code: 'SLUICE_INVALID_OPTIONS' }))
    expect(make).toThrow(named)
  })

  it('a wrapper made with forwardStore is whole', async () => {
    const store = recordingStore()
    const limiter = createLimiter({
      store: forwardStore(store, {}),
      policies: { api: { algorithm: 'fixed-window', limit: 10, window: '1s' } },
    })
    expect((await limiter.consume('api', 'k')).allowed).toBe(true)
  })
})
