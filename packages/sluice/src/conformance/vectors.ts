// Conformance vectors: (policy, steps, expected decisions). One table for every store.
// Every expected number below is derived by hand from the semantics in docs/policies.md; the
// comment beside a step shows the arithmetic. Times in comments are ms after the vector's start.
import type { Policy } from '../policy.js'
import { calendarVectors } from './calendar-vectors.js'

export interface ExpectedResult {
  allowed?: boolean
  remaining?: number
  retryAfterMs?: number
  resetMs?: number
  blocked?: boolean
}

export interface VectorStep {
  /** ms to advance the clock before this step (negative: the clock steps backwards). */
  after?: number
  op?: 'consume' | 'peek' | 'refund' | 'reset' | 'block'
  cost?: number
  /** Concurrency: the lease id to acquire (consume) or release (refund). */
  lease?: string
  /** For op 'block'. */
  blockMs?: number
  /** The result (the first layer's, for a layered step). */
  expect?: ExpectedResult
  /**
   * Several (policy, key, cost) applied as one atomic unit: consume commits all or none. `policy` is
   * `'p'` (the vector's policy) or a name from `Vector.policies`; `key` defaults to the vector's key.
   */
  layers?: { policy: string; key?: string; cost?: number; lease?: string }[]
  /** One expectation per layer, in order. */
  expectLayers?: ExpectedResult[]
  /**
   * From this step on, the vector's policy `'p'` has these parameters: the same name (so the same
   * id and the same stored key), other numbers. The store reads state written under the old ones.
   */
  policy?: Policy
}

export interface Vector {
  name: string
  policy: Policy
  /** Clock at the first step (default 1_700_000_000_000, a multiple of 100_000 ms). */
  start?: number
  key?: string
  /** More named policies, for layered steps. */
  policies?: Record<string, Policy>
  steps: VectorStep[]
}

/** The default start: a multiple of 1s, 10s and 100s, so sliding-window-counter windows open at t=0. */
const T0 = 1_700_000_000_000

const fw = (limit: number, window: string | number = '1s') =>
  ({ algorithm: 'fixed-window', limit, window }) as const
const swl = (limit: number, window: string | number = '1s') =>
  ({ algorithm: 'sliding-window-log', limit, window }) as const
const swc = (limit: number, window: string | number = '1s') =>
  ({ algorithm: 'sliding-window-counter', limit, window }) as const
const tb = (limit: number, burst: number, window: string | number = '1s') =>
  ({ algorithm: 'token-bucket', limit, window, burst }) as const
const gcra = (limit: number, burst: number, window: string | number = '1s') =>
  ({ algorithm: 'gcra', limit, window, burst }) as const
const conc = (limit: number, timeout: string | number = '1s') =>
  ({ algorithm: 'concurrency', limit, timeout }) as const

const fixedWindow: Vector[] = [
  {
    name: 'fixed-window: the window closes at exactly start + window',
    policy: fw(2),
    steps: [
      { expect: { allowed: true, remaining: 1, retryAfterMs: 0, resetMs: 1000 } },
      { expect: { allowed: true, remaining: 0, resetMs: 1000 } },
      { expect: { allowed: false, remaining: 0, retryAfterMs: 1000, resetMs: 1000 } },
      { after: 999, expect: { allowed: false, remaining: 0, retryAfterMs: 1, resetMs: 1 } },
      // t=1000: the old window [0, 1000) is over; a new one opens now.
      { after: 1, expect: { allowed: true, remaining: 1, retryAfterMs: 0, resetMs: 1000 } },
    ],
  },
  {
    name: 'fixed-window: a window opens at the first request, not at a clock boundary',
    policy: fw(1),
    start: T0 + 123,
    steps: [
      { expect: { allowed: true, remaining: 0, resetMs: 1000 } },
      { after: 500, expect: { allowed: false, retryAfterMs: 500, resetMs: 500 } },
      // t=877 is T0+1000, a clock boundary: still inside the window that opened at T0+123.
      { after: 377, expect: { allowed: false, retryAfterMs: 123, resetMs: 123 } },
      { after: 123, expect: { allowed: true, remaining: 0, resetMs: 1000 } },
    ],
  },
  {
    name: 'fixed-window: cost > 1 is all or nothing; a denied cost leaves the count alone',
    policy: fw(5),
    steps: [
      { cost: 3, expect: { allowed: true, remaining: 2, resetMs: 1000 } },
      { after: 100, cost: 3, expect: { allowed: false, remaining: 2, retryAfterMs: 900, resetMs: 900 } },
      { cost: 2, expect: { allowed: true, remaining: 0, resetMs: 900 } },
      { cost: 1, expect: { allowed: false, remaining: 0, retryAfterMs: 900 } },
    ],
  },
  {
    name: 'fixed-window: denied requests do not extend the window',
    policy: fw(2),
    steps: [
      {},
      {},
      { after: 300, expect: { allowed: false, retryAfterMs: 700 } },
      { after: 300, expect: { allowed: false, retryAfterMs: 400 } },
      { after: 399, expect: { allowed: false, retryAfterMs: 1 } },
      { after: 1, expect: { allowed: true, remaining: 1, resetMs: 1000 } },
    ],
  },
  {
    name: 'fixed-window: refund gives units back in the same window',
    policy: fw(3),
    steps: [
      { cost: 3, expect: { allowed: true, remaining: 0 } },
      { after: 200, op: 'refund', cost: 1 },
      { op: 'peek', expect: { allowed: true, remaining: 1, resetMs: 800 } },
      { expect: { allowed: true, remaining: 0, resetMs: 800 } },
      { expect: { allowed: false, remaining: 0, retryAfterMs: 800 } },
    ],
  },
  {
    name: 'fixed-window: refunding more than was spent empties the key',
    policy: fw(3),
    steps: [
      { cost: 2 },
      { op: 'refund', cost: 3 },
      { op: 'peek', expect: { allowed: true, remaining: 3, resetMs: 0 } },
      // The window opened by the refunded request is gone: a new one opens at t=400.
      { after: 400, cost: 3, expect: { allowed: true, remaining: 0, resetMs: 1000 } },
    ],
  },
  {
    name: 'fixed-window: reset forgets the window',
    policy: fw(1),
    steps: [
      {},
      { expect: { allowed: false } },
      { after: 200, op: 'reset' },
      { expect: { allowed: true, remaining: 0, resetMs: 1000 } },
      // The new window opened at t=200, so t=1000 is still inside it.
      { after: 800, expect: { allowed: false, retryAfterMs: 200 } },
    ],
  },
  {
    name: 'fixed-window: peek charges nothing',
    policy: fw(2),
    steps: [
      { op: 'peek', expect: { allowed: true, remaining: 2, resetMs: 0, retryAfterMs: 0 } },
      { op: 'peek', cost: 2, expect: { allowed: true, remaining: 2 } },
      { expect: { allowed: true, remaining: 1 } },
      { after: 10, op: 'peek', expect: { allowed: true, remaining: 1, resetMs: 990 } },
      { op: 'peek', cost: 2, expect: { allowed: false, remaining: 1, retryAfterMs: 990 } },
      { expect: { allowed: true, remaining: 0 } },
    ],
  },
  {
    name: 'fixed-window: a clock stepping backwards stays in the stored window',
    policy: fw(2),
    steps: [
      {},
      { expect: { allowed: true, remaining: 0 } },
      // t=-500: before the window opened; it is not a fresh window.
      { after: -500, expect: { allowed: false, remaining: 0, retryAfterMs: 1500, resetMs: 1500 } },
      { after: 1499, expect: { allowed: false, retryAfterMs: 1 } },
      { after: 1, expect: { allowed: true, remaining: 1 } },
    ],
  },
  {
    name: 'fixed-window: a clock stepping back into an older window keeps the newer one',
    policy: fw(2),
    steps: [
      { cost: 2 },
      // t=1500: window [1500, 2500) opens.
      { after: 1500, expect: { allowed: true, remaining: 1, resetMs: 1000 } },
      // t=900: still counted in [1500, 2500): one unit left, ends 1600 ms from now.
      { after: -600, expect: { allowed: true, remaining: 0, resetMs: 1600 } },
      { expect: { allowed: false, retryAfterMs: 1600 } },
    ],
  },
  {
    name: 'fixed-window: after the window, peek shows a full, empty key',
    policy: fw(4),
    steps: [{ cost: 4 }, { after: 1000, op: 'peek', expect: { allowed: true, remaining: 4, resetMs: 0 } }],
  },
  {
    name: 'fixed-window: a block shorter than the window waits for the window',
    policy: fw(1),
    steps: [
      {},
      { op: 'block', blockMs: 300 },
      // retryAfter = max(block 300, window 1000).
      { expect: { allowed: false, blocked: true, remaining: 0, retryAfterMs: 1000, resetMs: 1000 } },
      { after: 300, expect: { allowed: false, blocked: false, retryAfterMs: 700 } },
      { after: 700, expect: { allowed: true, remaining: 0 } },
    ],
  },
]

const slidingWindowLog: Vector[] = [
  {
    name: 'sliding-window-log: an entry leaves the window at exactly its time + window',
    policy: swl(2),
    steps: [
      { expect: { allowed: true, remaining: 1, resetMs: 1000 } },
      { after: 400, expect: { allowed: true, remaining: 0, resetMs: 1000 } },
      // Entries [0, 400]; one must leave: the entry at 0 leaves at 1000.
      { expect: { allowed: false, remaining: 0, retryAfterMs: 600, resetMs: 1000 } },
      { after: 599, expect: { allowed: false, retryAfterMs: 1, resetMs: 401 } },
      { after: 1, expect: { allowed: true, remaining: 0, resetMs: 1000 } },
    ],
  },
  {
    name: 'sliding-window-log: denied requests are not recorded and never extend the lockout',
    policy: swl(2),
    steps: [
      {},
      {},
      { after: 100, expect: { allowed: false, retryAfterMs: 900 } },
      { after: 400, expect: { allowed: false, retryAfterMs: 500 } },
      { after: 400, expect: { allowed: false, retryAfterMs: 100 } },
      { after: 100, expect: { allowed: true, remaining: 1, resetMs: 1000 } },
    ],
  },
  {
    name: 'sliding-window-log: cost > 1 waits for as many entries as it needs',
    policy: swl(4),
    steps: [
      { cost: 2 },
      { after: 300, cost: 2, expect: { allowed: true, remaining: 0, resetMs: 1000 } },
      // Entries [0, 0, 300, 300] at t=400. Cost 3 needs 3 to leave: the third leaves at 1300.
      { after: 100, cost: 3, expect: { allowed: false, remaining: 0, retryAfterMs: 900, resetMs: 900 } },
      // Cost 2 needs 2 to leave: the second leaves at 1000.
      { cost: 2, expect: { allowed: false, retryAfterMs: 600 } },
      { after: 600, cost: 2, expect: { allowed: true, remaining: 0, resetMs: 1000 } },
    ],
  },
  {
    name: 'sliding-window-log: a denied cost > 1 reports the units that are left',
    policy: swl(5),
    steps: [
      { cost: 3, expect: { allowed: true, remaining: 2 } },
      { after: 200, cost: 3, expect: { allowed: false, remaining: 2, retryAfterMs: 800, resetMs: 800 } },
      { after: 800, cost: 3, expect: { allowed: true, remaining: 2, resetMs: 1000 } },
    ],
  },
  {
    name: 'sliding-window-log: refund removes the newest entries',
    policy: swl(2),
    steps: [
      {},
      { after: 100 },
      { op: 'refund', cost: 1 },
      // Left: the entry at 0, which leaves at 1000.
      { op: 'peek', expect: { allowed: true, remaining: 1, resetMs: 900 } },
      { op: 'refund', cost: 5 },
      { op: 'peek', expect: { allowed: true, remaining: 2, resetMs: 0 } },
    ],
  },
  {
    name: 'sliding-window-log: reset forgets every entry',
    policy: swl(3),
    steps: [
      { cost: 3 },
      { expect: { allowed: false } },
      { after: 10, op: 'reset' },
      { expect: { allowed: true, remaining: 2, resetMs: 1000 } },
    ],
  },
  {
    name: 'sliding-window-log: peek charges nothing',
    policy: swl(3),
    steps: [
      { op: 'peek', expect: { allowed: true, remaining: 3, resetMs: 0 } },
      { cost: 2 },
      { after: 250, op: 'peek', cost: 2, expect: { allowed: false, remaining: 1, retryAfterMs: 750 } },
      { op: 'peek', expect: { allowed: true, remaining: 1, resetMs: 750 } },
      { expect: { allowed: true, remaining: 0, resetMs: 1000 } },
    ],
  },
  {
    name: 'sliding-window-log: a clock stepping backwards records at the newest time seen',
    policy: swl(2),
    steps: [
      { after: 500, expect: { allowed: true, remaining: 1 } },
      // t=200 records at 500: entries [500, 500], both leave at 1500.
      { after: -300, expect: { allowed: true, remaining: 0, resetMs: 1300 } },
      { expect: { allowed: false, retryAfterMs: 1300 } },
      { after: 1100, expect: { allowed: false, retryAfterMs: 200 } },
      { after: 200, expect: { allowed: true, remaining: 1 } },
    ],
  },
  {
    name: 'sliding-window-log: exhausted, then a clock stepping backwards is still denied',
    policy: swl(2),
    steps: [
      { after: 100 },
      { after: 100, expect: { remaining: 0 } },
      // t=50: entries [100, 200]; the one at 100 leaves at 1100.
      { after: -150, expect: { allowed: false, retryAfterMs: 1050, resetMs: 1150 } },
    ],
  },
  {
    name: 'sliding-window-log: entries leave one at a time',
    policy: swl(3),
    steps: [
      {},
      { after: 100 },
      { after: 100, expect: { remaining: 0 } },
      // t=1000: the entry at 0 has left; entries [100, 200, 1000].
      { after: 800, expect: { allowed: true, remaining: 0, resetMs: 1000 } },
      { after: 100, op: 'peek', expect: { allowed: true, remaining: 1, resetMs: 900 } },
      { after: 100, op: 'peek', expect: { allowed: true, remaining: 2, resetMs: 800 } },
    ],
  },
  {
    name: 'sliding-window-log: a long window in minutes',
    policy: swl(1, '1m'),
    steps: [
      { expect: { allowed: true, remaining: 0, resetMs: 60_000 } },
      { after: 59_999, expect: { allowed: false, retryAfterMs: 1 } },
      { after: 1, expect: { allowed: true, resetMs: 60_000 } },
    ],
  },
]

const slidingWindowCounter: Vector[] = [
  {
    name: 'sliding-window-counter: the previous window weighs until its weight is small enough',
    policy: swc(10),
    steps: [
      // Window [0, 1000): current 10. Reset when it stops counting, at 2000.
      { cost: 10, expect: { allowed: true, remaining: 0, resetMs: 2000 } },
      // Next window only: needs 10 x (1000 - e)/1000 + 1 <= 10, e >= 100: t=1100.
      { expect: { allowed: false, remaining: 0, retryAfterMs: 1100, resetMs: 2000 } },
      // t=1099: previous 10 weighs 10 x 901/1000 = 9.01; remaining floor(0.99) = 0.
      { after: 1099, expect: { allowed: false, remaining: 0, retryAfterMs: 1, resetMs: 901 } },
      // t=1100: 9 + 1 = 10 fits. Now current 1, which counts until 3000.
      { after: 1, expect: { allowed: true, remaining: 0, resetMs: 1900 } },
    ],
  },
  {
    name: 'sliding-window-counter: windows are aligned to multiples of the window',
    policy: swc(2),
    start: T0 + 999,
    steps: [
      { expect: { allowed: true, remaining: 1, resetMs: 1001 } },
      { expect: { allowed: true, remaining: 0, resetMs: 1001 } },
      // T0+1000: a new window; previous 2 at full weight. Fits when 2 x (1000 - e)/1000 <= 1: e >= 500.
      { after: 1, expect: { allowed: false, remaining: 0, retryAfterMs: 500, resetMs: 1000 } },
      { after: 499, expect: { allowed: false, retryAfterMs: 1 } },
      // e=500: 2 x 0.5 + 1 = 2 fits; current 1 counts until T0+3000.
      { after: 1, expect: { allowed: true, remaining: 0, resetMs: 1500 } },
    ],
  },
  {
    name: 'sliding-window-counter: two windows later the key is empty',
    policy: swc(5),
    steps: [
      { cost: 5 },
      // t=1999: previous 5 weighs 5 x 1/1000 = 0.005; remaining floor(4.995) = 4.
      { after: 1999, op: 'peek', expect: { allowed: true, remaining: 4, resetMs: 1 } },
      { after: 1, op: 'peek', expect: { allowed: true, remaining: 5, resetMs: 0 } },
    ],
  },
  {
    name: 'sliding-window-counter: cost > 1 waits for the weight to decay exactly',
    policy: swc(10),
    steps: [
      { cost: 8, expect: { allowed: true, remaining: 2, resetMs: 2000 } },
      // t=1000: previous 8; cost 5 fits when 8 x (1000 - e) <= 5 x 1000: e >= 375.
      { after: 1000, cost: 5, expect: { allowed: false, remaining: 2, retryAfterMs: 375, resetMs: 1000 } },
      { after: 374, cost: 5, expect: { allowed: false, retryAfterMs: 1 } },
      { after: 1, cost: 5, expect: { allowed: true, remaining: 0, resetMs: 1625 } },
    ],
  },
  {
    name: 'sliding-window-counter: a cost that only the next window can fit',
    policy: swc(10),
    steps: [
      { cost: 4 },
      { after: 1000, cost: 6, expect: { allowed: true, remaining: 0 } },
      // t=1000: previous 4, current 6. Cost 5 cannot fit this window (6 + 5 > 10); in the next,
      // previous 6 must weigh <= 5: 6 x (1000 - e) <= 5000, e >= 167 (floor(5000/6) = 833). t=2167.
      { cost: 5, expect: { allowed: false, remaining: 0, retryAfterMs: 1167, resetMs: 2000 } },
      { after: 1166, cost: 5, expect: { allowed: false, retryAfterMs: 1 } },
      { after: 1, cost: 5, expect: { allowed: true, remaining: 0 } },
    ],
  },
  {
    name: 'sliding-window-counter: refund takes from the current window',
    policy: swc(5),
    steps: [
      { cost: 3 },
      { op: 'refund', cost: 2 },
      { op: 'peek', expect: { allowed: true, remaining: 4, resetMs: 2000 } },
    ],
  },
  {
    name: 'sliding-window-counter: refund beyond the current window takes from the previous one',
    policy: swc(5),
    steps: [
      { cost: 3 },
      // t=1000: previous 3 (full weight), current 1 after this.
      { after: 1000, expect: { allowed: true, remaining: 1, resetMs: 2000 } },
      // Refund 3: current 1 -> 0, then 2 from previous: 3 -> 1.
      { op: 'refund', cost: 3 },
      { op: 'peek', expect: { allowed: true, remaining: 4, resetMs: 1000 } },
    ],
  },
  {
    name: 'sliding-window-counter: reset forgets both windows',
    policy: swc(2),
    steps: [
      { cost: 2 },
      { after: 1000, expect: { allowed: false } },
      { op: 'reset' },
      { expect: { allowed: true, remaining: 1, resetMs: 2000 } },
    ],
  },
  {
    name: 'sliding-window-counter: peek charges nothing',
    policy: swc(4),
    steps: [
      { op: 'peek', expect: { allowed: true, remaining: 4, resetMs: 0 } },
      { cost: 3 },
      // t=500: current 3 + 2 > 4, and it cannot fit this window. In the next, previous 3 must weigh
      // <= 2: 3 x (1000 - e) <= 2000, e >= 334 (3 x 666 = 1998). 500 + 334 = 834.
      { after: 500, op: 'peek', cost: 2, expect: { allowed: false, remaining: 1, retryAfterMs: 834 } },
      { op: 'peek', expect: { allowed: true, remaining: 1, resetMs: 1500 } },
      { expect: { allowed: true, remaining: 0 } },
    ],
  },
  {
    name: 'sliding-window-counter: a clock stepping backwards counts from the stored window start',
    policy: swc(2),
    steps: [
      { after: 500 },
      { expect: { allowed: true, remaining: 0, resetMs: 1500 } },
      // t=1500: previous 2 weighs 1; current 1 fits exactly.
      { after: 1000, expect: { allowed: true, remaining: 0, resetMs: 1500 } },
      // t=500: judged at 1000 (elapsed 0): 2 + 1 + 1 > 2. Room 0 in this window, so previous must
      // weigh 0: at 2000, 1500 ms from now. Current 1 counts until 3000.
      { after: -1000, expect: { allowed: false, remaining: 0, retryAfterMs: 1500, resetMs: 2500 } },
      { after: 1499, expect: { allowed: false, retryAfterMs: 1 } },
      { after: 1, expect: { allowed: true, remaining: 0 } },
    ],
  },
  {
    name: 'sliding-window-counter: a minute window starting mid-window',
    policy: swc(1, '1m'),
    // T0 is 20 s into a minute-aligned window.
    steps: [
      { expect: { allowed: true, remaining: 0, resetMs: 100_000 } },
      // Cannot fit this window; next window: previous 1 must weigh 0, at its end: 40 s + 60 s.
      { expect: { allowed: false, retryAfterMs: 100_000, resetMs: 100_000 } },
      { after: 99_999, expect: { allowed: false, retryAfterMs: 1, resetMs: 1 } },
      { after: 1, expect: { allowed: true, resetMs: 120_000 } },
    ],
  },
  {
    name: 'sliding-window-counter: remaining counts the previous window by its weight',
    policy: swc(10),
    steps: [
      { cost: 10 },
      // t=1500: previous 10 weighs 5.
      { after: 1500, op: 'peek', expect: { allowed: true, remaining: 5, resetMs: 500 } },
      { after: 250, op: 'peek', expect: { allowed: true, remaining: 7, resetMs: 250 } },
    ],
  },
]

const tokenBucket: Vector[] = [
  {
    name: 'token-bucket: burst then exact refill wait',
    policy: tb(10, 2),
    steps: [
      { expect: { allowed: true, remaining: 1, resetMs: 100, retryAfterMs: 0 } },
      { expect: { allowed: true, remaining: 0, resetMs: 200 } },
      { expect: { allowed: false, remaining: 0, retryAfterMs: 100, resetMs: 200 } },
      { after: 100, expect: { allowed: true, remaining: 0, resetMs: 200 } },
    ],
  },
  {
    name: 'token-bucket: fractional refill, a token every 333.3 ms',
    policy: tb(3, 1),
    steps: [
      { expect: { allowed: true, remaining: 0, resetMs: 334 } },
      { expect: { allowed: false, retryAfterMs: 334, resetMs: 334 } },
      // t=333: 0.999 tokens.
      { after: 333, expect: { allowed: false, remaining: 0, retryAfterMs: 1, resetMs: 1 } },
      // t=334: 1.002 tokens, capped at 1.
      { after: 1, expect: { allowed: true, remaining: 0, resetMs: 334 } },
    ],
  },
  {
    name: 'token-bucket: fractions carry over, so 3/s admits exactly 3 per second',
    policy: tb(3, 3),
    steps: [
      { cost: 3, expect: { allowed: true, remaining: 0, resetMs: 1000 } },
      // t=100: 0.3 tokens; 0.7 more take 700/3 -> 234 ms.
      { after: 100, expect: { allowed: false, retryAfterMs: 234 } },
      // t=334: 1.002 -> 0.002 left.
      { after: 234, expect: { allowed: true, remaining: 0, resetMs: 1000 } },
      // t=667: 0.002 + 0.999 = 1.001 -> 0.001 left.
      { after: 333, expect: { allowed: true, remaining: 0, resetMs: 1000 } },
      // t=1000: 0.001 + 0.999 = 1 -> 0.
      { after: 333, expect: { allowed: true, remaining: 0, resetMs: 1000 } },
      { expect: { allowed: false, retryAfterMs: 334 } },
    ],
  },
  {
    name: 'token-bucket: idle refill is capped at burst',
    policy: tb(10, 5),
    steps: [
      { cost: 5, expect: { remaining: 0, resetMs: 500 } },
      { after: 10_000, op: 'peek', expect: { allowed: true, remaining: 5, resetMs: 0 } },
      { cost: 5, expect: { allowed: true, remaining: 0 } },
      { expect: { allowed: false, retryAfterMs: 100 } },
    ],
  },
  {
    name: 'token-bucket: cost > 1 waits for exactly enough tokens',
    policy: tb(10, 10),
    steps: [
      { cost: 10, expect: { remaining: 0, resetMs: 1000 } },
      // t=50: 0.5 tokens; 3.5 more at 10/s: 350 ms.
      { after: 50, cost: 4, expect: { allowed: false, remaining: 0, retryAfterMs: 350, resetMs: 950 } },
      { after: 349, cost: 4, expect: { allowed: false, retryAfterMs: 1 } },
      { after: 1, cost: 4, expect: { allowed: true, remaining: 0, resetMs: 1000 } },
    ],
  },
  {
    name: 'token-bucket: a denied cost reports the whole tokens that are there',
    policy: tb(10, 10),
    steps: [
      { cost: 8, expect: { remaining: 2 } },
      { cost: 3, expect: { allowed: false, remaining: 2, retryAfterMs: 100 } },
      { cost: 2, expect: { allowed: true, remaining: 0 } },
    ],
  },
  {
    name: 'token-bucket: refund puts tokens back, never above burst',
    policy: tb(5, 5),
    steps: [
      { cost: 5 },
      { op: 'refund', cost: 2 },
      // 2 tokens; 3 missing at 5/s: 600 ms.
      { op: 'peek', expect: { allowed: true, remaining: 2, resetMs: 600 } },
      { op: 'refund', cost: 5 },
      { op: 'peek', expect: { allowed: true, remaining: 5, resetMs: 0 } },
      { cost: 5, expect: { allowed: true, remaining: 0 } },
      { expect: { allowed: false } },
    ],
  },
  {
    name: 'token-bucket: reset fills the bucket',
    policy: tb(1, 3, '1m'),
    steps: [
      { cost: 3 },
      { expect: { allowed: false, retryAfterMs: 60_000 } },
      { op: 'reset' },
      { expect: { allowed: true, remaining: 2, resetMs: 60_000 } },
    ],
  },
  {
    name: 'token-bucket: peek charges nothing',
    policy: tb(10, 3),
    steps: [
      { op: 'peek', expect: { allowed: true, remaining: 3, resetMs: 0 } },
      { op: 'peek', cost: 3, expect: { allowed: true, remaining: 3 } },
      { cost: 2 },
      { op: 'peek', cost: 2, expect: { allowed: false, remaining: 1, retryAfterMs: 100, resetMs: 200 } },
      { after: 100, op: 'peek', cost: 2, expect: { allowed: true, remaining: 2, resetMs: 100 } },
    ],
  },
  {
    name: 'token-bucket: a clock stepping backwards refills nothing',
    policy: tb(10, 2),
    steps: [
      { cost: 2 },
      // t=-500: judged at t=0 with 0 tokens; one token at t=100, 600 ms from now.
      { after: -500, expect: { allowed: false, remaining: 0, retryAfterMs: 600, resetMs: 700 } },
      { after: 599, expect: { allowed: false, retryAfterMs: 1 } },
      { after: 1, expect: { allowed: true, remaining: 0 } },
    ],
  },
  {
    name: 'token-bucket: stepping back after a refill does not refill twice',
    policy: tb(10, 2),
    steps: [
      { cost: 2 },
      { after: 100, expect: { allowed: true, remaining: 0 } },
      // t=0: the bucket stays at its state of t=100 (0 tokens); next token at t=200.
      { after: -100, expect: { allowed: false, retryAfterMs: 200 } },
      { after: 100, expect: { allowed: false, retryAfterMs: 100 } },
      { after: 100, expect: { allowed: true } },
    ],
  },
  {
    name: 'token-bucket: remaining floors fractional tokens',
    policy: tb(10, 10),
    steps: [
      { cost: 10 },
      // t=150: 1.5 tokens; 8.5 missing: 850 ms.
      { after: 150, op: 'peek', expect: { allowed: true, remaining: 1, resetMs: 850 } },
    ],
  },
  {
    name: 'token-bucket: retryAfterMs rounds up when the rate does not divide the window',
    policy: tb(7, 1),
    steps: [
      { expect: { allowed: true, resetMs: 143 } },
      { expect: { allowed: false, retryAfterMs: 143 } },
      { after: 142, expect: { allowed: false, retryAfterMs: 1 } },
      { after: 1, expect: { allowed: true } },
    ],
  },
]

const gcraVectors: Vector[] = [
  {
    name: 'gcra: burst then exact emission interval',
    policy: gcra(10, 2),
    steps: [
      { expect: { allowed: true, remaining: 1, resetMs: 100, retryAfterMs: 0 } },
      { expect: { allowed: true, remaining: 0, resetMs: 200 } },
      { expect: { allowed: false, remaining: 0, retryAfterMs: 100, resetMs: 200 } },
      { after: 99, expect: { allowed: false, retryAfterMs: 1, resetMs: 101 } },
      { after: 1, expect: { allowed: true, remaining: 0, resetMs: 200 } },
    ],
  },
  {
    name: 'gcra: fractional emission interval of 333.3 ms',
    policy: gcra(3, 1),
    steps: [
      { expect: { allowed: true, remaining: 0, resetMs: 334 } },
      { expect: { allowed: false, retryAfterMs: 334, resetMs: 334 } },
      { after: 333, expect: { allowed: false, remaining: 0, retryAfterMs: 1, resetMs: 1 } },
      { after: 1, expect: { allowed: true, remaining: 0, resetMs: 334 } },
    ],
  },
  {
    name: 'gcra: no rounding drift, 3/s admits exactly 3 per second',
    policy: gcra(3, 3),
    steps: [
      { cost: 3, expect: { allowed: true, remaining: 0, resetMs: 1000 } },
      { after: 100, expect: { allowed: false, retryAfterMs: 234 } },
      { after: 234, expect: { allowed: true, remaining: 0, resetMs: 1000 } },
      { after: 333, expect: { allowed: true, remaining: 0, resetMs: 1000 } },
      { after: 333, expect: { allowed: true, remaining: 0, resetMs: 1000 } },
      { expect: { allowed: false, retryAfterMs: 334 } },
    ],
  },
  {
    name: 'gcra: idle time is capped at burst',
    policy: gcra(10, 5),
    steps: [
      { cost: 5, expect: { remaining: 0, resetMs: 500 } },
      { after: 10_000, op: 'peek', expect: { allowed: true, remaining: 5, resetMs: 0 } },
      { cost: 5, expect: { allowed: true, remaining: 0 } },
      { expect: { allowed: false, retryAfterMs: 100 } },
    ],
  },
  {
    name: 'gcra: cost > 1 waits for exactly enough intervals',
    policy: gcra(10, 10),
    steps: [
      { cost: 10, expect: { remaining: 0, resetMs: 1000 } },
      { after: 50, cost: 4, expect: { allowed: false, remaining: 0, retryAfterMs: 350, resetMs: 950 } },
      { after: 349, cost: 4, expect: { allowed: false, retryAfterMs: 1 } },
      { after: 1, cost: 4, expect: { allowed: true, remaining: 0, resetMs: 1000 } },
    ],
  },
  {
    name: 'gcra: a denied cost reports the whole units that are there',
    policy: gcra(10, 10),
    steps: [
      { cost: 8, expect: { remaining: 2 } },
      { cost: 3, expect: { allowed: false, remaining: 2, retryAfterMs: 100 } },
      { cost: 2, expect: { allowed: true, remaining: 0 } },
    ],
  },
  {
    name: 'gcra: refund moves the arrival time back, never before now',
    policy: gcra(5, 5),
    steps: [
      { cost: 5 },
      { op: 'refund', cost: 2 },
      { op: 'peek', expect: { allowed: true, remaining: 2, resetMs: 600 } },
      { op: 'refund', cost: 5 },
      { op: 'peek', expect: { allowed: true, remaining: 5, resetMs: 0 } },
      { cost: 5, expect: { allowed: true, remaining: 0 } },
      { expect: { allowed: false } },
    ],
  },
  {
    name: 'gcra: reset forgets the arrival time',
    policy: gcra(1, 3, '1m'),
    steps: [
      { cost: 3 },
      { expect: { allowed: false, retryAfterMs: 60_000 } },
      { op: 'reset' },
      { expect: { allowed: true, remaining: 2, resetMs: 60_000 } },
    ],
  },
  {
    name: 'gcra: peek charges nothing',
    policy: gcra(10, 3),
    steps: [
      { op: 'peek', expect: { allowed: true, remaining: 3, resetMs: 0 } },
      { cost: 2 },
      { op: 'peek', cost: 2, expect: { allowed: false, remaining: 1, retryAfterMs: 100, resetMs: 200 } },
      { after: 100, op: 'peek', cost: 2, expect: { allowed: true, remaining: 2, resetMs: 100 } },
    ],
  },
  {
    name: 'gcra: a clock stepping backwards measures against the stored arrival time',
    policy: gcra(10, 2),
    steps: [
      // TAT = 100 after one unit.
      { expect: { allowed: true, remaining: 1 } },
      // t=-50: TAT is 150 ms ahead, more than one interval below burst (200): one unit would make
      // it 250 > 200. Wait until TAT - now <= 100: at t=0, 50 ms. Unlike the token bucket, which
      // freezes at its newest time and would admit here.
      { after: -50, expect: { allowed: false, remaining: 0, retryAfterMs: 50, resetMs: 150 } },
      { after: 50, expect: { allowed: true, remaining: 0, resetMs: 200 } },
    ],
  },
  {
    name: 'gcra: exhausted, then a clock stepping backwards is still denied',
    policy: gcra(10, 2),
    steps: [
      { cost: 2 },
      { after: -500, expect: { allowed: false, remaining: 0, retryAfterMs: 600, resetMs: 700 } },
      { after: 600, expect: { allowed: true, remaining: 0 } },
    ],
  },
  {
    name: 'gcra: retryAfterMs rounds up when the rate does not divide the window',
    policy: gcra(7, 1),
    steps: [
      { expect: { allowed: true, resetMs: 143 } },
      { expect: { allowed: false, retryAfterMs: 143 } },
      { after: 142, expect: { allowed: false, retryAfterMs: 1 } },
      { after: 1, expect: { allowed: true } },
    ],
  },
  {
    name: 'gcra: remaining floors partial intervals',
    policy: gcra(10, 10),
    steps: [{ cost: 10 }, { after: 150, op: 'peek', expect: { allowed: true, remaining: 1, resetMs: 850 } }],
  },
]

const concurrency: Vector[] = [
  {
    name: 'concurrency: leases up to the limit, release frees a slot',
    policy: conc(2, '10s'),
    steps: [
      { lease: 'a', expect: { allowed: true, remaining: 1, resetMs: 10_000 } },
      { after: 100, lease: 'b', expect: { allowed: true, remaining: 0, resetMs: 10_000 } },
      // Lease a expires at 10000, 9900 ms from now.
      { lease: 'c', expect: { allowed: false, remaining: 0, retryAfterMs: 9900, resetMs: 10_000 } },
      { op: 'refund', lease: 'a' },
      { lease: 'c', expect: { allowed: true, remaining: 0, resetMs: 10_000 } },
    ],
  },
  {
    name: 'concurrency: an unreleased lease expires at exactly acquire + timeout',
    policy: conc(1),
    steps: [
      { lease: 'a', expect: { allowed: true, remaining: 0, resetMs: 1000 } },
      { after: 999, lease: 'b', expect: { allowed: false, retryAfterMs: 1, resetMs: 1 } },
      { after: 1, lease: 'b', expect: { allowed: true, remaining: 0, resetMs: 1000 } },
    ],
  },
  {
    name: 'concurrency: cost > 1 waits for enough leases to end',
    policy: conc(5),
    steps: [
      { lease: 'a', cost: 3, expect: { allowed: true, remaining: 2 } },
      { after: 100, lease: 'b', cost: 2, expect: { allowed: true, remaining: 0, resetMs: 1000 } },
      // a (3 slots) ends at 1000, b (2 slots) at 1100. Now t=200.
      { after: 100, lease: 'c', cost: 3, expect: { allowed: false, retryAfterMs: 800, resetMs: 900 } },
      { lease: 'c', cost: 4, expect: { allowed: false, retryAfterMs: 900 } },
    ],
  },
  {
    name: 'concurrency: releasing an unknown lease changes nothing',
    policy: conc(1),
    steps: [
      { lease: 'a' },
      { op: 'refund', lease: 'zzz' },
      { op: 'peek', lease: 'p', expect: { allowed: false, remaining: 0, retryAfterMs: 1000 } },
    ],
  },
  {
    name: 'concurrency: a second release of the same lease is harmless',
    policy: conc(2),
    steps: [
      { lease: 'a' },
      { lease: 'b' },
      { op: 'refund', lease: 'a' },
      { op: 'refund', lease: 'a' },
      { op: 'peek', lease: 'p', expect: { allowed: true, remaining: 1 } },
      { lease: 'c', expect: { allowed: true, remaining: 0 } },
      { lease: 'd', expect: { allowed: false } },
    ],
  },
  {
    name: 'concurrency: peek holds no lease',
    policy: conc(2),
    steps: [
      { op: 'peek', lease: 'p', expect: { allowed: true, remaining: 2, resetMs: 0 } },
      { lease: 'a' },
      { after: 300, op: 'peek', lease: 'p', expect: { allowed: true, remaining: 1, resetMs: 700 } },
      { op: 'peek', lease: 'p', cost: 2, expect: { allowed: false, retryAfterMs: 700 } },
      { lease: 'b', expect: { allowed: true, remaining: 0, resetMs: 1000 } },
    ],
  },
  {
    name: 'concurrency: a clock stepping backwards keeps live leases',
    policy: conc(1),
    steps: [
      { lease: 'a' },
      // t=1000: a has ended; b ends at 2000.
      { after: 1000, lease: 'b', expect: { allowed: true } },
      {
        after: -500,
        lease: 'c',
        expect: { allowed: false, remaining: 0, retryAfterMs: 1500, resetMs: 1500 },
      },
      { after: 1500, lease: 'c', expect: { allowed: true } },
    ],
  },
  {
    name: 'concurrency: release after expiry is harmless and resetMs follows the last lease',
    policy: conc(3),
    steps: [
      { lease: 'a' },
      { after: 400, lease: 'b', expect: { remaining: 1, resetMs: 1000 } },
      { after: 700, op: 'refund', lease: 'a' },
      // t=1100: a ended at 1000; b ends at 1400.
      { op: 'peek', lease: 'p', expect: { allowed: true, remaining: 2, resetMs: 300 } },
    ],
  },
  {
    // Leases made by consume (no lease id) share the id '': a refund gives back exactly `cost`
    // units of them, the newest first, on every store.
    name: 'concurrency: a refund without a lease id frees exactly that many slots, newest first',
    policy: conc(3),
    steps: [
      { expect: { allowed: true, remaining: 2 } },
      { after: 100, expect: { allowed: true, remaining: 1 } },
      { after: 100, expect: { allowed: true, remaining: 0, resetMs: 1000 } },
      { expect: { allowed: false, remaining: 0, retryAfterMs: 800 } },
      // t=200: the lease taken at t=200 goes; those of t=0 and t=100 (ending at 1100) stay.
      { op: 'refund', cost: 1 },
      { op: 'peek', expect: { allowed: true, remaining: 1, resetMs: 900 } },
      { expect: { allowed: true, remaining: 0, resetMs: 1000 } },
      { expect: { allowed: false, remaining: 0, retryAfterMs: 800 } },
    ],
  },
  {
    name: 'concurrency: a refund without a lease id splits a costly lease and leaves named leases alone',
    policy: conc(5),
    steps: [
      { lease: 'a', expect: { allowed: true, remaining: 4 } },
      { cost: 3, expect: { allowed: true, remaining: 1 } },
      { op: 'refund', cost: 1 },
      { op: 'peek', expect: { allowed: true, remaining: 2 } },
      // More than the anonymous leases hold: they all go, lease a stays.
      { op: 'refund', cost: 5 },
      { op: 'peek', expect: { allowed: true, remaining: 4 } },
      { op: 'peek', cost: 5, expect: { allowed: false } },
    ],
  },
  {
    name: 'concurrency: reset drops every lease',
    policy: conc(1),
    steps: [
      { lease: 'a' },
      { lease: 'b', expect: { allowed: false } },
      { op: 'reset' },
      { lease: 'b', expect: { allowed: true, remaining: 0 } },
    ],
  },
]

const rateOf: Record<string, Policy> = {
  'fixed-window': fw(3),
  'sliding-window-log': swl(3),
  'sliding-window-counter': swc(3),
  'token-bucket': tb(3, 3),
  gcra: gcra(3, 3),
  concurrency: conc(3),
}

/**
 * The same story for every algorithm, expectations hand-derived once: with capacity 3, window
 * (or lease timeout) 1 s, after one unit at t=0 every algorithm has 2 left and is full again by 1000.
 */
const everyAlgorithm: Vector[] = Object.entries(rateOf).flatMap(([name, policy]): Vector[] => [
  {
    name: `${name}: a block denies whatever the units, then ends at exactly its length`,
    policy,
    steps: [
      { lease: 'a', expect: { allowed: true, remaining: 2 } },
      { op: 'block', blockMs: 5000 },
      {
        lease: 'b',
        expect: { allowed: false, blocked: true, remaining: 0, retryAfterMs: 5000, resetMs: 5000 },
      },
      { op: 'peek', lease: 'p', expect: { allowed: false, blocked: true, retryAfterMs: 5000 } },
      { after: 4999, lease: 'b', expect: { allowed: false, blocked: true, retryAfterMs: 1 } },
      // The unit spent at t=0 has long been given back.
      { after: 1, lease: 'b', expect: { allowed: true, blocked: false, remaining: 2 } },
    ],
  },
  {
    name: `${name}: a block on a key never seen, then reset lifts it`,
    policy,
    steps: [
      { op: 'block', blockMs: 60_000 },
      { lease: 'a', expect: { allowed: false, blocked: true, retryAfterMs: 60_000 } },
      { after: 10, op: 'reset' },
      { lease: 'a', expect: { allowed: true, remaining: 2 } },
    ],
  },
  {
    name: `${name}: exhausted, a clock stepping back 1 ms is still denied`,
    policy,
    steps: [
      { lease: 'a', cost: 3, expect: { allowed: true, remaining: 0 } },
      { after: -1, lease: 'b', expect: { allowed: false, remaining: 0 } },
      { after: -10_000, lease: 'b', expect: { allowed: false, remaining: 0 } },
    ],
  },
  {
    name: `${name}: a fresh key peeks full, with nothing to wait for`,
    policy,
    steps: [
      {
        op: 'peek',
        lease: 'p',
        cost: 3,
        expect: { allowed: true, remaining: 3, retryAfterMs: 0, resetMs: 0 },
      },
      { op: 'peek', lease: 'p', expect: { allowed: true, remaining: 3, retryAfterMs: 0, resetMs: 0 } },
    ],
  },
])

/** Layered steps: every store must evaluate all layers, then commit all of them or none. */
const layered: Vector[] = [
  {
    name: 'layered: a denying layer charges no layer; the admitting one reports itself uncharged',
    policy: fw(2),
    policies: { b: tb(10, 1) },
    steps: [
      {
        layers: [{ policy: 'p' }, { policy: 'b' }],
        expectLayers: [
          { allowed: true, remaining: 1 },
          { allowed: true, remaining: 0, resetMs: 100 },
        ],
      },
      // b is empty for 100 ms: p would admit (1 left) but is not charged.
      {
        after: 40,
        layers: [{ policy: 'p' }, { policy: 'b' }],
        expectLayers: [
          { allowed: true, remaining: 1, resetMs: 960 },
          { allowed: false, remaining: 0, retryAfterMs: 60 },
        ],
      },
      { layers: [{ policy: 'p' }], op: 'peek', expectLayers: [{ remaining: 1 }] },
      {
        after: 60,
        layers: [{ policy: 'p' }, { policy: 'b' }],
        expectLayers: [
          { allowed: true, remaining: 0 },
          { allowed: true, remaining: 0 },
        ],
      },
    ],
  },
  {
    name: 'layered: several layers deny; each reports its own wait',
    policy: swl(1),
    policies: { q: gcra(1, 1, '10s') },
    steps: [
      { layers: [{ policy: 'p' }, { policy: 'q' }] },
      {
        after: 500,
        layers: [{ policy: 'p' }, { policy: 'q' }],
        expectLayers: [
          { allowed: false, retryAfterMs: 500 },
          { allowed: false, retryAfterMs: 9500 },
        ],
      },
    ],
  },
  {
    name: 'layered: different keys of one policy are separate layers',
    policy: fw(1),
    steps: [
      { layers: [{ policy: 'p', key: 'ip' }] },
      {
        layers: [
          { policy: 'p', key: 'user' },
          { policy: 'p', key: 'ip' },
        ],
        expectLayers: [{ allowed: true, remaining: 1 }, { allowed: false }],
      },
      // The user key was not charged by the denied check.
      { layers: [{ policy: 'p', key: 'user' }], expectLayers: [{ allowed: true, remaining: 0 }] },
    ],
  },
  {
    name: 'layered: a blocked layer denies the unit; the others are not charged',
    policy: conc(2),
    policies: { r: swc(5) },
    steps: [
      { op: 'block', layers: [{ policy: 'r' }], blockMs: 300 },
      {
        layers: [
          { policy: 'p', lease: 'a' },
          { policy: 'r', cost: 2 },
        ],
        expectLayers: [
          { allowed: true, remaining: 2 },
          { allowed: false, blocked: true, retryAfterMs: 300 },
        ],
      },
      {
        after: 300,
        layers: [{ policy: 'p', lease: 'b', cost: 2 }],
        expectLayers: [{ allowed: true, remaining: 0 }],
      },
    ],
  },
  {
    name: 'layered: all admit, all are charged; refund and reset act on every layer given',
    policy: tb(10, 3),
    policies: { w: fw(3) },
    steps: [
      {
        layers: [
          { policy: 'p', cost: 2 },
          { policy: 'w', cost: 3 },
        ],
        expectLayers: [
          { allowed: true, remaining: 1, resetMs: 200 },
          { allowed: true, remaining: 0, resetMs: 1000 },
        ],
      },
      {
        op: 'refund',
        layers: [
          { policy: 'p', cost: 1 },
          { policy: 'w', cost: 1 },
        ],
      },
      {
        op: 'peek',
        layers: [{ policy: 'p' }, { policy: 'w' }],
        expectLayers: [
          { allowed: true, remaining: 2, resetMs: 100 },
          { allowed: true, remaining: 1, resetMs: 1000 },
        ],
      },
      { op: 'reset', layers: [{ policy: 'p' }, { policy: 'w' }] },
      {
        op: 'peek',
        layers: [{ policy: 'p' }, { policy: 'w' }],
        expectLayers: [
          { remaining: 3, resetMs: 0 },
          { remaining: 3, resetMs: 0 },
        ],
      },
    ],
  },
]

/**
 * A policy's parameters change between two decisions (same name, id and key): the rules of
 * docs/policies.md "When the parameters change". Each store reads state written under the old
 * parameters; every number below holds on all of them, and none reaches past the longest wait of the
 * policy in force (suite.ts checks that on every step after the change).
 */
const parameterChanges: Vector[] = [
  {
    name: 'fixed-window: a lower limit counts what the window already holds',
    policy: fw(5),
    steps: [
      { cost: 3, expect: { allowed: true, remaining: 2, resetMs: 1000 } },
      // 3 counted, limit 2: nothing left until the window ends at 1000.
      {
        after: 100,
        policy: fw(2),
        expect: { allowed: false, remaining: 0, retryAfterMs: 900, resetMs: 900 },
      },
      { after: 900, expect: { allowed: true, remaining: 1, resetMs: 1000 } },
    ],
  },
  {
    name: 'fixed-window: a higher limit admits into the window in progress',
    policy: fw(2),
    steps: [
      {},
      {},
      { expect: { allowed: false, retryAfterMs: 1000 } },
      { after: 100, policy: fw(4), expect: { allowed: true, remaining: 1, resetMs: 900 } },
      { expect: { allowed: true, remaining: 0, resetMs: 900 } },
      { expect: { allowed: false, retryAfterMs: 900 } },
    ],
  },
  {
    name: 'fixed-window: a shorter window ends the window in progress sooner',
    policy: fw(2),
    steps: [
      { cost: 2 },
      // The window that opened at 0 now ends at 0 + 500.
      { after: 100, policy: fw(2, 500), expect: { allowed: false, retryAfterMs: 400, resetMs: 400 } },
      { after: 400, expect: { allowed: true, remaining: 1, resetMs: 500 } },
    ],
  },
  {
    name: 'fixed-window: a longer window applies from the next window',
    policy: fw(2),
    steps: [
      { expect: { allowed: true, remaining: 1 } },
      // The window in progress still ends at 1000, when its state would have ended.
      { after: 100, policy: fw(2, '2s'), expect: { allowed: true, remaining: 0, resetMs: 900 } },
      { expect: { allowed: false, retryAfterMs: 900 } },
      // t=1000: a window of 2 s opens.
      { after: 900, expect: { allowed: true, remaining: 1, resetMs: 2000 } },
      { after: 1999, expect: { allowed: true, remaining: 0, resetMs: 1 } },
      { expect: { allowed: false, retryAfterMs: 1 } },
    ],
  },
  {
    name: 'fixed-window: a refund under a longer window keeps the end of the window',
    policy: fw(3),
    steps: [
      { cost: 2 },
      { after: 100, policy: fw(3, '2s'), op: 'refund', cost: 1 },
      { op: 'peek', expect: { allowed: true, remaining: 2, resetMs: 900 } },
      { after: 900, op: 'peek', expect: { allowed: true, remaining: 3, resetMs: 0 } },
    ],
  },
  {
    name: 'sliding-window-log: a lower limit counts the entries already in the window',
    policy: swl(4),
    steps: [
      {},
      { after: 100 },
      { after: 100, expect: { remaining: 1 } },
      // t=300, entries [0, 100, 200], limit 2: two must leave; the second leaves at 1100.
      {
        after: 100,
        policy: swl(2),
        expect: { allowed: false, remaining: 0, retryAfterMs: 800, resetMs: 900 },
      },
      { after: 800, expect: { allowed: true, remaining: 0, resetMs: 1000 } },
    ],
  },
  {
    name: 'sliding-window-log: a higher limit admits at once',
    policy: swl(2),
    steps: [
      {},
      { after: 100 },
      { after: 100, expect: { allowed: false, retryAfterMs: 800 } },
      { policy: swl(3), expect: { allowed: true, remaining: 0, resetMs: 1000 } },
      // t=200, entries [0, 100, 200]: the one at 0 leaves at 1000.
      { expect: { allowed: false, retryAfterMs: 800, resetMs: 1000 } },
    ],
  },
  {
    name: 'sliding-window-log: a shorter window lets entries leave sooner',
    policy: swl(3),
    steps: [
      {},
      { after: 400 },
      // t=450, window 500: the entry at 0 leaves at 500, the one at 400 at 900.
      { after: 50, policy: swl(3, 500), op: 'peek', expect: { allowed: true, remaining: 1, resetMs: 450 } },
      { cost: 2, expect: { allowed: false, remaining: 1, retryAfterMs: 50 } },
      { after: 50, cost: 2, expect: { allowed: true, remaining: 0, resetMs: 500 } },
    ],
  },
  {
    name: 'sliding-window-log: a longer window keeps entries no longer than the log would have lasted',
    policy: swl(2),
    steps: [
      {},
      { after: 600 },
      // t=700, window 2 s: the log would have emptied at 600 + 1000, so both entries count until 1600.
      {
        after: 100,
        policy: swl(2, '2s'),
        expect: { allowed: false, remaining: 0, retryAfterMs: 900, resetMs: 900 },
      },
      { after: 900, expect: { allowed: true, remaining: 1, resetMs: 2000 } },
      { after: 100, expect: { allowed: true, remaining: 0, resetMs: 2000 } },
      // Entries [1600, 1700] admitted under the 2 s window: the first leaves at 3600.
      { expect: { allowed: false, retryAfterMs: 1900 } },
    ],
  },
  {
    name: 'sliding-window-log: a refund under a longer window keeps the end of the log',
    policy: swl(3),
    steps: [
      {},
      { after: 500 },
      // The entry at 500 is given back; the one at 0 counts until the log's end, 1500.
      { after: 100, policy: swl(3, '2s'), op: 'refund', cost: 1 },
      { op: 'peek', expect: { allowed: true, remaining: 2, resetMs: 900 } },
      { after: 900, op: 'peek', expect: { allowed: true, remaining: 3, resetMs: 0 } },
    ],
  },
  {
    name: 'sliding-window-counter: a lower limit weighs what the windows already hold',
    policy: swc(10),
    steps: [
      { cost: 6, expect: { allowed: true, remaining: 4, resetMs: 2000 } },
      // t=100: 6 counted, limit 4. Only the next window fits one more, once 6 x weight <= 3:
      // (1000 - 100) + (1000 - floor(3 x 1000 / 6)) = 1400.
      {
        after: 100,
        policy: swc(4),
        expect: { allowed: false, remaining: 0, retryAfterMs: 1400, resetMs: 1900 },
      },
      // t=1499: 6 x 501 / 1000 = 3.006, plus 1 is over 4.
      { after: 1399, expect: { allowed: false, retryAfterMs: 1 } },
      { after: 1, expect: { allowed: true, remaining: 0, resetMs: 1500 } },
    ],
  },
  {
    name: 'sliding-window-counter: a higher limit admits at once',
    policy: swc(4),
    steps: [
      { cost: 4 },
      { expect: { allowed: false } },
      { after: 100, policy: swc(6), expect: { allowed: true, remaining: 1, resetMs: 1900 } },
      { expect: { allowed: true, remaining: 0 } },
      // 6 counted: (1000 - 100) + (1000 - floor(5 x 1000 / 6)) = 900 + 167.
      { expect: { allowed: false, retryAfterMs: 1067 } },
    ],
  },
  {
    name: 'sliding-window-counter: a shorter window starts the counts again',
    policy: swc(4),
    steps: [
      { cost: 3, expect: { remaining: 1 } },
      // Counts on a grid of 1 s mean nothing on a grid of 500 ms.
      {
        after: 100,
        policy: swc(4, 500),
        op: 'peek',
        expect: { allowed: true, remaining: 4, resetMs: 0, retryAfterMs: 0 },
      },
      { cost: 4, expect: { allowed: true, remaining: 0, resetMs: 900 } },
      // (500 - 100) + (500 - floor(3 x 500 / 4)) = 400 + 125.
      { expect: { allowed: false, retryAfterMs: 525 } },
    ],
  },
  {
    name: 'sliding-window-counter: a longer window starts the counts again',
    policy: swc(4),
    steps: [
      { cost: 3 },
      { after: 100, policy: swc(4, '2s'), op: 'peek', expect: { allowed: true, remaining: 4, resetMs: 0 } },
      { expect: { allowed: true, remaining: 3, resetMs: 3900 } },
    ],
  },
  {
    // 51 spent of 100 per minute, then burst 5.
    name: 'token-bucket: a smaller burst holds at most the new burst',
    policy: tb(100, 100, '1m'),
    steps: [
      { cost: 51, expect: { allowed: true, remaining: 49, resetMs: 30_600 } },
      // 49 tokens, clamped to 5: all 5 pass; one token every 600 ms after that.
      { policy: tb(100, 5, '1m'), cost: 5, expect: { allowed: true, remaining: 0, resetMs: 3000 } },
      { expect: { allowed: false, remaining: 0, retryAfterMs: 600, resetMs: 3000 } },
      { after: 600, expect: { allowed: true, remaining: 0, resetMs: 3000 } },
    ],
  },
  {
    name: 'token-bucket: a larger burst is there at once, the key full no later than before',
    policy: tb(10, 2),
    steps: [
      { cost: 2, expect: { remaining: 0, resetMs: 200 } },
      // Full at 200 as before, now with 10: 8 tokens at 0, 9 at 100.
      { after: 100, policy: tb(10, 10), op: 'peek', expect: { allowed: true, remaining: 9, resetMs: 100 } },
      { cost: 9, expect: { allowed: true, remaining: 0, resetMs: 1000 } },
      { expect: { allowed: false, retryAfterMs: 100 } },
    ],
  },
  {
    name: 'token-bucket: a lower rate refills what was spent no later than the old rate would have',
    policy: tb(10, 10),
    steps: [
      { cost: 10, expect: { resetMs: 1000 } },
      // Full at 1000 at 5/s: 5 tokens at 0, 5.5 at 100.
      { after: 100, policy: tb(5, 10), op: 'peek', expect: { allowed: true, remaining: 5, resetMs: 900 } },
      { cost: 5, expect: { allowed: true, remaining: 0, resetMs: 1900 } },
      // 0.5 tokens: 0.5 more at 5/s.
      { expect: { allowed: false, retryAfterMs: 100, resetMs: 1900 } },
    ],
  },
  {
    name: 'token-bucket: a higher rate refills faster',
    policy: tb(5, 10),
    steps: [
      { cost: 10, expect: { resetMs: 2000 } },
      { after: 100, policy: tb(10, 10), op: 'peek', expect: { allowed: true, remaining: 1, resetMs: 900 } },
    ],
  },
  {
    name: 'token-bucket: a refund under new parameters starts from the level they give',
    policy: tb(10, 10),
    steps: [
      { cost: 10 },
      // 5.5 tokens at 100 (as in the lower-rate vector), 7.5 after the refund: full 500 ms later.
      { after: 100, policy: tb(5, 10), op: 'refund', cost: 2 },
      { op: 'peek', expect: { allowed: true, remaining: 7, resetMs: 500 } },
      { after: 500, op: 'peek', expect: { allowed: true, remaining: 10, resetMs: 0 } },
    ],
  },
  {
    name: 'token-bucket: a shorter window reads the level in units of the new window, at most the burst',
    policy: tb(10, 10),
    steps: [
      // 4 tokens x 1000 is 8 tokens x 500, 10 after 100 ms at 10 per 500 ms.
      { cost: 6, expect: { remaining: 4, resetMs: 600 } },
      {
        after: 100,
        policy: tb(10, 10, 500),
        op: 'peek',
        expect: { allowed: true, remaining: 10, resetMs: 0 },
      },
      { cost: 10, expect: { allowed: true, remaining: 0, resetMs: 500 } },
      { expect: { allowed: false, retryAfterMs: 50 } },
    ],
  },
  {
    name: 'token-bucket: a longer window, the key full no later than before',
    policy: tb(10, 10),
    steps: [
      { cost: 10, expect: { resetMs: 1000 } },
      // 10 per 2 s, full at 1000: 5 tokens at 0, 5.5 at 100.
      {
        after: 100,
        policy: tb(10, 10, '2s'),
        op: 'peek',
        expect: { allowed: true, remaining: 5, resetMs: 900 },
      },
    ],
  },
  {
    // 51 spent of 100 per minute, then burst 5: the arrival time is kept, at most a full refill of
    // the new burst after the last admitted request.
    name: 'gcra: a smaller burst keeps the arrival time, at most a new full refill after the last admit',
    policy: gcra(100, 100, '1m'),
    steps: [
      { cost: 51, expect: { allowed: true, remaining: 49, resetMs: 30_600 } },
      // TAT 30600 is cut to 0 + 5 x 600: empty, a unit every 600 ms.
      {
        policy: gcra(100, 5, '1m'),
        expect: { allowed: false, remaining: 0, retryAfterMs: 600, resetMs: 3000 },
      },
      { after: 600, expect: { allowed: true, remaining: 0, resetMs: 3000 } },
      { expect: { allowed: false, retryAfterMs: 600 } },
    ],
  },
  {
    name: 'gcra: a larger burst is there at once',
    policy: gcra(10, 2),
    steps: [
      { cost: 2, expect: { remaining: 0, resetMs: 200 } },
      { after: 100, policy: gcra(10, 10), op: 'peek', expect: { allowed: true, remaining: 9, resetMs: 100 } },
      { cost: 9, expect: { allowed: true, remaining: 0, resetMs: 1000 } },
      { expect: { allowed: false, retryAfterMs: 100 } },
    ],
  },
  {
    name: 'gcra: a lower rate keeps the arrival time',
    policy: gcra(10, 10),
    steps: [
      { cost: 10, expect: { resetMs: 1000 } },
      // TAT 1000, 900 ms ahead at 5/s: 4.5 units owed, 5 left.
      { after: 100, policy: gcra(5, 10), op: 'peek', expect: { allowed: true, remaining: 5, resetMs: 900 } },
      { cost: 5, expect: { allowed: true, remaining: 0, resetMs: 1900 } },
      { expect: { allowed: false, retryAfterMs: 100, resetMs: 1900 } },
    ],
  },
  {
    name: 'gcra: a higher rate: at most a full refill after the last admit',
    policy: gcra(5, 10),
    steps: [
      { cost: 10, expect: { resetMs: 2000 } },
      // TAT 2000 is cut to 0 + 10 x 100.
      { after: 100, policy: gcra(10, 10), op: 'peek', expect: { allowed: true, remaining: 1, resetMs: 900 } },
    ],
  },
  {
    name: 'gcra: a shorter window: at most a full refill after the last admit',
    policy: gcra(10, 10),
    steps: [
      { cost: 10, expect: { resetMs: 1000 } },
      // 10 per 500 ms: TAT 1000 is cut to 0 + 500.
      {
        after: 100,
        policy: gcra(10, 10, 500),
        op: 'peek',
        expect: { allowed: true, remaining: 2, resetMs: 400 },
      },
    ],
  },
  {
    name: 'gcra: a longer window keeps the arrival time',
    policy: gcra(10, 10),
    steps: [
      { cost: 10, expect: { resetMs: 1000 } },
      // 10 per 2 s, TAT 1000: 4.5 units owed at 100.
      {
        after: 100,
        policy: gcra(10, 10, '2s'),
        op: 'peek',
        expect: { allowed: true, remaining: 5, resetMs: 900 },
      },
    ],
  },
  {
    name: 'gcra: a remainder counted at a higher rate is cut to the new rate',
    policy: gcra(3, 1),
    steps: [
      // TAT 333 + 1/3 ms.
      { expect: { allowed: true, remaining: 0, resetMs: 334 } },
      // At 1/s the remainder is 0: TAT 333.
      {
        policy: gcra(1, 1),
        op: 'peek',
        expect: { allowed: false, remaining: 0, retryAfterMs: 333, resetMs: 333 },
      },
      { after: 333, expect: { allowed: true, remaining: 0, resetMs: 1000 } },
    ],
  },
  {
    name: 'concurrency: a lower limit waits for enough leases to end',
    policy: conc(3),
    steps: [
      { lease: 'a' },
      { lease: 'b' },
      { lease: 'c', expect: { remaining: 0 } },
      // Three held, limit 1: all three must end (at 1000) for one to fit.
      {
        after: 100,
        policy: conc(1),
        lease: 'd',
        expect: { allowed: false, remaining: 0, retryAfterMs: 900, resetMs: 900 },
      },
      { op: 'refund', lease: 'a' },
      { op: 'refund', lease: 'b' },
      { lease: 'd', expect: { allowed: false, retryAfterMs: 900 } },
      { op: 'refund', lease: 'c' },
      { lease: 'd', expect: { allowed: true, remaining: 0, resetMs: 1000 } },
    ],
  },
  {
    name: 'concurrency: a higher limit admits at once',
    policy: conc(1),
    steps: [
      { lease: 'a' },
      { lease: 'b', expect: { allowed: false, retryAfterMs: 1000 } },
      { after: 100, policy: conc(2), lease: 'b', expect: { allowed: true, remaining: 0, resetMs: 1000 } },
    ],
  },
  {
    name: 'concurrency: a shorter timeout applies to new leases; a lease keeps the one it was taken with',
    policy: conc(2, '10s'),
    steps: [
      { lease: 'a' },
      { after: 100, policy: conc(2), lease: 'b', expect: { allowed: true, remaining: 0, resetMs: 9900 } },
      // b ends at 1100, a at 10000.
      { lease: 'c', expect: { allowed: false, retryAfterMs: 1000, resetMs: 9900 } },
      { after: 1000, lease: 'c', expect: { allowed: true, remaining: 0, resetMs: 8900 } },
      { lease: 'd', expect: { allowed: false, retryAfterMs: 1000 } },
    ],
  },
  {
    name: 'concurrency: a longer timeout applies to new leases',
    policy: conc(1),
    steps: [
      { lease: 'a' },
      {
        after: 100,
        policy: conc(1, '10s'),
        lease: 'b',
        expect: { allowed: false, retryAfterMs: 900, resetMs: 900 },
      },
      { after: 900, lease: 'b', expect: { allowed: true, remaining: 0, resetMs: 10_000 } },
    ],
  },
]

export const vectors: Vector[] = [
  ...fixedWindow,
  ...slidingWindowLog,
  ...slidingWindowCounter,
  ...tokenBucket,
  ...gcraVectors,
  ...concurrency,
  ...everyAlgorithm,
  ...layered,
  ...parameterChanges,
  ...calendarVectors,
]
