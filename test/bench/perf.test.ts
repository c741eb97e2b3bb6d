// bench/perf.ts, shared by the scripts that split a request's CPU by owner: samples split into
// parts per call, pooled over runs by the calls each run answered, and the largest innermost
// functions of each part.
import { describe, expect, it } from 'vitest'
import {
  leavesTable,
  type ProfiledRun,
  partsTable,
  report,
  sharesOf,
  type TableShape,
} from '../../bench/perf.js'

type Part = 'mine' | 'theirs'
const partOf = (frames: readonly string[]): Part =>
  frames.some((f) => f.includes('/mine/')) ? 'mine' : 'theirs'

describe('bench/perf.ts', () => {
  it("gives each sample a share of 1/samples to its part and its innermost function, and counts the main thread's", () => {
    const shares = sharesOf(
      [
        { tid: 7, frames: ['Builtins_StringAdd', 'JS:*f file:///w/mine/a.js:1:1'] },
        { tid: 7, frames: ['JS:*g file:///w/mine/a.js:2:1'] },
        { tid: 8, frames: ['v8::internal::Scavenger::ScavengePage'] },
        { tid: 7, frames: ['JS:*h /w/node_modules/fastify/lib/reply.js:3:1'] },
      ],
      partOf,
      7,
    )
    expect(shares.parts).toEqual(
      new Map<Part, number>([
        ['mine', 0.5],
        ['theirs', 0.5],
      ]),
    )
    expect(shares.mainThread).toBe(0.75)
    expect(shares.leaves.get('mine')).toEqual(
      new Map([
        ['Builtins_StringAdd', 0.25],
        ['JS:*g file:///w/mine/a.js:2:1', 0.25],
      ]),
    )
    // The leaf's path is cut to the package's own part.
    expect([...shares.leaves.get('theirs')!.keys()]).toContain('JS:*h fastify/lib/reply.js:3:1')
  })

  const shape: TableShape<'one' | 'two', Part> = {
    columns: ['one', 'two'],
    parts: ['mine', 'theirs'],
    column: 'server',
    unit: 'request',
    rate: 'req/s',
  }
  const run = (done: number, cpuMicrosPerCall: number, mine: number, leaf: string): ProfiledRun<Part> => ({
    plain: { done, perSecond: done / 5, cpuMicrosPerCall },
    profiled: { done, perSecond: done / 5, cpuMicrosPerCall },
    parts: new Map<Part, number>([
      ['mine', mine],
      ['theirs', 1 - mine],
    ]),
    leaves: new Map([['mine', new Map([[leaf, mine]])]]),
    mainThread: 1,
  })

  it('pools the runs of a column by the calls each answered, and prints each part per call', () => {
    // One run of 1000 calls at 10 µs (a quarter mine), one of 3000 at 20 µs (half mine):
    // 17.5 µs per call in all, of which (2,500 + 30,000) / 4,000 = 8.125 mine.
    const results = new Map([
      ['one' as const, [run(1000, 10, 0.25, 'JS:*f'), run(3000, 20, 0.5, 'JS:*f')]],
      ['two' as const, [run(2000, 4, 1, 'JS:*g')]],
    ])
    const lines = partsTable(shape, results)
    expect(lines[0]).toBe('| per request | one | two |')
    expect(lines).toContain('| req/s | 0.2k, 0.6k | 0.4k |')
    expect(lines).toContain("| the server process's CPU, every thread | 17.50 µs | 4.00 µs |")
    expect(lines).toContain('| - mine | 8.13 µs | 4.00 µs |')
    expect(lines).toContain('| - theirs | 9.38 µs | 0.00 µs |')
    expect(leavesTable(shape, results)).toEqual([
      '| server | part | innermost functions, µs per request |',
      '| --- | --- | --- |',
      '| one | mine | JS:*f 8.13 |',
      '| two | mine | JS:*g 4.00 |',
    ])
  })

  it('reports the version and time, then the parts table, then the leaves table, a blank line between', () => {
    const results = new Map([['one' as const, [run(10, 1, 1, 'JS:*f')]]])
    const lines = report(shape, results)
    expect(lines[0]).toMatch(/^node v\d+\.\d+\.\d+, \d{4}-\d{2}-\d{2}T/)
    expect(lines.slice(1)).toEqual(['', ...partsTable(shape, results), '', ...leavesTable(shape, results)])
  })

  it('cuts a long function name and escapes the pipe of a regular expression', () => {
    const long = `RegExp:^(a|b)${'x'.repeat(200)}`
    const lines = leavesTable(shape, new Map([['one' as const, [run(10, 1, 1, long)]]]))
    expect(lines[2]).toBe(`| one | mine | ${`RegExp:^(a\\|b)${'x'.repeat(200)}`.slice(0, 100)}… 1.00 |`)
  })
})
