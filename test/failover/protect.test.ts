// The protection layer over a store that answers, fails or hangs on command, on vitest's fake timers:
// timeouts, breaker cool-downs and the log interval pass when the test advances the clock.
import { pino } from 'pino'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import {
  InvalidOptionsError,
  InvalidPolicyError,
  type SluiceError,
} from '../../packages/sluice/src/errors.js'
import type { FailoverLogger } from '../../packages/sluice/src/failover/index.js'
import { protectStore } from '../../packages/sluice/src/failover/index.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { resolvePolicy } from '../../packages/sluice/src/policy.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { type SwitchableStore, switchableStore } from '../helpers/switchable-store.js'

/** Let `ms` pass on the fake clock, running the timers due and the promise jobs they start. */
const pass = (ms: number) => vi.advanceTimersByTimeAsync(ms)

/** Which of `promises` have settled so far. */
function watch(promises: readonly Promise<unknown>[]): boolean[] {
  const settled = promises.map(() => false)
  for (const [i, p] of promises.entries()) {
    const done = () => {
      settled[i] = true
    }
    p.then(done, done)
  }
  return settled
}

let unhandled: unknown[] = []
const onUnhandled = (reason: unknown) => unhandled.push(reason)
beforeEach(() => {
  vi.useFakeTimers()
  unhandled = []
  process.on('unhandledRejection', onUnhandled)
})
afterEach(async () => {
  vi.useRealTimers()
  // One turn of the real event loop: a late rejection nobody handled is reported by then.
  await new Promise((r) => setImmediate(r))
  process.off('unhandledRejection', onUnhandled)
  expect(unhandled).toEqual([])
})

function quietLogger(): FailoverLogger & { warnings: string[]; infos: string[] } {
  const warnings: string[] = []
  const infos: string[] = []
  return {
    warnings,
    infos,
    warn: (_d, m) => warnings.push(m),
    info: (_d, m) => infos.push(m),
  }
}

function limiterOver(
  store: SwitchableStore,
  extra: Parameters<typeof createLimiter>[0] extends infer O ? Partial<O> : never = {},
) {
  return createLimiter({
    store,
    logger: quietLogger(),
    storeTimeout: 30,
    breaker: { failures: 3, cooldown: 40 },
    policies: {
      open: { algorithm: 'fixed-window', limit: 2, window: '1m', onStoreError: 'open' },
      closed: { algorithm: 'fixed-window', limit: 2, window: '1m', onStoreError: 'closed' },
      memory: { algorithm: 'token-bucket', limit: 10, window: '1m', onStoreError: 'memory' },
      one: { algorithm: 'fixed-window', limit: 1, window: '1m', onStoreError: 'memory' },
    },
    ...extra,
  })
}

describe('protectStore through the limiter', () => {
  it('a healthy store decides; nothing is degraded; health is ok', async () => {
    const store = switchableStore()
    const limiter = limiterOver(store)
    const d = await limiter.consume('open', 'k')
    expect(d).toMatchObject({ allowed: true, remaining: 1 })
    expect(d.degraded).toBeUndefined()
    await limiter.consume('open', 'k')
    expect(await limiter.consume('open', 'k')).toMatchObject({ allowed: false, reason: 'limit' })
    expect(limiter.health()).toMatchObject({ status: 'ok', circuit: 'closed' })
    expect(store.calls.apply).toBe(3)
    await limiter.close()
  })

  it('open: admits, marked degraded, without charging anything', async () => {
    const store = switchableStore('fail')
    const limiter = limiterOver(store)
    // Failures spread over the 30 ms timeout (a burst at one instant would not open the circuit).
    for (let i = 0; i < 5; i++) {
      const d = await limiter.consume('open', 'k')
      expect(d).toMatchObject({ allowed: true, degraded: true, remaining: 1 })
      await pass(10)
    }
    expect(limiter.health()).toMatchObject({ status: 'down', circuit: 'open' })
    expect(limiter.health().counts.degraded).toBe(5)
    await limiter.close()
  })

  it('closed: denies with store_unavailable and a Retry-After', async () => {
    const store = switchableStore('fail')
    const limiter = limiterOver(store)
    const d = await limiter.consume('closed', 'k')
    expect(d).toMatchObject({ allowed: false, reason: 'store_unavailable', degraded: true, remaining: 0 })
    expect(d.retryAfterMs).toBeGreaterThan(0)
    await limiter.close()
  })

  it('memory: decides in-process with limit divided by instances, then returns to the store', async () => {
    const store = switchableStore('fail')
    const limiter = limiterOver(store, { instances: 3 })
    // token bucket limit 10 over 3 instances: ceil(10/3) = 4 in memory.
    const seen = []
    for (let i = 0; i < 5; i++) seen.push(await limiter.consume('memory', 'k'))
    expect(seen.map((d) => d.allowed)).toEqual([true, true, true, true, false])
    expect(seen.every((d) => d.degraded === true)).toBe(true)
    expect(seen[4]).toMatchObject({ reason: 'limit', limit: 10 })
    store.behaviour = 'answer'
    await pass(50) // past the 40 ms cool-down: the next call is the probe
    const back = await limiter.consume('memory', 'k')
    expect(back).toMatchObject({ allowed: true, remaining: 9 })
    expect(back.degraded).toBeUndefined()
    expect(limiter.health()).toMatchObject({ status: 'ok', circuit: 'closed' })
    await limiter.close()
  })

  it('the breaker stops calling a failing store and probes once per cool-down', async () => {
    const store = switchableStore('fail')
    const limiter = limiterOver(store)
    // Three failures at one instant: a burst (say, after a GC pause), the circuit stays closed.
    await Promise.all([0, 1, 2].map((i) => limiter.consume('open', `b${i}`)))
    expect(limiter.health().circuit).toBe('closed')
    // Failures that go on past the timeout (30 ms) open it.
    await pass(29)
    await limiter.consume('open', 'early')
    expect(limiter.health().circuit).toBe('closed')
    await pass(6)
    await limiter.consume('open', 'late')
    expect(limiter.health().circuit).toBe('open')
    expect(store.calls.apply).toBe(5)
    for (let i = 0; i < 20; i++) await limiter.consume('open', `k${i}`)
    // Not before the 40 ms cool-down has passed.
    await pass(39)
    await limiter.consume('open', 'cooling')
    expect(store.calls.apply).toBe(5)
    await pass(1)
    // 10 at once after the cool-down: exactly one reaches the store (the probe), it fails.
    await Promise.all(Array.from({ length: 10 }, (_, i) => limiter.consume('open', `p${i}`)))
    expect(store.calls.apply).toBe(6)
    expect(limiter.health().circuit).toBe('open')
    store.behaviour = 'answer'
    await pass(40)
    const d = await limiter.consume('open', 'x')
    expect(d.degraded).toBeUndefined()
    expect(store.calls.apply).toBe(7)
    expect(limiter.health().circuit).toBe('closed')
    await limiter.close()
  })

  it('a hanging store costs the timeout, and its late failure is caught', async () => {
    const store = switchableStore('hang')
    const limiter = limiterOver(store)
    const pending = Array.from({ length: 8 }, (_, i) => limiter.consume('open', `k${i}`))
    const settled = watch(pending)
    await pass(29)
    expect(settled.some(Boolean)).toBe(false)
    // The 30 ms timeout, then the check phase of that turn (the fake timers run it 1 ms later).
    await pass(2)
    expect(settled.every(Boolean)).toBe(true)
    const decisions = await Promise.all(pending)
    expect(decisions.every((d) => d.allowed && d.degraded)).toBe(true)
    expect(limiter.health().counts.timeouts).toBe(8)
    expect(store.hanging).toBe(8)
    // The socket dies later: every one of those calls rejects, none unhandled (checked in afterEach).
    store.release('fail')
    await pass(0)
    expect((limiter.store as SwitchableStore).hanging).toBe(0)
    await limiter.close()
  })

  it('timeouts, like the breaker and the log interval, run on the clock passed as `now`', async () => {
    let t = 5_000_000
    const store = switchableStore('hang')
    const protectedStore = protectStore(store, { timeoutMs: 30, onStoreError: 'open', now: () => t })
    const policy = resolvePolicy('p', { algorithm: 'fixed-window', limit: 5, window: '1s' })
    const pending = protectedStore.apply([{ policy, key: 'k', cost: 1 }], 'consume')
    const settled = watch([Promise.resolve(pending)])
    // The timers run, but the clock passed as `now` has not moved: not a timeout yet.
    await pass(100)
    expect(settled).toEqual([false])
    t += 30
    await pass(31)
    expect(settled).toEqual([true])
    expect(await pending).toMatchObject([{ allowed: true, degraded: true }])
    expect(protectedStore.health().counts.timeouts).toBe(1)
    store.release('answer')
    await protectedStore.close()
  })

  it('bounds calls in flight: past maxInFlight, calls fail fast instead of queueing', async () => {
    const store = switchableStore('hang')
    const protectedStore = protectStore(store, {
      timeoutMs: 1000,
      failures: 1000,
      maxInFlight: 4,
      onStoreError: 'open',
    })
    const policy = resolvePolicy('p', { algorithm: 'fixed-window', limit: 5, window: '1s' })
    const pending = Array.from({ length: 10 }, (_, i) =>
      protectedStore.apply([{ policy, key: `k${i}`, cost: 1 }], 'consume'),
    )
    // The six past the bound answer at once (no time passes), degraded, without reaching the store.
    const settled = watch(pending.map((answer) => Promise.resolve(answer)))
    await pass(0)
    expect(settled).toEqual([false, false, false, false, true, true, true, true, true, true])
    const fast = await Promise.all(pending.slice(4))
    expect(fast.every(([r]) => r!.allowed && r!.degraded)).toBe(true)
    expect(store.calls.apply).toBe(4)
    expect(protectedStore.inFlight).toBe(4)
    expect(protectedStore.health().counts.rejected).toBe(6)
    store.release('answer')
    const slow = await Promise.all(pending.slice(0, 4))
    expect(slow.every(([r]) => r!.allowed && r!.degraded === undefined)).toBe(true)
    expect(protectedStore.inFlight).toBe(0)
    await protectedStore.close()
  })

  it('a reply that arrived while our own event loop was stalled is not a timeout', async () => {
    const store = switchableStore('hang')
    const protectedStore = protectStore(store, { timeoutMs: 30, onStoreError: 'closed' })
    const policy = resolvePolicy('p', { algorithm: 'fixed-window', limit: 5, window: '1s' })
    const pending = protectedStore.apply([{ policy, key: 'k', cost: 1 }], 'consume')
    // The store answered at 40 ms, but the loop was blocked until 60 ms: when it runs again, the
    // timeout (30 ms) and the reply are both due. The loop runs the timer first ...
    vi.advanceTimersToNextTimer()
    // ... then reads the socket: the reply ...
    store.release('answer')
    await Promise.resolve()
    // ... and the turn's check phase last. The reply must win.
    await pass(1)
    const [result] = await pending
    expect(result).toMatchObject({ allowed: true, remaining: 4 })
    expect(result!.degraded).toBeUndefined()
    expect(protectedStore.health().counts.timeouts).toBe(0)
    await protectedStore.close()
  })

  it('layered checks stay all-or-nothing across modes', async () => {
    const store = switchableStore('fail')
    const limiter = limiterOver(store)
    // A closed layer denies the whole check, and the memory layer is not charged.
    const d1 = await limiter.consume([
      { policy: 'open', key: 'a' },
      { policy: 'closed', key: 'a' },
      { policy: 'one', key: 'a' },
    ])
    expect(d1).toMatchObject({
      allowed: false,
      reason: 'store_unavailable',
      deniedBy: 'closed',
      degraded: true,
    })
    // open + memory: the memory layer decides; 'one' (limit 1) admits once.
    const d2 = await limiter.consume([
      { policy: 'open', key: 'a' },
      { policy: 'one', key: 'a' },
    ])
    expect(d2).toMatchObject({ allowed: true, degraded: true })
    const d3 = await limiter.consume([
      { policy: 'memory', key: 'a' },
      { policy: 'one', key: 'a' },
    ])
    expect(d3).toMatchObject({ allowed: false, deniedBy: 'one', reason: 'limit' })
    // The memory layer of the denied check was not charged: 10 over 1 instance, 10 left.
    const d4 = await limiter.peek('memory', 'a')
    expect(d4).toMatchObject({ allowed: true, remaining: 10, degraded: true })
    await limiter.close()
  })

  it('refund never throws; block and reset report the failure with a stable code', async () => {
    const store = switchableStore('fail')
    const limiter = limiterOver(store)
    await expect(limiter.refund('open', 'k')).resolves.toBeUndefined()
    await pass(20)
    await expect(limiter.block('open', 'k', '1s')).rejects.toMatchObject({ code: 'SLUICE_STORE_ERROR' })
    await pass(20)
    await expect(limiter.reset('open', 'k')).rejects.toMatchObject({ code: 'SLUICE_STORE_ERROR' })
    // Circuit now open (3 failures over 40 ms): calls are not even made.
    await expect(limiter.reset('open', 'k')).rejects.toMatchObject({ code: 'SLUICE_STORE_UNAVAILABLE' })
    await limiter.close()
  })

  it('a refund the store cannot take goes to the memory fallback of a memory-mode policy', async () => {
    const store = switchableStore('fail')
    const limiter = limiterOver(store)
    for (let i = 0; i < 3; i++) await limiter.consume('memory', 'r')
    expect(await limiter.peek('memory', 'r')).toMatchObject({ remaining: 7, degraded: true })
    await limiter.refund('memory', 'r')
    expect(await limiter.peek('memory', 'r')).toMatchObject({ remaining: 8, degraded: true })
    await limiter.close()
  })

  it('memory-mode leases taken during the outage are released in memory', async () => {
    const store = switchableStore('fail')
    const limiter = createLimiter({
      store,
      logger: quietLogger(),
      policies: { jobs: { algorithm: 'concurrency', limit: 1, timeout: '1m', onStoreError: 'memory' } },
    })
    const a = await limiter.acquire('jobs', 'k')
    expect(a).toMatchObject({ allowed: true, degraded: true })
    expect(await limiter.acquire('jobs', 'k')).toMatchObject({ allowed: false, degraded: true })
    await a.lease!.release()
    expect(await limiter.acquire('jobs', 'k')).toMatchObject({ allowed: true, degraded: true })
    await limiter.close()
  })

  it('logs at most once per interval, with counts since the last message', async () => {
    const logger = quietLogger()
    const store = switchableStore('fail')
    const limiter = limiterOver(store, { logger, logInterval: 60 })
    for (let i = 0; i < 50; i++) await limiter.consume('open', `k${i}`)
    expect(logger.warnings).toHaveLength(1)
    await pass(59)
    await limiter.consume('open', 'early')
    expect(logger.warnings).toHaveLength(1)
    await pass(1)
    await limiter.consume('open', 'again')
    expect(logger.warnings).toHaveLength(2)
    store.behaviour = 'answer'
    await pass(50)
    await limiter.consume('open', 'back')
    expect(logger.infos).toHaveLength(1)
    await limiter.close()
  })

  it('a throwing logger or a store that throws synchronously breaks nothing', async () => {
    const store = switchableStore()
    store.apply = () => {
      throw new Error('sync throw')
    }
    const limiter = createLimiter({
      store,
      logger: {
        warn() {
          throw new Error('logger down')
        },
      },
      policies: { p: { algorithm: 'gcra', limit: 1, window: '1s' } },
    })
    expect(await limiter.consume('p', 'k')).toMatchObject({ allowed: true, degraded: true })
    await limiter.close()
  })

  it('a pino logger fits the logger option', async () => {
    const lines: string[] = []
    const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) })
    const store = switchableStore('fail')
    const limiter = limiterOver(store, { logger })
    await limiter.consume('open', 'k')
    expect(lines).toHaveLength(1)
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 40, store: 'switchable', errors: 1 })
    await limiter.close()
  })

  it('the in-process memory store is not wrapped', async () => {
    const store = memoryStore()
    const limiter = createLimiter({ store, policies: { p: { algorithm: 'gcra', limit: 1, window: '1s' } } })
    expect(limiter.consumeSync('p', 'k').allowed).toBe(true)
    expect(limiter.health()).toMatchObject({ status: 'ok', circuit: 'closed' })
    expect(limiter.store).toBe(store)
  })

  it('rejects bad options with stable codes', () => {
    const policies = { p: { algorithm: 'gcra', limit: 1, window: '1s' } } as const
    const code = (f: () => unknown) => {
      try {
        f()
      } catch (e) {
        return (e as SluiceError).code
      }
      return 'no error'
    }
    expect(code(() => createLimiter({ policies, storeTimeout: '0ms' }))).toBe('SLUICE_INVALID_DURATION')
    expect(code(() => createLimiter({ policies, breaker: { failures: 0 } }))).toBe('SLUICE_INVALID_OPTIONS')
    expect(code(() => createLimiter({ policies, instances: 1.5 }))).toBe('SLUICE_INVALID_OPTIONS')
    // @ts-expect-error: not a mode
    expect(code(() => createLimiter({ policies, onStoreError: 'sometimes' }))).toBe('SLUICE_INVALID_OPTIONS')
    expect(() =>
      resolvePolicy('p', { algorithm: 'gcra', limit: 1, window: '1s', onStoreError: 'maybe' }),
    ).toThrow(InvalidPolicyError)
    // @ts-expect-error: logger needs warn
    expect(() => createLimiter({ policies, logger: {} })).toThrow(InvalidOptionsError)
  })
})
