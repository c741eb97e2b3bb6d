import { describe, expect, it } from 'vitest'
import { type CpuProfile, ownerOf, profileShares, sharesTable } from '../../bench/profile-shares.js'

const frame = (id: number, functionName: string, url = '') => ({
  id,
  callFrame: { functionName, url, lineNumber: 9 },
})

/** Samples: node ids, each for `us` microseconds. */
function profile(samples: [number, number][]): CpuProfile {
  return {
    nodes: [
      frame(1, '(idle)'),
      frame(2, '(garbage collector)'),
      frame(3, 'applyInto', 'file:///repo/packages/sluice/dist/chunk-A.js'),
      frame(4, 'Command', 'file:///repo/node_modules/ioredis/built/Command.js'),
      frame(5, 'writeUtf8String'),
      frame(6, 'decide', 'file:///repo/packages/sluice-server/dist/cli.js'),
      frame(7, 'emit', 'node:events'),
      frame(8, 'lane', 'file:///repo/bench/throughput.ts'),
      frame(9, 'RegExp: ^a|b$'),
      frame(10, 'parse', 'file:///repo/node_modules/@scope/pkg/index.js'),
    ],
    samples: samples.map(([id]) => id),
    timeDeltas: samples.map(([, us]) => us),
  }
}

describe('profile shares', () => {
  it('names the owner of each kind of frame', () => {
    expect(ownerOf('(garbage collector)', '')).toBe('V8: garbage collection')
    expect(ownerOf('(program)', '')).toBe('V8: (program), no JavaScript frame')
    expect(ownerOf('runMicrotasks', '')).toBe('V8: microtask queue')
    expect(ownerOf('writev', '')).toBe('native: writev')
    expect(ownerOf('RegExp: ^x$', '')).toBe('V8: regular expressions')
    expect(ownerOf('f', 'file:///r/node_modules/ioredis/built/Redis.js')).toBe('package: ioredis')
    expect(ownerOf('f', 'file:///r/node_modules/@fastify/rate-limit/index.js')).toBe(
      'package: @fastify/rate-limit',
    )
    expect(ownerOf('f', 'node:internal/streams/writable')).toBe('Node.js (node:*)')
    expect(ownerOf('f', 'file:///r/packages/sluice/dist/index.js')).toBe('Sluice: sluice')
    expect(ownerOf('f', 'file:///r/packages/sluice-server/dist/cli.js')).toBe('Sluice: sluice-server')
    expect(ownerOf('f', 'file:///r/bench/throughput.ts')).toBe('the bench (load loop, harness)')
  })

  it('adds busy time by owner and by function over several profiles, idle left out, largest first', () => {
    const shares = profileShares([
      profile([
        [1, 5000],
        [3, 300],
        [4, 200],
        [5, 400],
        [3, 100],
      ]),
      profile([
        [2, 100],
        [6, 200],
        [7, 100],
        [8, 100],
        [10, 100],
        [9, 400],
      ]),
    ])
    expect(shares.busyMs).toBe(2)
    expect(shares.owners.map((s) => [s.name, s.ms])).toEqual([
      ['Sluice: sluice', 0.4],
      ['native: writeUtf8String', 0.4],
      ['V8: regular expressions', 0.4],
      ['package: ioredis', 0.2],
      ['Sluice: sluice-server', 0.2],
      ['V8: garbage collection', 0.1],
      ['Node.js (node:*)', 0.1],
      ['the bench (load loop, harness)', 0.1],
      ['package: @scope/pkg', 0.1],
    ])
    expect(shares.owners[0]!.share).toBeCloseTo(0.2)
    expect(shares.functions[0]).toMatchObject({
      name: 'applyInto packages/sluice/dist/chunk-A.js:10',
      ms: 0.4,
    })
  })

  it('prints a Markdown table whose cells keep a regular expression’s `|` escaped', () => {
    const lines = sharesTable(profileShares([profile([[9, 100]])]))
    expect(lines).toContain('| V8: regular expressions | 100.0% |')
    expect(lines).toContain('| RegExp: ^a\\|b$ | 100.0% |')
  })
})
