// Conformance vectors: (policy, steps, expected decisions). One table for every store.
import type { Policy } from '../../src/policy.js'

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
  expect?: ExpectedResult
}

export interface Vector {
  name: string
  policy: Policy
  /** Clock at the first step (default 1_700_000_000_000). */
  start?: number
  key?: string
  steps: VectorStep[]
}

export const vectors: Vector[] = [
  {
    name: 'token-bucket: burst then exact refill wait',
    policy: { algorithm: 'token-bucket', limit: 10, window: '1s', burst: 2 },
    steps: [
      { expect: { allowed: true, remaining: 1, resetMs: 100, retryAfterMs: 0 } },
      { expect: { allowed: true, remaining: 0, resetMs: 200 } },
      { expect: { allowed: false, remaining: 0, retryAfterMs: 100, resetMs: 200 } },
      { after: 100, expect: { allowed: true, remaining: 0, resetMs: 200 } },
    ],
  },
]
