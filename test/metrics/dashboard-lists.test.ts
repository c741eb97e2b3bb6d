// The dashboard's lists section: the allow and deny lists of a limiter's policies, each list's size
// whole and its entries cut to the first 20, and nothing for a source with no policies.
import { describe, expect, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { createObservability } from '../../packages/sluice/src/metrics/observability.js'

describe('the dashboard snapshot: lists', () => {
  it('shows each policy with lists, the counts whole and at most 20 entries of each', () => {
    const many = Array.from({ length: 30 }, (_, i) => `k${i}`)
    const limiter = createLimiter({
      policies: {
        plain: { algorithm: 'fixed-window', limit: 5, window: '1m' },
        api: { algorithm: 'fixed-window', limit: 5, window: '1m', deny: { keys: many, ips: ['10.0.0.0/8'] } },
        jobs: { algorithm: 'concurrency', limit: 1, timeout: '1m', allow: { keys: ['ci'] } },
      },
    })
    const obs = createObservability({ limiter })
    try {
      expect(obs.snapshot().lists).toEqual([
        {
          policy: 'api',
          deny: { keys: 30, ips: 1, shown: { keys: many.slice(0, 20), ips: ['10.0.0.0/8'] } },
          allow: null,
        },
        { policy: 'jobs', deny: null, allow: { keys: 1, ips: 0, shown: { keys: ['ci'], ips: [] } } },
      ])
    } finally {
      obs.close()
    }
  })

  it('is empty for a source that is not a limiter', () => {
    const obs = createObservability({ limiter: { subscribe: () => () => {} } })
    try {
      expect(obs.snapshot().lists).toEqual([])
    } finally {
      obs.close()
    }
  })
})
