// Policy names are types: a typo is a compile error. `tsc --noEmit` checks this file (test/ is in
// tsconfig's include); each @ts-expect-error fails the type check if the error it expects goes away.
import { describe, expect, it } from 'vitest'
import { createLimiter, type Decision, type LayeredDecision } from '../../src/limiter.js'

describe('typed policy names', () => {
  it('accepts configured names and rejects others at compile time', async () => {
    const limiter = createLimiter({
      policies: {
        api: { algorithm: 'token-bucket', limit: 10, window: '1s', burst: 20 },
        perIp: { algorithm: 'sliding-window-counter', limit: 1000, window: '1h' },
      },
    })
    const d: Decision = await limiter.consume('api', 'k')
    const l: LayeredDecision = await limiter.consume([{ policy: 'perIp', key: 'ip' }])
    expect(d.allowed && l.allowed).toBe(true)

    // @ts-expect-error 'typo' is not a configured policy
    await expect(limiter.consume('typo', 'k')).rejects.toMatchObject({ code: 'SLUICE_UNKNOWN_POLICY' })
    // @ts-expect-error nor in a layered check
    await expect(limiter.consume([{ policy: 'typo', key: 'k' }])).rejects.toThrow()
    // @ts-expect-error nor in peek
    await expect(limiter.peek('apii', 'k')).rejects.toThrow()
    // @ts-expect-error nor in block
    await expect(limiter.block('typo', 'k', '1s')).rejects.toThrow()
    expect(() =>
      // @ts-expect-error nor in consumeSync
      limiter.consumeSync('typo', 'k'),
    ).toThrow()
    // @ts-expect-error cost is a number
    await expect(limiter.consume('api', 'k', { cost: '2' })).rejects.toThrow()
    // @ts-expect-error the policies object checks the algorithm name
    expect(() => createLimiter({ policies: { p: { algorithm: 'leaky', limit: 1, window: '1s' } } })).toThrow()
    expect(() =>
      // @ts-expect-error concurrency takes a timeout, not a window
      createLimiter({ policies: { p: { algorithm: 'concurrency', limit: 1, window: '1s' } } }),
    ).toThrow()
  })
})
