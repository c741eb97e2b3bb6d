// Builds src/stores/redis/lua.generated.ts from src/stores/redis/scripts/: each algorithm is one file,
// scripts/<algorithm>.lua, of named fragments (read, decide, commit, report, refund; policy and const
// where needed) over the locals described in scripts/README.md. Every variant is a template in
// scripts/variants/ whose directives this script fills in with an algorithm's fragments: apply (one
// or a coalesced batch of single-step decisions) once per algorithm; layered (all or nothing),
// refund and block once, with every algorithm behind one `if algorithm == ...` dispatch. Scripts in scripts/hybrid/ are built as they are. The algorithm
// list is the list of files. The result is embedded as strings, so the scripts load the same way from
// src/ (vitest) and from dist/ (ESM and CJS).
// Usage: node scripts/build-lua.mjs [--check] [--scripts DIR] [--out FILE]
//   --check fails when the generated file is stale; --scripts and --out (tests) read and write
//   elsewhere than src/stores/redis/scripts and src/stores/redis/lua.generated.ts.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const { values } = parseArgs({
  options: { check: { type: 'boolean' }, scripts: { type: 'string' }, out: { type: 'string' } },
})
const dir =
  values.scripts === undefined
    ? join(root, 'packages/sluice/src/stores/redis/scripts')
    : resolve(values.scripts)
const out =
  values.out === undefined
    ? join(root, 'packages/sluice/src/stores/redis/lua.generated.ts')
    : resolve(values.out)

/** Arguments an algorithm may take per step, in wire order; `cost` is signed by mode in apply calls. */
const ARG_NAMES = ['limit', 'window', 'capacity', 'cost', 'lease']
const DIRECTIVE = /^(\s*)--- @([a-z-]+)(?: "?([a-z-]+)"?)?\s*$/

/** An algorithm file: its header directives and its fragments by name. */
function readAlgorithm(name) {
  const text = readFileSync(join(dir, `${name}.lua`), 'utf8')
  const algorithm = { name, args: [], policy: [], carry: [], fragments: new Map() }
  let current
  for (const line of text.split('\n')) {
    const header = /^--- @(args|policy|carry) (.+)$/.exec(line)
    const fragment = /^--- @fragment ([a-z-]+)\s*$/.exec(line)
    if (header !== null && current === undefined) {
      algorithm[header[1]] = header[2].trim().split(/\s+/)
    } else if (fragment !== null) {
      current = []
      algorithm.fragments.set(fragment[1], current)
    } else if (current !== undefined) {
      current.push(line)
    }
  }
  for (const arg of algorithm.args) {
    if (!ARG_NAMES.includes(arg)) throw new Error(`${name}.lua: unknown argument ${arg}`)
  }
  if (!algorithm.args.includes('cost')) throw new Error(`${name}.lua: @args must include cost`)
  for (const required of ['read', 'decide', 'commit', 'report', 'refund']) {
    if (!algorithm.fragments.has(required)) throw new Error(`${name}.lua: no fragment ${required}`)
  }
  return algorithm
}

const indent = (lines, pad) => lines.map((l) => (l === '' ? l : pad + l))
const trimBlank = (lines) => {
  let s = 0
  let e = lines.length
  while (s < e && lines[s].trim() === '') s++
  while (e > s && lines[e - 1].trim() === '') e--
  return lines.slice(s, e)
}

/** A fragment of `algorithm`, its `--- @use name` lines replaced by that fragment (none: []). */
function fragment(algorithm, name, seen = new Set()) {
  const lines = algorithm.fragments.get(name)
  if (lines === undefined) return []
  if (seen.has(name)) throw new Error(`${algorithm.name}.lua: fragment ${name} uses itself`)
  const body = []
  for (const line of trimBlank(lines)) {
    const use = /^(\s*)--- @use ([a-z-]+)\s*$/.exec(line)
    if (use === null) body.push(line)
    else body.push(...indent(fragment(algorithm, use[2], new Set([...seen, name])), use[1]))
  }
  return body
}

/** Whether the algorithm's state is a string its read fragment GETs (see @prefetch-call). */
const readsString = (algorithm) =>
  fragment(algorithm, 'read').some((l) => l.includes("redis.call('GET', key)"))

/** Locals kept between the two phases of the layered script: arguments, block, decision, state. */
function carried(algorithm) {
  return [
    'key',
    ...algorithm.args,
    'blocked_until',
    'held',
    'allowed',
    'retry',
    ...algorithm.policy,
    ...algorithm.carry,
  ]
}

const numeric = (arg) => arg !== 'lease'
const argAt = (i) => `ARGV[a${i === 0 ? '' : ` + ${i}`}]`
const parseArg = (arg, i) => `${argAt(i)}${numeric(arg) ? ' + 0' : ''}`

/** The Lua of one directive for `algorithm` (undefined outside a dispatch block of layered, refund, block). */
function directive(name, argument, algorithm, algorithms) {
  switch (name) {
    case 'include':
      return expandTemplate(argument, algorithm, algorithms)
    case 'const':
      return (algorithm === undefined ? algorithms : [algorithm]).flatMap((a) => fragment(a, 'const'))
    case 'fragment':
      return fragment(algorithm, argument)
    case 'args':
      return [
        `local ${algorithm.args.join(', ')} = ${algorithm.args.map((arg, i) => parseArg(arg, i)).join(', ')}`,
      ]
    case 'args-cache-locals': {
      const policy = algorithm.args.filter((a) => a !== 'cost' && a !== 'lease')
      return [`local ${[...policy.map((a) => `${a}_arg`), ...policy, ...algorithm.policy].join(', ')}`]
    }
    case 'args-cached': {
      const policy = algorithm.args.filter((a) => a !== 'cost' && a !== 'lease')
      const changed = policy.map((arg) => `${argAt(algorithm.args.indexOf(arg))} ~= ${arg}_arg`)
      const lines = [`if ${changed.join(' or ')} then`]
      const texts = policy.map((arg) => argAt(algorithm.args.indexOf(arg)))
      lines.push(`  ${policy.map((arg) => `${arg}_arg`).join(', ')} = ${texts.join(', ')}`)
      lines.push(`  ${policy.join(', ')} = ${policy.map((a) => `${a}_arg + 0`).join(', ')}`)
      lines.push(...indent(fragment(algorithm, 'policy'), '  '), 'end')
      for (const arg of ['cost', 'lease']) {
        const i = algorithm.args.indexOf(arg)
        if (i >= 0) lines.push(`local ${arg} = ${parseArg(arg, i)}`)
      }
      return lines
    }
    case 'keep-table': {
      // Sized for three steps of the algorithm that keeps the most locals: growing a table while it
      // fills costs a rehash each time its size doubles (11k instructions per token-bucket step).
      const size = 3 * Math.max(...algorithms.map((a) => 1 + carried(a).length))
      const rows = []
      for (let i = 0; i < size; i += 16)
        rows.push(
          `  ${Array(Math.min(16, size - i))
            .fill('nil')
            .join(', ')},`,
        )
      return ['local keep = {', ...rows, '}']
    }
    // Coalesced calls of an algorithm whose state is a string read all their keys in one MGET (one
    // command instead of two per decision; 8-10% fewer instructions per decision at 16 per call, by
    // bench/lua-cost.ts). A value read there holds until the call writes that key, so a key named a
    // second time in the call reads Redis again (`fresh`). One decision alone reads as before (an
    // MGET and its table cost more than they save there), and so does a sliding log (a sorted set).
    case 'prefetch-call':
      return !readsString(algorithm)
        ? []
        : [
            'local pre, seen',
            'if #KEYS > 2 then',
            "  pre, seen = redis.call('MGET', unpack(KEYS)), {}",
            'end',
          ]
    case 'prefetch-step':
      return !readsString(algorithm)
        ? []
        : ['local fresh = false', 'if pre then', '  fresh = not seen[key]', '  seen[key] = true', 'end']
    case 'policy-locals':
      return algorithm.policy.length === 0 ? [] : [`local ${algorithm.policy.join(', ')}`]
    case 'next':
      return [`a = a + ${algorithm.args.length}`]
    case 'carry-save': {
      const vars = carried(algorithm)
      const slots = vars.map((_, i) => `keep[o + ${i + 1}]`)
      return [`${slots.join(', ')} = ${vars.join(', ')}`, `o = o + ${vars.length}`]
    }
    case 'carry-load': {
      const vars = carried(algorithm)
      const slots = vars.map((_, i) => `keep[o + ${i + 1}]`)
      return [`local ${vars.join(', ')} = ${slots.join(', ')}`, `o = o + ${vars.length}`]
    }
    default:
      throw new Error(`unknown directive @${name}`)
  }
}

/**
 * A template of scripts/variants/ with its directives filled in for `algorithm` (apply), or
 * for every algorithm (layered, refund, block: each `--- @dispatch` ... `--- @end` block once per
 * algorithm behind `if algorithm == '<name>'`).
 */
function expandTemplate(template, algorithm, algorithms) {
  const lines = readFileSync(join(dir, 'variants', `${template}.lua`), 'utf8').split('\n')
  const body = []
  for (let i = 0; i < lines.length; i++) {
    const match = DIRECTIVE.exec(lines[i])
    if (match === null) {
      body.push(lines[i])
      continue
    }
    const [, pad, name, argument] = match
    if (name === 'dispatch') {
      const end = lines.findIndex((l, j) => j > i && DIRECTIVE.exec(l)?.[2] === 'end')
      const block = lines.slice(i + 1, end)
      algorithms.forEach((a, n) => {
        body.push(`${pad}${n === 0 ? 'if' : 'elseif'} algorithm == '${a.name}' then`)
        body.push(...indent(expandLines(block, a, algorithms), '  '))
      })
      body.push(`${pad}else`)
      body.push(`${pad}  return redis.error_reply('ERR sluice: unknown algorithm ' .. tostring(algorithm))`)
      body.push(`${pad}end`)
      i = end
      continue
    }
    body.push(...indent(directive(name, argument, algorithm, algorithms), pad))
  }
  return trimBlank(body)
}

function expandLines(lines, algorithm, algorithms) {
  const body = []
  for (const line of lines) {
    const match = DIRECTIVE.exec(line)
    if (match === null) body.push(line)
    else body.push(...indent(directive(match[2], match[3], algorithm, algorithms), match[1]))
  }
  return body
}

/** Fills {{algorithm}} and {{args}} in a template's header comment. */
function header(lines, algorithm) {
  if (algorithm === undefined) return lines
  return lines.map((l) =>
    l.replaceAll('{{algorithm}}', algorithm.name).replaceAll('{{args}}', algorithm.args.join(', ')),
  )
}

/**
 * An apply variant with a prefetch (@prefetch-call) reads its keys from the MGET: each
 * `local x = redis.call('GET', key)` (or `block_key`) of its fragments becomes a read of `pre` while
 * the key is `fresh`, else the GET itself.
 */
function prefetched(lines) {
  if (!lines.some((l) => l.includes("redis.call('MGET'"))) return lines
  let rewritten = 0
  const out = lines.flatMap((line) => {
    const get = /^(\s*)local ([a-z_]+) = redis\.call\('GET', (key|block_key)\)$/.exec(line)
    if (get === null) return [line]
    rewritten++
    const [, pad, name, which] = get
    const index = which === 'key' ? 'k' : 'k + 1'
    return [
      `${pad}local ${name}`,
      `${pad}if fresh then`,
      `${pad}  ${name} = pre[${index}]`,
      `${pad}else`,
      `${pad}  ${name} = redis.call('GET', ${which})`,
      `${pad}end`,
    ]
  })
  if (rewritten !== 2) throw new Error(`apply: expected 2 GETs to read from the MGET, found ${rewritten}`)
  return out
}

// Biome's style: a property name is quoted only when it must be.
const property = (name) => (/^[a-z_][a-z0-9_]*$/i.test(name) ? name : `'${name}'`)

// Biome's style: the quote that needs fewer escapes (single on a tie).
function quote(text) {
  const singles = text.split("'").length
  const doubles = text.split('"').length
  const q = doubles < singles ? '"' : "'"
  return `${q}${text.replaceAll('\\', '\\\\').replaceAll(q, `\\${q}`).replaceAll('\n', '\\n')}${q}`
}

function render() {
  const names = readdirSync(dir)
    .filter((f) => f.endsWith('.lua'))
    .map((f) => f.slice(0, -'.lua'.length))
    .sort()
  const algorithms = names.map(readAlgorithm)
  const scripts = []
  for (const a of algorithms) {
    scripts.push([`apply/${a.name}`, header(prefetched(expandTemplate('apply', a, algorithms)), a)])
  }
  for (const variant of ['layered', 'refund', 'block', 'charge']) {
    scripts.push([variant, expandTemplate(variant, undefined, algorithms)])
  }
  for (const file of existsSync(join(dir, 'hybrid')) ? readdirSync(join(dir, 'hybrid')).sort() : []) {
    if (!file.endsWith('.lua')) continue
    const text = readFileSync(join(dir, 'hybrid', file), 'utf8').split('\n')
    scripts.push([`hybrid/${file.slice(0, -'.lua'.length)}`, trimBlank(text)])
  }
  const fields = scripts.map(
    ([name, lines]) => `  ${property(name)}:\n    ${quote(`${lines.join('\n')}\n`)},`,
  )
  const layouts = algorithms.map((a) => `  ${property(a.name)}: [${a.args.map((x) => `'${x}'`).join(', ')}],`)
  return [
    '// Generated by scripts/build-lua.mjs from src/stores/redis/scripts/: do not edit.',
    '',
    '/** Every script, by name: `apply/<algorithm>`, layered, refund, block, hybrid/*. */',
    'export const luaSources = {',
    ...fields,
    '} as const',
    '',
    '/** Each algorithm with a Lua source, and the arguments of one of its steps in wire order. */',
    'export const luaAlgorithms = {',
    ...layouts,
    '} as const',
    '',
  ].join('\n')
}

const text = render()
if (values.check) {
  if (!existsSync(out) || readFileSync(out, 'utf8') !== text) {
    console.error(`${out} is stale: run node scripts/build-lua.mjs`)
    process.exit(1)
  }
} else {
  writeFileSync(out, text)
}
