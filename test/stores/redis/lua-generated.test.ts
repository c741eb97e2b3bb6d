// The embedded scripts are built from packages/sluice/src/stores/redis/scripts/: one Lua source per algorithm, every
// variant a whole script that includes its sections and shared pieces, the algorithm list read from the
// files, every script also written as a .lua file to read, one reply format.
import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, describe, expect, it } from 'vitest'
import { ALGORITHMS, resolvePolicy } from '../../../packages/sluice/src/policy.js'
import { hybridRedis } from '../../../packages/sluice/src/stores/redis/hybrid.js'
import { luaAlgorithms, luaSources } from '../../../packages/sluice/src/stores/redis/lua.generated.js'
import { freshPrefix, ioredis } from '../../helpers/redis-clients.js'

const run = promisify(execFile)
const SCRIPTS = 'packages/sluice/src/stores/redis/scripts'
const GENERATED = 'packages/sluice/src/stores/redis/generated'
const client = ioredis()
afterAll(() => client.disconnect())

/** A copy of the scripts folder to change, removed after `body`. */
async function withScripts(body: (dir: string, out: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-lua-'))
  try {
    cpSync(SCRIPTS, join(dir, 'scripts'), { recursive: true })
    await body(join(dir, 'scripts'), join(dir, 'lua.generated.ts'))
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

describe('generated Lua module', () => {
  it('is up to date with the .lua sources (node scripts/build-lua.mjs --check)', async () => {
    await expect(run('node', ['scripts/build-lua.mjs', '--check'])).resolves.toBeDefined()
  })

  it('--check fails on a stale generated file', async () => {
    await withScripts(async (dir, out) => {
      writeFileSync(
        out,
        `${readFileSync('packages/sluice/src/stores/redis/lua.generated.ts', 'utf8')}// edited\n`,
      )
      const check = run('node', ['scripts/build-lua.mjs', '--check', '--scripts', dir, '--out', out])
      await expect(check).rejects.toMatchObject({ code: 1 })
      await run('node', ['scripts/build-lua.mjs', '--scripts', dir, '--out', out])
      await run('node', ['scripts/build-lua.mjs', '--check', '--scripts', dir, '--out', out])
    })
  })

  it('loads each generated file with its comment lines left empty: the same lines, no comments', () => {
    for (const [name, source] of Object.entries(luaSources)) {
      const file = readFileSync(join(GENERATED, `${name}.lua`), 'utf8').split('\n')
      const lines = source.split('\n')
      expect(lines.length, name).toBe(file.length)
      for (const [i, line] of lines.entries())
        expect(line, `${name}.lua:${i + 1}`).toBe(/^\s*--/.test(file[i]!) ? '' : file[i])
      expect(
        file.some((l) => /^\s*--/.test(l)),
        `${name}.lua has comments to read`,
      ).toBe(true)
    }
  })

  it('has one Lua source per algorithm and exactly the generated variants, no module scripts', () => {
    const files = readdirSync(SCRIPTS).filter((f) => f.endsWith('.lua'))
    expect(files.sort()).toEqual(ALGORITHMS.map((a) => `${a}.lua`).sort())
    expect(Object.keys(luaAlgorithms).sort()).toEqual([...ALGORITHMS].sort())
    expect(Object.keys(luaSources).sort()).toEqual(
      [
        ...ALGORITHMS.map((a) => `apply/${a}`),
        'block',
        'charge',
        'hybrid/lease',
        'layered',
        ...['delete', 'put', 'read'].map((r) => `records/${r}`),
        'refund',
      ].sort(),
    )
  })

  it('no generated script defines a function or keeps a directive: a call pays only for its decisions', () => {
    for (const [name, source] of Object.entries(luaSources)) {
      expect(source, name).not.toMatch(/^\s*(local\s+)?function\b|=\s*function\b|\bfunction\s*\(/m)
      expect(source, name).not.toMatch(/^\s*--- @/m)
    }
    for (const algorithm of ALGORITHMS) {
      const apply = luaSources[`apply/${algorithm}`]
      expect(apply).toContain("call('GET', block_key)")
      // The layered, refund, block and charge scripts hold every algorithm behind one dispatch.
      for (const name of ['layered', 'refund', 'block', 'charge'] as const)
        expect(luaSources[name], `${name} ${algorithm}`).toContain(`algorithm == '${algorithm}' then`)
    }
  })

  it('derives the algorithm list from the files: a new file is a new algorithm in every variant', async () => {
    await withScripts(async (dir, out) => {
      const twin = readFileSync(join(dir, 'fixed-window.lua'), 'utf8')
      writeFileSync(join(dir, 'fixed-window-twin.lua'), twin)
      await run('node', ['scripts/build-lua.mjs', '--scripts', dir, '--out', out])
      const text = readFileSync(out, 'utf8')
      expect(text).toContain("'apply/fixed-window-twin':")
      expect(text).toContain("'fixed-window-twin': ['limit', 'window', 'period', 'cost'],")
      expect(text.split("algorithm == 'fixed-window-twin' then").length - 1).toBe(5) // layered (two phases), refund, block, charge
    })
  })

  it('refuses an algorithm file without one of the sections every variant needs', async () => {
    await withScripts(async (dir, out) => {
      const source = readFileSync(join(dir, 'gcra.lua'), 'utf8')
      writeFileSync(join(dir, 'gcra.lua'), source.replace('--- @section refund', '--- @section refnud'))
      const build = run('node', ['scripts/build-lua.mjs', '--scripts', dir, '--out', out])
      await expect(build).rejects.toMatchObject({
        stderr: expect.stringContaining('gcra.lua: no section refund'),
      })
    })
  })

  it('--check fails on a stale, missing or left-over generated .lua file, and a build mends each', async () => {
    await withScripts(async (dir, out) => {
      const build = () => run('node', ['scripts/build-lua.mjs', '--scripts', dir, '--out', out])
      const check = () => run('node', ['scripts/build-lua.mjs', '--check', '--scripts', dir, '--out', out])
      const generated = join(dir, '..', 'generated')
      await build()
      await check()
      const spoil: (() => void)[] = [
        () => writeFileSync(join(generated, 'layered.lua'), 'return 1\n'),
        () => unlinkSync(join(generated, 'apply', 'gcra.lua')),
        () => writeFileSync(join(generated, 'apply', 'leaky-bucket.lua'), 'return 1\n'),
      ]
      for (const change of spoil) {
        change()
        await expect(check()).rejects.toMatchObject({ code: 1 })
        await build()
        await check()
      }
    })
  })

  it('its sources use six directive kinds', () => {
    const kinds = new Set<string>()
    const walk = (folder: string): void => {
      for (const entry of readdirSync(folder, { withFileTypes: true })) {
        const path = join(folder, entry.name)
        if (entry.isDirectory()) walk(path)
        else if (entry.name.endsWith('.lua'))
          for (const m of readFileSync(path, 'utf8').matchAll(/^\s*---\s*@([a-z-]+)/gm)) kinds.add(m[1]!)
      }
    }
    walk(SCRIPTS)
    expect([...kinds].sort()).toEqual(['args', 'carry', 'each-algorithm', 'end', 'include', 'section'])
  })

  it('fails on a line that looks like a directive but is none, rather than keep it as a comment', async () => {
    await withScripts(async (dir, out) => {
      const source = readFileSync(join(dir, 'fixed-window.lua'), 'utf8')
      const misspelled = source.replace(
        /^(--- @(?:section|fragment) read)$/m,
        '$1\n--- @inclde "shared/drop"',
      )
      expect(misspelled).not.toBe(source)
      writeFileSync(join(dir, 'fixed-window.lua'), misspelled)
      const build = run('node', ['scripts/build-lua.mjs', '--scripts', dir, '--out', out])
      await expect(build).rejects.toMatchObject({ stderr: expect.stringContaining('fixed-window.lua:') })
    })
  })

  it('reads the library functions, KEYS and ARGV once per call, as locals: a step reads no global table', () => {
    const names = [
      'layered',
      'refund',
      'block',
      'charge',
      ...ALGORITHMS.map((a) => `apply/${a}` as const),
    ] as const
    for (const name of names) {
      const code = luaSources[name].split('\n').filter((line) => !/^\s*--/.test(line))
      const setup = code.findIndex((line) => line.startsWith('local call = redis.call'))
      expect(setup, name).toBeGreaterThan(0)
      for (const line of code.slice(setup + 3))
        expect(line, name).not.toMatch(
          /\b(redis\.call|math\.(ceil|floor|max|min)|string\.(format|find|sub|byte))\b/,
        )
    }
  })

  it("reads a call's keys with one MGET in every apply script, whatever its algorithm stores", () => {
    for (const algorithm of ALGORITHMS) {
      expect(luaSources[`apply/${algorithm}`], algorithm).toContain("call('MGET', unpack(KEYS))")
    }
  })

  it('reads ahead however an algorithm spells its read: nothing hangs on the text of a line', async () => {
    await withScripts(async (dir, out) => {
      const source = readFileSync(join(dir, 'fixed-window.lua'), 'utf8')
      const respelled = source.replace(
        /local raw = call\('GET', key\)|--- @include "shared\/get-state"/,
        'local raw = call("GET", key)',
      )
      expect(respelled).not.toBe(source)
      writeFileSync(join(dir, 'fixed-window.lua'), respelled)
      await run('node', ['scripts/build-lua.mjs', '--scripts', dir, '--out', out])
      const built = (await import(pathToFileURL(out).href)) as { luaSources: Record<string, string> }
      const apply = built.luaSources['apply/fixed-window']
      expect(apply).toContain("call('MGET', unpack(KEYS))")
      expect(apply).toContain('blocked_until = pre[k + 1]')
    })
  })
})

describe('one reply format', () => {
  it('the layered script replies 3 integers per step, all or nothing, any mix of algorithms', async () => {
    const source = luaSources.layered
    const sha = createHash('sha1').update(source).digest('hex')
    await client.script('LOAD', source)
    const prefix = freshPrefix('layered')
    const keys = ['fw', 'tb', 'c'].flatMap((p) => [`${prefix}:{k}:${p}`, `${prefix}:{k}:${p}:block`])
    // One decision of three steps at client clock 1_000_000: fixed window 2 / 10 s (no calendar
    // period: -1), token bucket
    // 1 / 10 s (capacity 1), concurrency 5 (timeout 10 s); the cost signed by mode (peek: -1 - cost).
    const call = (cost: number) =>
      client.evalsha(
        sha,
        keys.length,
        ...keys,
        '1000000',
        '3',
        'fixed-window',
        '2',
        '10000',
        '-1',
        String(cost),
        'token-bucket',
        '1',
        '10000',
        '1',
        String(cost),
        'concurrency',
        '5',
        '10000',
        String(cost),
        'l1',
      )
    expect(await call(1)).toEqual([1, 10000, 0, 0, 10000, 0, 4, 10000, 0])
    // The bucket is empty: the decision denies, and the layers that would admit are not charged.
    expect(await call(1)).toEqual([1, 10000, 0, -1, 10000, 10000, 4, 10000, 0])
    expect(await client.get(keys[0]!)).toBe('1000000:1:10000')
    // A peek (cost -1 - 0) charges nothing and admits where the units allow.
    expect(await call(-1)).toEqual([1, 10000, 0, 0, 10000, 0, 4, 10000, 0])
  })

  it('a coalesced sliding-log call reads its block keys from the MGET, which answers nil for the lists', async () => {
    const source = luaSources['apply/sliding-window-log']
    const sha = createHash('sha1').update(source).digest('hex')
    await client.script('LOAD', source)
    const prefix = freshPrefix('swl-mget')
    const keys = ['a', 'b'].flatMap((s) => [`${prefix}:{k}:${s}`, `${prefix}:{k}:${s}:block`])
    // Two decisions at client clock 1_000_000, 2 per 10 s, cost 1: subject a is blocked until
    // 1_005_000, subject b holds a list with one entry.
    await client.set(keys[1]!, '1005000')
    const step = ['2', '10000', '1']
    expect(await client.evalsha(sha, 2, keys[2]!, keys[3]!, '999000', '1', ...step)).toEqual([1, 10000, 0])
    // One run of two decisions: the count, then the arguments they share.
    const call = () => client.evalsha(sha, 4, ...keys, '1000000', '2', ...step)
    expect(await call()).toEqual([-1, 5000, -5001, 0, 10000, 0])
    expect(await call()).toEqual([-1, 5000, -5001, -1, 10000, 9000])
  })

  it('hybrid mode runs its script from the same build and registry (scripts/hybrid/lease.lua)', async () => {
    const backend = hybridRedis(client, { prefix: freshPrefix('hybrid') })
    const policy = resolvePolicy('h', { algorithm: 'fixed-window', limit: 10, window: 1000 })
    const reply = await backend.lease({
      key: backend.keyOf(policy.id, 'k'),
      kind: 'w',
      nowMs: 1_000_500,
      limit: 10,
      windowMs: 1000,
      capacity: 10,
      cost: 3,
      peek: false,
      want: 0,
      leaseMs: 100,
      returned: 0,
      returnTag: 0,
      deniedBefore: 0,
      divisor: 4,
      leastGrant: 2,
    })
    expect(reply).toMatchObject({
      allowed: true,
      grant: 0,
      remaining: 7,
      tag: 1_000_500,
      endsAtMs: 1_000_600,
    })
    const sha = createHash('sha1').update(luaSources['hybrid/lease']).digest('hex')
    expect(await client.script('EXISTS', sha)).toEqual([1])
  })
})
