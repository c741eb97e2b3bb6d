// bench/memory-builds.mjs refuses a call it cannot run before it starts a process: without two
// builds, or with a count of pairs that is not a whole number (which would otherwise run no pair and
// fail on an empty list). The measuring itself is a timing and runs only by hand.
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const SCRIPT = fileURLToPath(new URL('../../bench/memory-builds.mjs', import.meta.url))

function run(...args: string[]): { status: number | null; stderr: string } {
  return spawnSync(process.execPath, [SCRIPT, ...args], { encoding: 'utf8', timeout: 30_000 })
}

describe('bench/memory-builds.mjs arguments', () => {
  it('names its usage without two builds', () => {
    for (const args of [[], ['packages/sluice/dist']]) {
      const r = run(...args)
      expect(r.status).toBe(1)
      expect(r.stderr).toContain(
        'usage: node bench/memory-builds.mjs <dist A> <dist B | express-rate-limit> [pairs]',
      )
    }
  })

  it('refuses a count of pairs that is not a whole number from 1 to 999', () => {
    for (const pairs of ['0', 'abc', '2.5', '-3', '1000']) {
      const r = run('packages/sluice/dist', 'express-rate-limit', pairs)
      expect(r.status, pairs).toBe(1)
      expect(r.stderr, pairs).toContain(`pairs is a whole number from 1 to 999, not ${JSON.stringify(pairs)}`)
    }
  })
})
