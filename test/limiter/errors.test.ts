// Every error code with the input that triggers it, and proof that nothing stored changed after it.
import { describe, expect, it } from 'vitest'
import { parseDuration } from '../../packages/sluice/src/duration.js'
import {
  InvalidCostError,
  InvalidDurationError,
  InvalidKeyError,
  InvalidOptionsError,
  InvalidPolicyError,
  SluiceError,
  UnknownPolicyError,
} from '../../packages/sluice/src/errors.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import type { Policy } from '../../packages/sluice/src/policy.js'
import type { Store } from '../../packages/sluice/src/store.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { fakeClock, fakeStore, snapshot } from '../helpers/fake-clock.js'

/** Run `fn`, expect a SluiceError of `code`, and return it for more checks. */
async function rejects(fn: () => unknown, code: string): Promise<SluiceError> {
  let caught: unknown
  try {
    await fn()
  } catch (error) {
    caught = error
  }
  expect(caught, `expected ${code}`).toBeInstanceOf(SluiceError)
  const error = caught as SluiceError
  expect(error.code).toBe(code)
  expect(error.name).toBe(error.constructor.name)
  expect(error.message.length).toBeGreaterThan(10)
  return error
}

function setup() {
  const clock = fakeClock()
  const store = fakeStore(clock)
  const limiter = createLimiter({
    store,
    policies: {
      api: { algorithm: 'token-bucket', limit: 10, window: '1s', burst: 5 },
      perIp: { algorithm: 'fixed-window', limit: 3, window: '1m' },
      jobs: { algorithm: 'concurrency', limit: 2, timeout: '30s' },
    },
  })
  const pairs = [
    ['api', 'u1'],
    ['perIp', 'ip1'],
    ['jobs', 'j1'],
  ] as const
  return { clock, store, limiter, pairs }
}

describe('run-time errors leave every stored key as it was', () => {
  const bad: [string, string, (l: ReturnType<typeof setup>['limiter']) => unknown][] = [
    ['SLUICE_INVALID_COST', 'cost 0', (l) => l.consume('api', 'u1', { cost: 0 })],
    ['SLUICE_INVALID_COST', 'cost -1', (l) => l.consume('api', 'u1', { cost: -1 })],
    ['SLUICE_INVALID_COST', 'cost NaN', (l) => l.consume('api', 'u1', { cost: Number.NaN })],
    ['SLUICE_INVALID_COST', 'cost 1.5', (l) => l.consume('api', 'u1', { cost: 1.5 })],
    [
      'SLUICE_INVALID_COST',
      'cost Infinity',
      (l) => l.consume('api', 'u1', { cost: Number.POSITIVE_INFINITY }),
    ],
    [
      'SLUICE_INVALID_COST',
      'cost as a string',
      (l) => l.consume('api', 'u1', { cost: '2' as unknown as number }),
    ],
    ['SLUICE_INVALID_COST', 'cost above burst', (l) => l.consume('api', 'u1', { cost: 6 })],
    ['SLUICE_INVALID_COST', 'cost above limit', (l) => l.consume('perIp', 'ip1', { cost: 4 })],
    ['SLUICE_INVALID_COST', 'peek cost above limit', (l) => l.peek('perIp', 'ip1', { cost: 4 })],
    ['SLUICE_INVALID_COST', 'refund 0', (l) => l.refund('api', 'u1', 0)],
    ['SLUICE_INVALID_COST', 'consumeSync cost 1.5', (l) => l.consumeSync('api', 'u1', { cost: 1.5 })],
    ['SLUICE_INVALID_COST', 'acquire cost above limit', (l) => l.acquire('jobs', 'j1', { cost: 3 })],
    ['SLUICE_INVALID_KEY', 'empty key', (l) => l.consume('api', '')],
    ['SLUICE_INVALID_KEY', 'key not a string', (l) => l.consume('api', 42 as unknown as string)],
    ['SLUICE_INVALID_KEY', 'empty key in reset', (l) => l.reset('api', '')],
    ['SLUICE_INVALID_KEY', 'empty key in consumeSync', (l) => l.consumeSync('api', '')],
    ['SLUICE_UNKNOWN_POLICY', 'unknown policy', (l) => l.consume('nope' as 'api', 'u1')],
    ['SLUICE_UNKNOWN_POLICY', 'unknown policy in block', (l) => l.block('nope' as 'api', 'u1', '1s')],
    ['SLUICE_UNKNOWN_POLICY', 'unknown policy in peek', (l) => l.peek('nope' as 'api', 'u1')],
    [
      'SLUICE_INVALID_OPTIONS',
      'duplicate layer',
      (l) =>
        l.consume([
          { policy: 'api', key: 'u1' },
          { policy: 'api', key: 'u1', cost: 2 },
        ]),
    ],
    ['SLUICE_INVALID_OPTIONS', 'empty layered list', (l) => l.consume([])],
    [
      'SLUICE_UNKNOWN_POLICY',
      'a bad later layer charges no earlier layer',
      (l) =>
        l.consume([
          { policy: 'api', key: 'u1' },
          { policy: 'perIp', key: 'ip1' },
          { policy: 'nope' as 'api', key: 'x' },
        ]),
    ],
    [
      'SLUICE_INVALID_COST',
      'a bad cost in a later layer',
      (l) =>
        l.consume([
          { policy: 'perIp', key: 'ip1' },
          { policy: 'api', key: 'u1', cost: 0 },
        ]),
    ],
    ['SLUICE_INVALID_DURATION', 'block with a bad duration', (l) => l.block('api', 'u1', '10 parsecs')],
    ['SLUICE_INVALID_DURATION', 'block for 0 ms', (l) => l.block('api', 'u1', 0)],
    ['SLUICE_INVALID_OPTIONS', 'acquire on a rate policy', (l) => l.acquire('api', 'u1')],
    ['SLUICE_INVALID_OPTIONS', 'release without a lease id', (l) => l.release('jobs', 'j1', '')],
  ]

  for (const [code, what, call] of bad) {
    it(`${code}: ${what}`, async () => {
      const { limiter, pairs, clock } = setup()
      await limiter.consume('api', 'u1', { cost: 2 })
      await limiter.consume('perIp', 'ip1')
      await limiter.acquire('jobs', 'j1')
      clock.advance(7)
      const before = await snapshot(limiter, pairs)
      await rejects(() => call(limiter), code)
      expect(await snapshot(limiter, pairs)).toEqual(before)
    })
  }

  it('a check with several faults reports the first: the policy, then the key, then the cost', async () => {
    const { limiter } = setup()
    const api = 'api' as const
    await rejects(() => limiter.consume('nope' as typeof api, '', { cost: 0 }), 'SLUICE_UNKNOWN_POLICY')
    await rejects(() => limiter.consume(api, '', { cost: 0 }), 'SLUICE_INVALID_KEY')
    await rejects(() => limiter.consume(api, 7 as unknown as string, { cost: 99 }), 'SLUICE_INVALID_KEY')
    const invalid = await rejects(() => limiter.consume(api, 'u1', { cost: 1.5 }), 'SLUICE_INVALID_COST')
    expect(invalid.message).toContain('positive whole number')
    const above = await rejects(() => limiter.consumeSync(api, 'u1', { cost: 6 }), 'SLUICE_INVALID_COST')
    expect(above.message).toContain('capacity 5')
    // A good check after a faulty one is decided as usual.
    expect((await limiter.consume(api, 'u1', { cost: 5 })).allowed).toBe(true)
  })

  it('SLUICE_INVALID_OPTIONS: consumeSync on a store that answers with a promise', async () => {
    const inner = memoryStore()
    // A third-party store written as a plain object returning promises, as a network store does.
    const asyncStore: Store = {
      name: 'async-test',
      inProcess: false,
      apply: async (steps, mode) => inner.apply(steps, mode),
      refund: (steps) => inner.refund(steps),
      charge: (steps) => inner.charge(steps),
      block: (steps, ms) => inner.block(steps, ms),
      reset: (steps) => inner.reset(steps),
      now: () => inner.now(),
      records: inner.records,
      close: () => inner.close(),
    }
    const limiter = createLimiter({
      store: asyncStore,
      policies: { api: { algorithm: 'fixed-window', limit: 3, window: '1s' } },
    })
    expect(await limiter.consume('api', 'k')).toMatchObject({ allowed: true, remaining: 2 })
    await rejects(() => limiter.consumeSync('api', 'k'), 'SLUICE_INVALID_OPTIONS')
    // The promise-returning store did decide that call (consumeSync learns it is asynchronous from
    // its answer); the limiter goes on working with consume.
    expect((await limiter.consume('api', 'k')).remaining).toBe(0)
  })

  it('a third-party store returning plain values decides synchronously through the chain', async () => {
    const inner = memoryStore()
    // Not `inProcess`: the failover layer wraps it, and passes its plain answers straight through.
    const plainStore: Store = {
      name: 'plain-test',
      inProcess: false,
      apply: (steps, mode) => inner.apply(steps, mode),
      refund: (steps) => inner.refund(steps),
      charge: (steps) => inner.charge(steps),
      block: (steps, ms) => inner.block(steps, ms),
      reset: (steps) => inner.reset(steps),
      now: () => inner.now(),
      records: inner.records,
      close: () => inner.close(),
    }
    const limiter = createLimiter({
      store: plainStore,
      policies: { api: { algorithm: 'fixed-window', limit: 2, window: '1s' } },
    })
    expect(limiter.consumeSync('api', 'k')).toMatchObject({ allowed: true, remaining: 1 })
    expect(limiter.decide('api', 'k')).toMatchObject({ allowed: true, remaining: 0 })
    expect(limiter.consumeSync('api', 'k')).toMatchObject({ allowed: false, reason: 'limit' })
    expect(limiter.health()).toMatchObject({ status: 'ok', counts: { calls: 3 } })
    expect(await limiter.peek('api', 'k')).toMatchObject({ allowed: false, remaining: 0 })
  })
})

describe('configuration errors', () => {
  const badPolicies: [string, string, unknown][] = [
    ['SLUICE_INVALID_POLICY', 'limit 0', { algorithm: 'fixed-window', limit: 0, window: '1s' }],
    ['SLUICE_INVALID_POLICY', 'limit -5', { algorithm: 'fixed-window', limit: -5, window: '1s' }],
    ['SLUICE_INVALID_POLICY', 'limit 1.5', { algorithm: 'token-bucket', limit: 1.5, window: '1s' }],
    ['SLUICE_INVALID_POLICY', 'limit NaN', { algorithm: 'gcra', limit: Number.NaN, window: '1s' }],
    ['SLUICE_INVALID_POLICY', 'limit as a string', { algorithm: 'gcra', limit: '10', window: '1s' }],
    ['SLUICE_INVALID_POLICY', 'unknown algorithm', { algorithm: 'leaky-bucket', limit: 10, window: '1s' }],
    ['SLUICE_INVALID_POLICY', 'no algorithm', { limit: 10, window: '1s' }],
    ['SLUICE_INVALID_POLICY', 'not an object', 'fixed-window'],
    [
      'SLUICE_INVALID_POLICY',
      'burst on fixed-window',
      { algorithm: 'fixed-window', limit: 10, window: '1s', burst: 20 },
    ],
    [
      'SLUICE_INVALID_POLICY',
      'burst on sliding-window-log',
      { algorithm: 'sliding-window-log', limit: 10, window: '1s', burst: 20 },
    ],
    [
      'SLUICE_INVALID_POLICY',
      'burst on concurrency',
      { algorithm: 'concurrency', limit: 2, timeout: '1s', burst: 3 },
    ],
    ['SLUICE_INVALID_POLICY', 'burst 0', { algorithm: 'token-bucket', limit: 10, window: '1s', burst: 0 }],
    ['SLUICE_INVALID_POLICY', 'unknown option', { algorithm: 'gcra', limit: 10, window: '1s', windw: '1m' }],
    [
      'SLUICE_INVALID_POLICY',
      'concurrency with window, not timeout',
      { algorithm: 'concurrency', limit: 2, window: '1s' },
    ],
    [
      'SLUICE_INVALID_POLICY',
      'sliding-window-log limit too large',
      { algorithm: 'sliding-window-log', limit: 2_000_000, window: '1h' },
    ],
    [
      'SLUICE_INVALID_POLICY',
      'limit x window too large',
      { algorithm: 'token-bucket', limit: 2 ** 40, window: '1d' },
    ],
    [
      'SLUICE_INVALID_DURATION',
      'bad duration string',
      { algorithm: 'fixed-window', limit: 10, window: '10 parsecs' },
    ],
    ['SLUICE_INVALID_DURATION', 'empty duration', { algorithm: 'fixed-window', limit: 10, window: '' }],
    ['SLUICE_INVALID_DURATION', 'zero window', { algorithm: 'fixed-window', limit: 10, window: 0 }],
    ['SLUICE_INVALID_DURATION', 'negative window', { algorithm: 'fixed-window', limit: 10, window: -1000 }],
    ['SLUICE_INVALID_DURATION', 'fractional ms', { algorithm: 'fixed-window', limit: 10, window: 1.5 }],
    ['SLUICE_INVALID_DURATION', 'bad timeout', { algorithm: 'concurrency', limit: 2, timeout: '5 mins' }],
  ]

  for (const [code, what, policy] of badPolicies) {
    it(`${code}: ${what}; the store passed in is untouched`, async () => {
      const clock = fakeClock()
      const store = fakeStore(clock)
      const good = createLimiter({
        store,
        policies: { p: { algorithm: 'fixed-window', limit: 3, window: '1s' } },
      })
      await good.consume('p', 'k')
      const before = await snapshot(good, [['p', 'k']])
      const error = await rejects(() => createLimiter({ store, policies: { p: policy as Policy } }), code)
      // The message names where to look.
      expect(error.message).toContain('policies.p')
      expect(await snapshot(good, [['p', 'k']])).toEqual(before)
    })
  }

  it('SLUICE_INVALID_POLICY: a policy name outside [A-Za-z0-9_.-]', async () => {
    await rejects(
      () =>
        createLimiter({ policies: { 'has space': { algorithm: 'fixed-window', limit: 1, window: 1000 } } }),
      'SLUICE_INVALID_POLICY',
    )
  })

  it('SLUICE_INVALID_OPTIONS: no policies, or empty policies', async () => {
    await rejects(() => createLimiter({} as never), 'SLUICE_INVALID_OPTIONS')
    await rejects(() => createLimiter({ policies: {} }), 'SLUICE_INVALID_OPTIONS')
  })

  it('SLUICE_INVALID_OPTIONS: memoryStore with a bad maxKeys or clock', async () => {
    await rejects(() => memoryStore({ maxKeys: 0 }), 'SLUICE_INVALID_OPTIONS')
    await rejects(() => memoryStore({ maxKeys: 1.5 }), 'SLUICE_INVALID_OPTIONS')
    await rejects(() => memoryStore({ now: 5 as unknown as () => number }), 'SLUICE_INVALID_OPTIONS')
  })

  it('error classes carry their codes', () => {
    expect(new InvalidPolicyError('x').code).toBe('SLUICE_INVALID_POLICY')
    expect(new InvalidDurationError('x').code).toBe('SLUICE_INVALID_DURATION')
    expect(new InvalidCostError('x').code).toBe('SLUICE_INVALID_COST')
    expect(new InvalidKeyError('x').code).toBe('SLUICE_INVALID_KEY')
    expect(new UnknownPolicyError('x').code).toBe('SLUICE_UNKNOWN_POLICY')
    const cause = new Error('inner')
    const wrapped = new InvalidOptionsError('outer', { cause })
    expect(wrapped.cause).toBe(cause)
    expect(wrapped).toBeInstanceOf(Error)
  })
})

describe('parseDuration', () => {
  it.each([
    ['250ms', 250],
    ['10s', 10_000],
    ['1.5m', 90_000],
    ['1h', 3_600_000],
    ['1d', 86_400_000],
    [' 2s ', 2000],
    [1234, 1234],
  ])('%j -> %d ms', (input, ms) => {
    expect(parseDuration(input)).toBe(ms)
  })

  it.each([['10'], ['1.0001s'], ['s'], ['-1s'], ['1wk'], ['0s'], [null], [Number.NaN], [2.5]])(
    '%j is SLUICE_INVALID_DURATION',
    async (input) => {
      await rejects(() => parseDuration(input, 'window'), 'SLUICE_INVALID_DURATION')
    },
  )
})
