// bench/child.ts: a bench module run again in a process of its own gets this process's Node.js
// flags, then the flags it is given (the memory case's V8 heap sizes), then its arguments; and the
// memory case's settings of V8's young generation and of the warm-up.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { semiSpaceFlags, warmUpOf } from '../../bench/cases/memory.js'
import { inChild } from '../../bench/child.js'

const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-child-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** A script that answers with its own Node.js flags and arguments. */
const script = join(dir, 'flags.mjs')
writeFileSync(
  script,
  "import { writeFileSync } from 'node:fs'\n" +
    'const args = process.argv.slice(2)\n' +
    'writeFileSync(args.at(-1), JSON.stringify({ flags: process.execArgv, args: args.slice(0, -1) }))\n',
)

describe('inChild', () => {
  it("passes the flags it is given after this process's own, and the arguments after the script", async () => {
    const answer = await inChild<{ flags: string[]; args: string[] }>(
      script,
      ['token-bucket', 'quick'],
      'flags script',
      semiSpaceFlags('16'),
    )
    expect(answer.flags.slice(-2)).toEqual(['--min-semi-space-size=16', '--max-semi-space-size=16'])
    expect(answer.flags.slice(0, -2)).toEqual(process.execArgv)
    expect(answer.args).toEqual(['token-bucket', 'quick'])
  })

  it('passes no flags of its own when given none', async () => {
    const answer = await inChild<{ flags: string[] }>(script, [], 'flags script')
    expect(answer.flags).toEqual(process.execArgv)
  })
})

describe('SLUICE_BENCH_SEMI_SPACE_MB', () => {
  it("fixes both bounds of a semi-space's size, or leaves V8's sizing alone when unset", () => {
    expect(semiSpaceFlags(undefined)).toEqual([])
    expect(semiSpaceFlags('')).toEqual([])
    expect(semiSpaceFlags('64')).toEqual(['--min-semi-space-size=64', '--max-semi-space-size=64'])
  })

  it('refuses what is not a whole number of MB from 1 to 9999', () => {
    for (const bad of ['0', '16.5', '-1', 'sixteen', '10000', ' 16'])
      expect(() => semiSpaceFlags(bad), bad).toThrow(/SLUICE_BENCH_SEMI_SPACE_MB is a whole number of MB/)
  })
})

describe('SLUICE_BENCH_MEMORY_WARMUP', () => {
  it('is every key 10 times unless set to a whole number of decisions', () => {
    expect(warmUpOf(undefined)).toBe(100_000)
    expect(warmUpOf('')).toBe(100_000)
    expect(warmUpOf('10000000')).toBe(10_000_000)
  })

  it('refuses what is not a whole number of decisions', () => {
    for (const bad of ['0', '1e7', '-5', '2.5', 'many'])
      expect(() => warmUpOf(bad), bad).toThrow(/SLUICE_BENCH_MEMORY_WARMUP is a whole number of decisions/)
  })
})
