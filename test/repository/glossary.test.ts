// The glossary of docs/architecture.md against the code: every term of the decision path has one
// line, every name a line cites exists in the sources, and a word the glossary gives one meaning
// is not used for another where the rules of the decision path are written (Lua, plpgsql, the
// algorithms).
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

const ROOT = join(import.meta.dirname, '..', '..')

function filesUnder(dir: string, keep: (name: string) => boolean): string[] {
  const found: string[] = []
  for (const name of readdirSync(dir)) {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) found.push(...filesUnder(path, keep))
    else if (keep(name)) found.push(path)
  }
  return found
}

/** The glossary's rows: term -> meaning. */
function glossary(): Map<string, string> {
  const doc = readFileSync(join(ROOT, 'docs/architecture.md'), 'utf8')
  const start = doc.indexOf('\n## Glossary\n')
  expect(start, 'docs/architecture.md has a Glossary section').toBeGreaterThan(0)
  const section = doc.slice(start + 1, doc.indexOf('\n## ', start + 1))
  const rows = new Map<string, string>()
  for (const line of section.split('\n')) {
    const cells = line.split('|').map((c) => c.trim())
    if (cells.length !== 4 || cells[1] === 'Term' || /^-+$/.test(cells[1]!)) continue
    expect(rows.has(cells[1]!), `${cells[1]} is defined once`).toBe(false)
    rows.set(cells[1]!, cells[2]!)
  }
  return rows
}

const TERMS = [
  'check',
  'step',
  'decision',
  'decide',
  'policy',
  'key',
  'cost',
  'consume',
  'peek',
  'commit',
  'charge',
  'refund',
  'block',
  'blocked',
  'lease',
  'in use',
  'layered',
  'hybrid',
  'reserve',
  'settle',
  'wait',
  'waiting',
  'throttle',
  'pending',
  'held',
  'deny cache',
  'failover',
]

describe('glossary', () => {
  it('has one line for each term of the decision path', () => {
    const rows = glossary()
    for (const term of TERMS) expect(rows.has(term), `glossary term ${term}`).toBe(true)
  })

  it('names only what exists in the sources', () => {
    const sources = filesUnder(join(ROOT, 'packages'), (name) => /\.(ts|lua)$/.test(name))
      .filter((file) => /[/\\]src[/\\]/.test(file))
      .map((file) => readFileSync(file, 'utf8'))
      .join('\n')
    const cited = [...glossary().values()].flatMap((meaning) =>
      [...meaning.matchAll(/`([^`]+)`/g)].map((m) => m[1]!),
    )
    // Code names only (`Check`, `limiter.decide`, `HttpLimiter.check()`), not paths, routes or values.
    const names = cited.filter((c) => /^[A-Za-z_][\w.]*(\(\))?$/.test(c))
    expect(names.length).toBeGreaterThan(10)
    for (const name of names) {
      const last = name.replace('()', '').split('.').at(-1)!
      expect(new RegExp(`\\b${last}\\b`).test(sources), `${name} is in packages/*/src`).toBe(true)
    }
  })

  it('the rules of the decision path never say held: a block in force is blocked, leases are in use', () => {
    const rules = [
      ...filesUnder(join(ROOT, 'packages/sluice/src/stores/redis/scripts'), (n) => n.endsWith('.lua')),
      ...filesUnder(join(ROOT, 'packages/sluice/src/algorithms'), (n) => n.endsWith('.ts')),
      join(ROOT, 'packages/sluice/src/stores/postgres/schema.ts'),
    ]
    for (const file of rules) {
      expect(/\bheld\b/.test(readFileSync(file, 'utf8')), `${file} uses held`).toBe(false)
    }
  })
})
