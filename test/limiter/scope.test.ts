// Policy option `scope` (multi-region): 'region' (default) or 'global'; global only for
// the algorithms whose over-admission multiRegionStore can bound (sliding window counter).
import { describe, expect, it } from 'vitest'
import { resolvePolicy } from '../../packages/sluice/src/policy.js'

const invalid = expect.objectContaining({ code: 'SLUICE_INVALID_POLICY' })

describe('policy scope', () => {
  it("defaults to region: the resolved policy holds no scope; 'global' is kept", () => {
    const swc = { algorithm: 'sliding-window-counter', limit: 10, window: '1m' } as const
    expect(resolvePolicy('a', swc).scope).toBeUndefined()
    expect(resolvePolicy('a', { ...swc, scope: 'region' }).scope).toBeUndefined()
    expect(resolvePolicy('a', { ...swc, scope: 'global' }).scope).toBe('global')
    expect(
      resolvePolicy('c', { algorithm: 'concurrency', limit: 2, timeout: '1s', scope: 'region' }).scope,
    ).toBeUndefined()
  })

  it('refuses global for algorithms it cannot bound, a bad value, and global hybrid', () => {
    for (const algorithm of ['fixed-window', 'sliding-window-log', 'token-bucket', 'gcra'] as const) {
      expect(() => resolvePolicy('a', { algorithm, limit: 5, window: '1m', scope: 'global' })).toThrow(
        invalid,
      )
      try {
        resolvePolicy('a', { algorithm, limit: 5, window: '1m', scope: 'global' })
      } catch (error) {
        expect(String((error as Error).message)).toMatch(/sliding-window-counter/)
      }
    }
    expect(() =>
      resolvePolicy('c', { algorithm: 'concurrency', limit: 2, timeout: '1s', scope: 'global' } as never),
    ).toThrow(invalid)
    expect(() =>
      resolvePolicy('a', {
        algorithm: 'sliding-window-counter',
        limit: 5,
        window: '1m',
        scope: 'world',
      } as never),
    ).toThrow(invalid)
    expect(() =>
      resolvePolicy('a', {
        algorithm: 'fixed-window',
        limit: 5,
        window: '1m',
        mode: 'hybrid',
        scope: 'global',
      }),
    ).toThrow(invalid)
    // A misspelling is named as such.
    expect(() =>
      resolvePolicy('a', {
        algorithm: 'sliding-window-counter',
        limit: 5,
        window: '1m',
        scop: 'global',
      } as never),
    ).toThrow(/scope/)
  })
})
