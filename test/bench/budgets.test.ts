// The verdicts of `npm run bench -- --check` (bench/budgets/check.ts): each budget next to what was
// measured, met or missed, and a failing exit code when one is missed or was not measured. Made-up
// measurements: nothing is measured here.
import { describe, expect, it } from 'vitest'
import { BUDGETS, type Budget, budgetTable, exitCodeOf, judge } from '../../bench/budgets/check.js'

const budgets: Budget[] = [
  { id: 'a', what: 'bytes per thing', limit: 300, unit: 'B' },
  { id: 'b', what: 'promises per thing', limit: 0.5, unit: 'promises' },
  { id: 'c', what: 'p99 latency', limit: 110, unit: 'ms' },
]

describe('budget check', () => {
  it('a budget is met at or under its limit, missed over it', () => {
    const judged = judge(
      budgets,
      new Map([
        ['a', 300],
        ['b', 1],
        ['c', 42.5],
      ]),
    )
    expect(judged.map((j) => [j.id, j.measured, j.met])).toEqual([
      ['a', 300, true],
      ['b', 1, false],
      ['c', 42.5, true],
    ])
    expect(exitCodeOf(judged)).toBe(1)
  })

  it('every budget met: exit code 0', () => {
    const judged = judge(
      budgets,
      new Map([
        ['a', 12],
        ['b', 0],
        ['c', 110],
      ]),
    )
    expect(judged.every((j) => j.met)).toBe(true)
    expect(exitCodeOf(judged)).toBe(0)
  })

  it('a budget that was not measured, or measured as NaN, is missed', () => {
    const judged = judge(
      budgets,
      new Map([
        ['a', 12],
        ['c', Number.NaN],
      ]),
      new Map([['b', 'redis-server did not start']]),
    )
    expect(judged.map((j) => j.met)).toEqual([true, false, false])
    expect(judged[1]!.note).toBe('redis-server did not start')
    expect(exitCodeOf(judged)).toBe(1)
  })

  it('prints each budget next to its measured value and the verdict, as a Markdown table', () => {
    const judged = judge(
      budgets,
      new Map([
        ['a', 126.54],
        ['c', 250],
      ]),
      new Map([['b', 'not measured: no redis-server']]),
    )
    const lines = budgetTable(judged)
    expect(lines[0]).toBe('| budget | measured | at most | unit | met? | note |')
    expect(lines[1]).toBe('| --- | ---: | ---: | --- | --- | --- |')
    expect(lines.slice(2)).toEqual([
      '| bytes per thing | 127 | 300 | B | yes |  |',
      '| promises per thing | - | 0.5 | promises | **no** | not measured: no redis-server |',
      '| p99 latency | 250 | 110 | ms | **no** |  |',
    ])
  })

  it('the budgets have distinct ids and a positive or zero limit', () => {
    expect(new Set(BUDGETS.map((b) => b.id)).size).toBe(BUDGETS.length)
    for (const b of BUDGETS) expect(b.limit, b.id).toBeGreaterThanOrEqual(0)
  })
})
