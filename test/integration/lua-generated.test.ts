// The embedded scripts are built from src/stores/redis/scripts/*.lua: the generated module must match
// the sources, and every algorithm has its Lua twin and its own script variant.
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { ALGORITHMS } from '../../src/policy.js'
import { luaSources } from '../../src/stores/redis/lua.generated.js'

const run = promisify(execFile)

describe('generated Lua module', () => {
  it('is up to date with the .lua sources (node scripts/build-lua.mjs --check)', async () => {
    await expect(run('node', ['scripts/build-lua.mjs', '--check'])).resolves.toBeDefined()
  })

  it('has one Lua file and one apply/refund variant per algorithm, with no unresolved include', () => {
    for (const algorithm of ALGORITHMS) {
      expect(existsSync(`src/stores/redis/scripts/${algorithm}.lua`), algorithm).toBe(true)
      const sources = luaSources as Record<string, string>
      for (const entry of ['apply', 'refund']) {
        const variant = sources[`${entry}/${algorithm}`]
        expect(variant, `${entry}/${algorithm}`).toContain(`ALGORITHMS['${algorithm}']`)
        for (const other of ALGORITHMS.filter((a) => a !== algorithm))
          expect(variant).not.toContain(`ALGORITHMS['${other}']`)
      }
    }
    for (const source of Object.values(luaSources)) expect(source).not.toMatch(/^--- @include/m)
    // The flat single-step scripts define no functions: a call pays only for its decision.
    for (const algorithm of ALGORITHMS) {
      const flat = `one-${algorithm}` as const
      expect(luaSources[flat]).not.toMatch(/^\s*(local\s+)?function\b|=\s*function\b/m)
      expect(luaSources[flat]).toContain("redis.call('GET', block_key)")
    }
  })
})
