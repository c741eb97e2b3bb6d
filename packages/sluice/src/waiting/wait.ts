// wait: admit when the request fits, within a deadline. One FIFO queue per (policy, key) in this
// process: only the waiter at its head asks the store, sleeps exactly the store's retryAfterMs and
// asks again, so a burst of waiters costs the store one call per wake-up, not one per waiter.
import { InvalidOptionsError, TooManyWaitersError, UnknownPolicyError, WaitAbortedError } from '../errors.js'
import type {
  AcquireDecision,
  Check,
  Decision,
  LayeredDecision,
  Limiter,
  WaitingMethod,
} from '../limiter/types.js'
import type { ResolvedPolicy } from '../policy.js'
import { nextFitMs } from './next-fit.js'
import type { WaitOptions } from './types.js'

export interface WaitBounds {
  maxWaitersPerKey: number
  maxWaiters: number
  concurrencyRecheckMs: number
}

interface Waiter {
  /** One attempt at the store: a consume, an acquire or a layered consume. */
  readonly attempt: () => Promise<Decision>
  /** Undo an admission nobody will use (the waiter aborted while its attempt was in flight). */
  readonly giveBack: (d: Decision) => Promise<void>
  /** After admission `d` of the waiter ahead, how long until this one fits, when the numbers say. */
  readonly fitsIn: (d: Decision) => number | undefined
  /** `performance.now()` past which it is refused. */
  readonly deadline: number
  readonly resolve: (d: Decision) => void
  readonly reject: (error: unknown) => void
  settled: boolean
  /** Clears the deadline timer and the abort listener. */
  cleanup: () => void
}

interface KeyQueue {
  readonly id: string
  readonly waiters: Waiter[]
  /** Concurrency: a release in this process can end the head's sleep early. */
  readonly concurrency: boolean
  /** When the sleeping head asks again (`performance.now()`); 0 while it is not sleeping. */
  wakeAt: number
  /** Ends the head's sleep now (a release, or the head went away). */
  wake: (() => void) | undefined
  /** The head's last denial: what a waiter refused before it reaches the head is told. */
  lastDenial: Decision | undefined
  /**
   * How many other processes seem to wait on this key: up by one each time the head slept the
   * store's retry time and was denied again (someone else took the units), down by a half when it
   * won. The head's sleep is spread over `retryAfterMs x (1 + random x rivals)`, so the heads of
   * several processes do not all wake in the same millisecond and pay a store call each for one unit.
   */
  rivals: number
  /** The last admission and when it came: the next head may know from it how long to sleep. */
  lastAdmitted: { decision: Decision; at: number } | undefined
}

const MAX_RIVALS = 8

const clock = () => performance.now()

/** `d` turned into a refusal for a waiter that cannot fit before its deadline. */
function timedOut(d: Decision, retryAfterMs: number): Decision {
  const out = {
    ...d,
    allowed: false,
    reason: 'timeout' as const,
    retryAfterMs: Math.max(0, Math.ceil(retryAfterMs)),
  }
  delete (out as AcquireDecision).lease
  return out
}

export class WaitQueues<Name extends string> {
  private readonly queues = new Map<string, KeyQueue>()
  private total = 0

  constructor(
    private readonly limiter: Omit<Limiter<Name>, WaitingMethod>,
    private readonly bounds: WaitBounds,
  ) {}

  /** Waiters queued now, all keys. */
  get size(): number {
    return this.total
  }

  /** A lease of (policy, key) was released in this process: the head may fit now. */
  released(policyId: string, key: string): void {
    this.queues.get(queueId([[policyId, key]]))?.wake?.()
  }

  wait(policy: Name, key: string, options?: WaitOptions): Promise<AcquireDecision>
  wait(checks: readonly Check<Name>[], options?: WaitOptions): Promise<LayeredDecision>
  wait(a: Name | readonly Check<Name>[], b?: string | WaitOptions, c?: WaitOptions): Promise<Decision> {
    try {
      return this.enqueue(a, b, c)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  private enqueue(
    a: Name | readonly Check<Name>[],
    b?: string | WaitOptions,
    c?: WaitOptions,
  ): Promise<Decision> {
    const limiter = this.limiter
    let attempt: () => Promise<Decision>
    let fitsIn: (d: Decision) => number | undefined = () => undefined
    let giveBack: (d: Decision) => Promise<void>
    let parts: [string, string][]
    let windowMs: number
    let concurrency = false
    let options: WaitOptions | undefined
    if (Array.isArray(a)) {
      const checks = a as readonly Check<Name>[]
      options = b as WaitOptions | undefined
      if (checks.length === 0)
        throw new InvalidOptionsError('wait: pass a non-empty array of { policy, key, cost? }')
      const policies = checks.map((check) => this.policy(check?.policy))
      if (policies.some((p) => p.algorithm === 'concurrency'))
        throw new InvalidOptionsError(
          'wait: a layered wait takes rate policies only; wait for a concurrency policy on its own',
        )
      parts = checks.map((check, i) => [policies[i]!.id, String(check.key)])
      windowMs = Math.min(...policies.map((p) => p.windowMs))
      attempt = () => limiter.consume(checks)
      giveBack = async () => {
        await Promise.all(checks.map((check) => limiter.refund(check.policy, check.key, check.cost ?? 1)))
      }
    } else {
      const name = a as Name
      const k = b as string
      options = c
      const p = this.policy(name)
      const cost = options?.cost
      const consumeOptions = cost === undefined ? undefined : { cost }
      parts = [[p.id, k]]
      windowMs = p.windowMs
      concurrency = p.algorithm === 'concurrency'
      // A cost above capacity never fits: the store says so at once, with no sleep before it.
      fitsIn = (d) => ((cost ?? 1) > p.capacity ? undefined : nextFitMs(p, d, cost ?? 1))
      if (concurrency) {
        attempt = () => limiter.acquire(name, k, consumeOptions)
        giveBack = async (d) => {
          await (d as AcquireDecision).lease?.release()
        }
      } else {
        attempt = () => limiter.consume(name, k, consumeOptions)
        giveBack = async () => {
          await limiter.refund(name, k, cost ?? 1)
        }
      }
    }
    if (options !== undefined && (typeof options !== 'object' || options === null))
      throw new InvalidOptionsError('wait: options must be { cost?, maxWaitMs?, signal? }')
    const maxWaitMs = options?.maxWaitMs ?? windowMs
    if (typeof maxWaitMs !== 'number' || !Number.isFinite(maxWaitMs) || maxWaitMs < 0)
      throw new InvalidOptionsError(`wait: maxWaitMs must be a number of ms >= 0, got ${String(maxWaitMs)}`)
    const signal = options?.signal
    if (signal !== undefined && !(signal instanceof AbortSignal))
      throw new InvalidOptionsError('wait: signal must be an AbortSignal')
    if (signal?.aborted) return Promise.reject(aborted(signal))

    // What a waiter refused before anyone was denied is told: no units left, no retry time known.
    const first = this.policy(Array.isArray(a) ? (a as readonly Check<Name>[])[0]!.policy : a)
    const placeholder: Decision = {
      allowed: false,
      limit: first.capacity,
      remaining: 0,
      resetMs: 0,
      retryAfterMs: 0,
      policy: first.name,
      key: parts[0]![1],
    }
    if (Array.isArray(a)) Object.assign(placeholder, { results: [], deniedBy: first.name })
    const id = queueId(parts)
    let queue = this.queues.get(id)
    if (queue !== undefined && queue.waiters.length >= this.bounds.maxWaitersPerKey)
      throw new TooManyWaitersError(
        `wait: ${queue.waiters.length} waiters already queued on this key (maxWaitersPerKey ${this.bounds.maxWaitersPerKey}); raise waiting.maxWaitersPerKey or shed load`,
      )
    if (this.total >= this.bounds.maxWaiters)
      throw new TooManyWaitersError(
        `wait: ${this.total} waiters already queued (maxWaiters ${this.bounds.maxWaiters}); raise waiting.maxWaiters or shed load`,
      )
    const deadline = clock() + maxWaitMs
    // Behind a head that sleeps past this deadline: refused now, without asking the store.
    if (queue !== undefined && queue.lastDenial !== undefined && queue.wakeAt > deadline)
      return Promise.resolve(timedOut(queue.lastDenial, queue.wakeAt - clock()))

    return new Promise<Decision>((resolve, reject) => {
      if (queue === undefined) {
        queue = {
          id,
          waiters: [],
          concurrency,
          wakeAt: 0,
          wake: undefined,
          lastDenial: undefined,
          rivals: 0,
          lastAdmitted: undefined,
        }
        this.queues.set(id, queue)
      }
      const q = queue
      const waiter: Waiter = {
        attempt,
        giveBack,
        fitsIn,
        deadline,
        resolve,
        reject,
        settled: false,
        cleanup: () => {},
      }
      const onAbort = () => this.finish(q, waiter, undefined, aborted(signal!))
      // A waiter behind the head times out on its own at its deadline (the head is answered by
      // its own attempt, which is already in flight).
      const timer = setTimeout(() => {
        if (q.waiters[0] !== waiter)
          this.finish(q, waiter, timedOut(q.lastDenial ?? placeholder, Math.max(0, q.wakeAt - clock())))
      }, maxWaitMs + 1)
      signal?.addEventListener('abort', onAbort, { once: true })
      waiter.cleanup = () => {
        clearTimeout(timer)
        signal?.removeEventListener('abort', onAbort)
      }
      q.waiters.push(waiter)
      this.total++
      if (q.waiters.length === 1) void this.drain(q)
    })
  }

  private policy(name: unknown): ResolvedPolicy {
    const policy =
      typeof name === 'string' ? (this.limiter.policies as Record<string, ResolvedPolicy>)[name] : undefined
    if (policy === undefined || !Object.hasOwn(this.limiter.policies, name as string)) {
      throw new UnknownPolicyError(
        `unknown policy ${JSON.stringify(name)}; configured: ${Object.keys(this.limiter.policies).join(', ')}`,
      )
    }
    return policy
  }

  /** Settle a waiter once: resolve with `d` or reject with `error`, and leave the queue. */
  private finish(q: KeyQueue, waiter: Waiter, d: Decision | undefined, error?: unknown): void {
    if (waiter.settled) return
    waiter.settled = true
    waiter.cleanup()
    const at = q.waiters.indexOf(waiter)
    if (at >= 0) {
      q.waiters.splice(at, 1)
      this.total--
      // The head left while asleep: the next one takes over.
      if (at === 0) q.wake?.()
    }
    if (d !== undefined) waiter.resolve(d)
    else waiter.reject(error)
  }

  /** Serve the queue's waiters in order, one store call at a time, until it is empty. */
  private async drain(q: KeyQueue): Promise<void> {
    for (let head = q.waiters[0]; head !== undefined; head = q.waiters[0]) {
      await this.serve(q, head)
    }
    if (this.queues.get(q.id) === q) this.queues.delete(q.id)
  }

  private async serve(q: KeyQueue, head: Waiter): Promise<void> {
    // The waiter ahead was just admitted, and its numbers say this one cannot fit yet: sleep until
    // it can rather than pay a store call for a denial.
    const ahead = q.lastAdmitted
    q.lastAdmitted = undefined
    const fits = ahead === undefined ? undefined : head.fitsIn(ahead.decision)
    if (ahead !== undefined && fits !== undefined && fits > 0) {
      const sleepMs = fits - (clock() - ahead.at)
      if (sleepMs > head.deadline - clock() + 1) {
        this.finish(q, head, timedOut({ ...ahead.decision, allowed: false, remaining: 0 }, sleepMs))
        return
      }
      if (sleepMs > 0) await this.sleep(q, sleepMs)
    }
    for (let slept = false; ; slept = true) {
      if (head.settled) return
      let d: Decision
      try {
        d = await head.attempt()
      } catch (error) {
        this.finish(q, head, undefined, error)
        return
      }
      if (head.settled) {
        // Aborted while the store answered: what it admitted goes back.
        if (d.allowed) await head.giveBack(d).catch(() => {})
        return
      }
      if (slept && !q.concurrency)
        q.rivals = d.allowed ? Math.max(0, q.rivals - 0.25) : Math.min(MAX_RIVALS, q.rivals + 1)
      // Nothing to wait for: admitted, a store that cannot answer (the fallback decided), a cost
      // above the policy's capacity, which no amount of waiting makes fit, or a denied key.
      if (
        d.allowed ||
        d.reason === 'store_unavailable' ||
        d.reason === 'cost_above_capacity' ||
        d.reason === 'denied'
      ) {
        q.lastDenial = undefined
        if (d.allowed) q.lastAdmitted = { decision: d, at: clock() }
        this.finish(q, head, d)
        return
      }
      q.lastDenial = d
      const now = clock()
      const left = head.deadline - now
      let sleepMs = d.retryAfterMs
      if (q.concurrency) {
        // A release (here or in another process) can come at any time: ask again after a short
        // while, at a local release, or at the deadline, whichever is first.
        if (left <= 0) {
          this.finish(q, head, timedOut(d, d.retryAfterMs))
          return
        }
        sleepMs = Math.min(sleepMs, left, this.bounds.concurrencyRecheckMs)
      } else if (sleepMs > left) {
        // Decided up front: no sleeping to fail.
        this.finish(q, head, timedOut(d, sleepMs))
        return
      } else if (q.rivals > 0) {
        // Contended across processes: spread the wake-ups (never past the deadline).
        sleepMs = Math.min(left, sleepMs * (1 + Math.random() * q.rivals))
      }
      q.wakeAt = now + sleepMs
      if (!q.concurrency) this.refuseBehind(q, d)
      await this.sleep(q, sleepMs)
      q.wakeAt = 0
    }
  }

  /**
   * Sleep `ms`, or less when woken (a release, the head aborted). One ms more than asked: a timer
   * counts from the event loop's cached time, so it can fire up to a millisecond early, and the
   * store's clock counts whole ms; a head that woke early would pay a store call to be told "1 ms".
   */
  private sleep(q: KeyQueue, ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, Math.max(1, Math.ceil(ms)) + 1)
      function done() {
        clearTimeout(timer)
        q.wake = undefined
        resolve()
      }
      q.wake = done
    })
  }

  /** Waiters behind the head whose deadline comes before the head's next try cannot fit: refuse them now. */
  private refuseBehind(q: KeyQueue, d: Decision): void {
    for (const waiter of q.waiters.slice(1)) {
      if (waiter.deadline < q.wakeAt) this.finish(q, waiter, timedOut(d, q.wakeAt - clock()))
    }
  }
}

function queueId(parts: readonly (readonly [string, string])[]): string {
  return JSON.stringify(parts)
}

function aborted(signal: AbortSignal): WaitAbortedError {
  return new WaitAbortedError('wait: aborted by its signal', { cause: signal.reason })
}
