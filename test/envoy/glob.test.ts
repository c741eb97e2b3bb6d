// Envoy wildcard values (`foo*`, `svc*ep*rpc`): matchesGlob against a reference matcher over every
// pattern and value of a small alphabet, where overlapping and repeated parts are common.
import { describe, expect, it } from 'vitest'
import { matchesGlob } from '../../packages/sluice-server/src/envoy/decide.js'

/** Reference: dynamic programming over (pattern prefix, value prefix). */
function reference(pattern: string, value: string): boolean {
  let row = new Array<boolean>(value.length + 1).fill(false)
  row[0] = true
  for (const p of pattern) {
    const next = new Array<boolean>(value.length + 1).fill(false)
    if (p === '*') {
      let any = false
      for (let j = 0; j <= value.length; j++) {
        any ||= row[j]!
        next[j] = any
      }
    } else for (let j = 1; j <= value.length; j++) next[j] = row[j - 1]! && value[j - 1] === p
    row = next
  }
  return row[value.length]!
}

/** Every string of length 0..max over `alphabet`. */
function* strings(alphabet: string, max: number): Generator<string> {
  yield ''
  let level = ['']
  for (let n = 1; n <= max; n++) {
    level = level.flatMap((s) => [...alphabet].map((c) => s + c))
    yield* level
  }
}

describe('matchesGlob', () => {
  it('agrees with the reference for every pattern up to 5 characters over {a, b, *} and value up to 6 over {a, b}', () => {
    const values = [...strings('ab', 6)]
    let checked = 0
    for (const pattern of strings('ab*', 5)) {
      if (!pattern.includes('*')) continue
      const parts = pattern.split('*')
      for (const value of values) {
        if (matchesGlob(parts, value) !== reference(pattern, value))
          throw new Error(
            `${JSON.stringify(pattern)} on ${JSON.stringify(value)}: want ${reference(pattern, value)}`,
          )
        checked++
      }
    }
    expect(checked).toBeGreaterThan(30_000)
  })

  it('a pattern without a star is an exact comparison', () => {
    expect(matchesGlob(['abc'], 'abc')).toBe(true)
    expect(matchesGlob(['abc'], 'abcd')).toBe(false)
  })

  it('prefix and suffix may not overlap', () => {
    expect(matchesGlob(['ab', 'ba'], 'aba')).toBe(false)
    expect(matchesGlob(['ab', 'ba'], 'abba')).toBe(true)
    expect(matchesGlob(['a', 'a', 'a'], 'aa')).toBe(false)
    expect(matchesGlob(['a', 'a', 'a'], 'aaa')).toBe(true)
  })
})
