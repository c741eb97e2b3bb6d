// The HTTP core's header writer (per-policy parts computed once, numbers reused) writes exactly what
// rateLimitHeaders writes: every algorithm, admits and denials, single and layered, every family.
import { describe, expect, it } from 'vitest'
import {
  type HeaderFamilies,
  headerWriter,
  rateLimitHeaders,
} from '../../packages/sluice/src/http/headers.js'
import type { Decision, LayeredDecision } from '../../packages/sluice/src/limiter.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'

const FAMILIES: HeaderFamilies[] = ['both', 'legacy', 'draft', 'none']

function setup() {
  let nowMs = 1_700_000_000_000
  const limiter = createLimiter({
    store: memoryStore({ now: () => nowMs }),
    policies: {
      fixed: { algorithm: 'fixed-window', limit: 3, window: '10s' },
      log: { algorithm: 'sliding-window-log', limit: 3, window: '10s' },
      counter: { algorithm: 'sliding-window-counter', limit: 3, window: '10s' },
      bucket: { algorithm: 'token-bucket', limit: 2, window: '1s', burst: 4 },
      gcra: { algorithm: 'gcra', limit: 3, window: '2s', burst: 2 },
      'odd.name-2': { algorithm: 'concurrency', limit: 2, timeout: '30s' },
    },
  })
  return { limiter, advance: (ms: number) => (nowMs += ms), now: () => nowMs }
}

describe('headerWriter', () => {
  it('matches rateLimitHeaders for every decision of a run, in every family', async () => {
    const { limiter, advance, now } = setup()
    const writers = FAMILIES.map((f) => [f, headerWriter(limiter.policies, f)] as const)
    const names = Object.keys(limiter.policies) as (keyof typeof limiter.policies & string)[]
    let compared = 0
    let denials = 0
    for (let i = 0; i < 40; i++) {
      const decisions: (Decision | LayeredDecision)[] = []
      for (const name of names) decisions.push(limiter.consumeSync(name, `k${i % 3}`))
      decisions.push(
        await limiter.consume([
          { policy: 'fixed', key: 'a' },
          { policy: 'bucket', key: 'a', cost: 2 },
          { policy: 'fixed', key: 'b' },
        ]),
      )
      for (const decision of decisions) {
        if (!decision.allowed) denials++
        for (const [headers, write] of writers) {
          const wallMs = now() + (i % 7) * 137
          expect(write(decision, wallMs)).toEqual(
            rateLimitHeaders(decision, limiter.policies, { headers, nowMs: wallMs }),
          )
          // Same keys in the same order: adapters send them as listed.
          expect(Object.keys(write(decision, wallMs))).toEqual(
            Object.keys(rateLimitHeaders(decision, limiter.policies, { headers, nowMs: wallMs })),
          )
          compared++
        }
      }
      advance(i % 5 === 0 ? 3_100 : 450)
    }
    expect(compared).toBe(40 * (names.length + 1) * FAMILIES.length)
    expect(denials).toBeGreaterThan(20)
  })

  it('writes a decision of a policy it does not know as rateLimitHeaders does', () => {
    const { limiter } = setup()
    const write = headerWriter({}, 'both')
    const d = limiter.consumeSync('fixed', 'x')
    expect(write(d, 1_000)).toEqual(rateLimitHeaders(d, {}, { headers: 'both', nowMs: 1_000 }))
  })
})
