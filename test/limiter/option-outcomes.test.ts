// What every options validator of the library makes of a large seeded set of inputs, valid and not
// (wrong types, NaN, Infinity, negative, fractional and huge numbers, null, arrays, class instances,
// missing, misspelled, extra and inherited keys, `__proto__`): the resolved value, or the error's
// class, code and message. test/fixtures/option-outcomes.json holds the recorded outcomes, one case
// a line; after a deliberate change of an outcome, `npx vitest run test/limiter/option-outcomes.test.ts -u`
// records them again, and the fixture's diff shows every input whose outcome changed.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { outcomeLines, replay } from './option-cases.js'

const FIXTURE = join(import.meta.dirname, '..', 'fixtures', 'option-outcomes.json')

describe('the outcomes of the library options validators', () => {
  it('are the recorded ones for every generated input', async () => {
    const lines = outcomeLines()
    expect(lines.length).toBeGreaterThan(3000)
    await expect(`${lines.join('\n')}\n`).toMatchFileSnapshot(FIXTURE)
  })

  it('are the recorded ones for every input of the fixture, read back from it', () => {
    const recorded = readFileSync(FIXTURE, 'utf8').trimEnd().split('\n')
    const differing = recorded.map(replay).filter(({ recorded, rerun }) => recorded !== rerun)
    expect(differing.slice(0, 10)).toEqual([])
  })
})
