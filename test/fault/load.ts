// A load loop for fault tests: `inFlight` workers (clients), each sending one decision after
// another with a short think time, every decision timed and kept. The think time also yields to
// the event loop, so timers (the fault schedule, timeouts) run when decisions need no I/O.
import { monitorEventLoopDelay } from 'node:perf_hooks'
import type { Decision, Limiter } from '../../packages/sluice/src/limiter.js'

export interface Sample {
  /** When the call started, ms since the load started. */
  at: number
  latencyMs: number
  key: string
  allowed: boolean
  degraded: boolean
  reason: Decision['reason'] | 'threw'
}

export interface Load {
  readonly samples: Sample[]
  /** ms since the load started. */
  now(): number
  /**
   * The longest the event loop was blocked (ms) while the load ran: on a shared machine, CPU
   * starvation delays every decision by this much, whatever the limiter does.
   */
  loopDelayMaxMs(): number
  /** Resolves once a decision that started after `since` (load ms) matches `test`, or rejects after `timeoutMs`. */
  waitFor(test: (s: Sample) => boolean, since: number, timeoutMs: number): Promise<Sample>
  stop(): Promise<Sample[]>
}

export function startLoad(
  limiter: Limiter,
  options: { policy: string; keys: readonly string[]; inFlight: number; thinkMs?: number },
): Load {
  const origin = performance.now()
  const samples: Sample[] = []
  let stopped = false
  const now = () => performance.now() - origin
  const loopDelay = monitorEventLoopDelay({ resolution: 5 })
  loopDelay.enable()

  async function worker(index: number): Promise<void> {
    let n = index
    while (!stopped) {
      const key = options.keys[n++ % options.keys.length]!
      const at = now()
      try {
        const d = await limiter.consume(options.policy, key)
        samples.push({
          at,
          latencyMs: now() - at,
          key,
          allowed: d.allowed,
          degraded: d.degraded === true,
          reason: d.reason,
        })
      } catch {
        samples.push({ at, latencyMs: now() - at, key, allowed: false, degraded: false, reason: 'threw' })
      }
      // A client's think time between two requests; without it, decisions answered without I/O
      // (circuit open) would spin the CPU that the Redis servers of the test share.
      await new Promise((resolve) => setTimeout(resolve, options.thinkMs ?? 2))
    }
  }
  const workers = Array.from({ length: options.inFlight }, (_, i) => worker(i))

  return {
    samples,
    now,
    loopDelayMaxMs: () => loopDelay.max / 1e6,
    async waitFor(test, since, timeoutMs) {
      const deadline = now() + timeoutMs
      let scanned = 0
      while (now() < deadline) {
        for (; scanned < samples.length; scanned++) {
          const s = samples[scanned]!
          if (s.at >= since && test(s)) return s
        }
        await new Promise((r) => setTimeout(r, 5))
      }
      throw new Error(`no matching decision within ${timeoutMs} ms`)
    },
    async stop() {
      stopped = true
      await Promise.all(workers)
      loopDelay.disable()
      return samples
    },
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
