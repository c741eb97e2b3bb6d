import { describe, expect, it } from 'vitest'
import { createBreaker } from '../../packages/sluice/src/failover/breaker.js'

describe('circuit breaker', () => {
  it('opens after N consecutive failures, probes once after the cool-down, closes on success', () => {
    const b = createBreaker({ failures: 3, cooldownMs: 1000 })
    expect(b.admit(0)).toBe('call')
    expect(b.failure(false, 0)).toBe(false)
    expect(b.failure(false, 1)).toBe(false)
    expect(b.state).toBe('closed')
    expect(b.failure(false, 2)).toBe(true)
    expect(b.state).toBe('open')
    expect(b.admit(500)).toBe('reject')
    expect(b.retryInMs(500)).toBe(502)
    expect(b.admit(1002)).toBe('probe')
    expect(b.state).toBe('half-open')
    // Only one probe at a time.
    expect(b.admit(1003)).toBe('reject')
    expect(b.success(true)).toBe(true)
    expect(b.state).toBe('closed')
    expect(b.admit(1004)).toBe('call')
  })

  it('a success between failures resets the count', () => {
    const b = createBreaker({ failures: 2, cooldownMs: 10 })
    b.failure(false, 0)
    b.success(false)
    b.failure(false, 1)
    expect(b.state).toBe('closed')
    b.failure(false, 2)
    expect(b.state).toBe('open')
  })

  it('a failed probe re-opens for a full cool-down; late calls do not close it', () => {
    const b = createBreaker({ failures: 1, cooldownMs: 100 })
    b.failure(false, 0)
    expect(b.admit(100)).toBe('probe')
    b.failure(true, 150)
    expect(b.state).toBe('open')
    expect(b.admit(249)).toBe('reject')
    // A call made before the circuit opened succeeding late is no proof of recovery.
    expect(b.success(false)).toBe(false)
    expect(b.state).toBe('open')
    // ...and late failures do not push the probe further away.
    b.failure(false, 200)
    expect(b.admit(250)).toBe('probe')
  })

  it('with minSpanMs, a burst of failures at one instant does not open it; failures over the span do', () => {
    const b = createBreaker({ failures: 3, cooldownMs: 100, minSpanMs: 50 })
    for (let i = 0; i < 64; i++) b.failure(false, 1000)
    expect(b.state).toBe('closed')
    b.success(false)
    for (let i = 0; i < 64; i++) b.failure(false, 2000)
    expect(b.state).toBe('closed')
    expect(b.failure(false, 2049)).toBe(false)
    expect(b.failure(false, 2050)).toBe(true)
    expect(b.state).toBe('open')
  })
})
