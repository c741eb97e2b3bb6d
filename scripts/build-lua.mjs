// Builds the Redis scripts from packages/sluice/src/stores/redis/scripts/ (its README.md describes the
// format): each variant in variants/ is a whole script whose `--- @include` lines pull in shared
// pieces (shared/*.lua) and sections of an algorithm's file (<algorithm>.lua). apply is built once
// per algorithm; layered, refund, block and charge once, with every algorithm behind one
// `--- @each-algorithm` dispatch. Scripts in hybrid/ and records/ are built as they are. The algorithm list is
// the list of files.
// Writes every script twice: as a readable file, src/stores/redis/generated/<script>.lua, and as a
// string in src/stores/redis/lua.generated.ts (what the store loads, the same from src/ and dist/,
// with its comment lines left empty).
// Usage: node scripts/build-lua.mjs [--check] [--scripts DIR] [--out FILE]
//   --check fails when a generated file is stale, missing or left over; --scripts and --out (tests)
//   read and write elsewhere than src/stores/redis/scripts and src/stores/redis/lua.generated.ts
//   (the .lua files go to generated/ beside --out).
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
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
const generatedDir = join(dirname(out), 'generated')

/** Arguments an algorithm may take per step, in wire order; cost and lease change with every step. */
const ARG_NAMES = ['limit', 'window', 'period', 'following', 'capacity', 'cost', 'lease']
const PER_STEP = new Set(['cost', 'lease'])
/** Sections every algorithm file must have: the variants include them. */
const REQUIRED = ['read', 'decide', 'commit', 'report', 'refund']
/** Sections written for every algorithm from its header (see `made`). */
const MADE = new Set(['args', 'keep', 'restore'])

/**
 * A directive line, parsed, or undefined for any other line. Every line that starts with `--- @`
 * is a directive: one that is none of these kinds is an error, never a comment.
 */
function directive(line, where) {
  const start = /^(\s*)---\s*@/.exec(line)
  if (start === null) return undefined
  const pad = start[1]
  const text = line.trim()
  const names = '([a-zA-Z_][a-zA-Z0-9_]*(?: [a-zA-Z_][a-zA-Z0-9_]*)*)'
  const forms = [
    ['args', new RegExp(`^--- @args ${names}$`), (m) => m[1].split(' ')],
    ['carry', new RegExp(`^--- @carry ${names}$`), (m) => m[1].split(' ')],
    ['section', /^--- @section ([a-z][a-z-]*)$/, (m) => m[1]],
    ['include', /^--- @include "([a-z][a-z-]*(?:\/[a-z][a-z-]*)?)"$/, (m) => m[1]],
    ['each-algorithm', /^--- @each-algorithm$/, () => undefined],
    ['end', /^--- @end$/, () => undefined],
  ]
  for (const [kind, pattern, value] of forms) {
    const m = pattern.exec(text)
    if (m !== null) return { pad, kind, value: value(m) }
  }
  throw new Error(`${where}: not a directive of scripts/README.md: ${text}`)
}

const indent = (lines, pad) => lines.map((l) => (l === '' ? l : pad + l))
const trimBlank = (lines) => {
  let s = 0
  let e = lines.length
  while (s < e && lines[s].trim() === '') s++
  while (e > s && lines[e - 1].trim() === '') e--
  return lines.slice(s, e)
}
const fileOf = (name) => `${name}.lua`
const readLines = (path) => readFileSync(join(dir, path), 'utf8').split('\n')

/** An algorithm file: its arguments, the locals it carries across layered's phases, its sections. */
function readAlgorithm(name) {
  const file = fileOf(name)
  const algorithm = { name, file, args: undefined, carry: [], sections: new Map() }
  let current
  readLines(file).forEach((line, i) => {
    const d = directive(line, `${file}:${i + 1}`)
    if (d?.kind === 'section') {
      if (MADE.has(d.value) || algorithm.sections.has(d.value))
        throw new Error(`${file}:${i + 1}: section ${d.value} is made by the build or written twice`)
      current = []
      algorithm.sections.set(d.value, current)
    } else if (d?.kind === 'args' || d?.kind === 'carry') {
      if (current !== undefined)
        throw new Error(`${file}:${i + 1}: @${d.kind} belongs before the first section`)
      algorithm[d.kind] = d.value
    } else if (d?.kind === 'each-algorithm' || d?.kind === 'end') {
      throw new Error(`${file}:${i + 1}: @${d.kind} belongs in a variant`)
    } else if (current !== undefined) {
      current.push(line)
    } else if (line.trim() !== '' && !line.trim().startsWith('--')) {
      throw new Error(`${file}:${i + 1}: code before the first section`)
    }
  })
  if (algorithm.args === undefined) throw new Error(`${file}: no @args line`)
  for (const arg of algorithm.args) {
    if (!ARG_NAMES.includes(arg)) throw new Error(`${file}: unknown argument ${arg}`)
  }
  if (!algorithm.args.includes('cost')) throw new Error(`${file}: @args must include cost`)
  for (const required of REQUIRED) {
    if (!algorithm.sections.has(required)) throw new Error(`${file}: no section ${required}`)
  }
  return algorithm
}

/** Locals phase two of the layered script needs of a step: its keys, arguments, block, verdict and @carry. */
const carried = (algorithm) => [
  'key',
  ...algorithm.args,
  'blocked_until',
  'blocked',
  'allowed',
  'retry',
  ...algorithm.carry,
]

const argAt = (algorithm, arg) => {
  const i = algorithm.args.indexOf(arg)
  return `ARGV[a${i === 0 ? '' : ` + ${i}`}]`
}

/** The sections written for `algorithm` from its header. */
function made(name, algorithm) {
  switch (name) {
    case 'args': {
      // The policy's numbers are compared as ARGV strings and converted only when they change.
      const policy = algorithm.args.filter((arg) => !PER_STEP.has(arg))
      const step = algorithm.args.filter((arg) => PER_STEP.has(arg))
      const lines = [`-- One step's arguments: ${algorithm.args.join(', ')}.`]
      if (policy.length > 0) {
        lines.push(
          `if ${policy.map((arg) => `${argAt(algorithm, arg)} ~= ${arg}_arg`).join(' or ')} then`,
          `  ${policy.map((arg) => `${arg}_arg`).join(', ')} = ${policy.map((arg) => argAt(algorithm, arg)).join(', ')}`,
          `  ${policy.join(', ')} = ${policy.map((arg) => `${arg}_arg + 0`).join(', ')}`,
          'end',
        )
      }
      const parse = (arg) => (arg === 'lease' ? argAt(algorithm, arg) : `${argAt(algorithm, arg)} + 0`)
      lines.push(`local ${step.join(', ')} = ${step.map(parse).join(', ')}`)
      lines.push(`a = a + ${algorithm.args.length}`)
      return lines
    }
    case 'keep':
      return [`keep[s] = { algorithm, ${carried(algorithm).join(', ')} }`]
    case 'restore': {
      const names = carried(algorithm)
      return [`local ${names.join(', ')} = unpack(saved, 2, ${names.length + 1})`]
    }
  }
}

/**
 * `lines` with every directive expanded: an include of `dir/name` is the file scripts/dir/name.lua,
 * an include of a bare name a section of `algorithm` (or one made from its header), and an
 * `@each-algorithm` ... `@end` block the same lines once per algorithm behind one dispatch on
 * `algorithm`. `where` names the file for errors; `stack` the includes being expanded.
 */
function expand(lines, where, algorithm, algorithms, stack = []) {
  const body = []
  for (let i = 0; i < lines.length; i++) {
    const d = directive(lines[i], `${where}:${i + 1}`)
    if (d === undefined) {
      body.push(lines[i])
    } else if (d.kind === 'include') {
      body.push(...indent(include(d.value, where, algorithm, algorithms, stack), d.pad))
    } else if (d.kind === 'each-algorithm') {
      if (algorithm !== undefined) throw new Error(`${where}:${i + 1}: @each-algorithm inside a dispatch`)
      const end = lines.findIndex((l, j) => j > i && directive(l, where)?.kind === 'end')
      if (end === -1) throw new Error(`${where}:${i + 1}: @each-algorithm without @end`)
      const block = trimBlank(
        lines.slice(i + 1, end).map((l) => (l.startsWith(d.pad) ? l.slice(d.pad.length) : l)),
      )
      algorithms.forEach((a, n) => {
        body.push(`${d.pad}${n === 0 ? 'if' : 'elseif'} algorithm == '${a.name}' then`)
        body.push(...indent(expand(block, where, a, algorithms, stack), `${d.pad}  `))
      })
      body.push(`${d.pad}else`)
      body.push(`${d.pad}  return redis.error_reply('ERR sluice: unknown algorithm ' .. tostring(algorithm))`)
      body.push(`${d.pad}end`)
      i = end
    } else {
      throw new Error(`${where}:${i + 1}: @${d.kind} belongs in an algorithm's header`)
    }
  }
  return body
}

function include(name, where, algorithm, algorithms, stack) {
  if (stack.includes(name)) throw new Error(`${where}: ${name} includes itself`)
  if (name.includes('/')) {
    const file = fileOf(name)
    if (!existsSync(join(dir, file))) throw new Error(`${where}: no file ${file} to include`)
    return expand(trimBlank(readLines(file)), file, algorithm, algorithms, [...stack, name])
  }
  if (algorithm === undefined) throw new Error(`${where}: section ${name} outside @each-algorithm`)
  if (MADE.has(name)) return made(name, algorithm)
  const section = algorithm.sections.get(name)
  if (section === undefined) throw new Error(`${algorithm.file}: no section ${name} (included by ${where})`)
  return expand(trimBlank(section), algorithm.file, algorithm, algorithms, [...stack, name])
}

/** A variant of variants/ built for `algorithm` (apply) or for every algorithm (the others). */
function variant(name, algorithm, algorithms) {
  const file = fileOf(`variants/${name}`)
  const from =
    algorithm === undefined
      ? `${file} with every algorithm's file.`
      : `${file} with ${algorithm.file}: one step's arguments are ${algorithm.args.join(', ')}.`
  return [
    `-- Built by scripts/build-lua.mjs from packages/sluice/src/stores/redis/scripts/: do not edit.`,
    `-- ${from}`,
    ...trimBlank(expand(readLines(file), file, algorithm, algorithms)),
  ]
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

/** Every script by name, its text, and the module that embeds them. */
function render() {
  const names = readdirSync(dir)
    .filter((f) => f.endsWith('.lua'))
    .map((f) => f.slice(0, -'.lua'.length))
    .sort()
  const algorithms = names.map(readAlgorithm)
  const scripts = []
  for (const a of algorithms) scripts.push([`apply/${a.name}`, variant('apply', a, algorithms)])
  for (const name of ['layered', 'refund', 'block', 'charge'])
    scripts.push([name, variant(name, undefined, algorithms)])
  for (const folder of ['hybrid', 'records'])
    for (const file of existsSync(join(dir, folder)) ? readdirSync(join(dir, folder)).sort() : []) {
      if (!file.endsWith('.lua')) continue
      const name = `${folder}/${file.slice(0, -'.lua'.length)}`
      const lines = trimBlank(readLines(`${name}.lua`))
      lines.forEach((line, i) => {
        if (directive(line, `${name}.lua:${i + 1}`) !== undefined)
          throw new Error(`${name}.lua:${i + 1}: a ${folder} script is built as it is, without directives`)
      })
      scripts.push([
        name,
        [
          `-- Built by scripts/build-lua.mjs from packages/sluice/src/stores/redis/scripts/${name}.lua: do not edit.`,
          ...lines,
        ],
      ])
    }
  const texts = scripts.map(([name, lines]) => [name, `${lines.join('\n')}\n`])
  const fields = texts.map(([name, text]) => `  ${property(name)}:\n    ${quote(loaded(text))},`)
  const layouts = algorithms.map((a) => `  ${property(a.name)}: [${a.args.map((x) => `'${x}'`).join(', ')}],`)
  const module = [
    '// Generated by scripts/build-lua.mjs from src/stores/redis/scripts/: do not edit. Each script is',
    '// also in src/stores/redis/generated/<name>.lua, to read.',
    '',
    '/** Every script, by name: `apply/<algorithm>`, layered, refund, block, charge, hybrid/*, records/*. */',
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
  return { texts, module }
}

/**
 * What the store loads: the readable script with each comment line left empty. Redis parses less
 * and the packed library carries less, and a line number in a Redis error is still the line of the
 * file in generated/.
 */
function loaded(text) {
  return text
    .split('\n')
    .map((line) => (/^\s*--/.test(line) ? '' : line))
    .join('\n')
}

/** The .lua files under generated/, relative to it. */
function generatedFiles(folder = generatedDir, prefix = '') {
  if (!existsSync(folder)) return []
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? generatedFiles(join(folder, entry.name), `${prefix}${entry.name}/`)
      : [`${prefix}${entry.name}`],
  )
}

const { texts, module } = render()
const files = new Map(texts.map(([name, text]) => [`${name}.lua`, text]))
if (values.check) {
  const stale = []
  if (!existsSync(out) || readFileSync(out, 'utf8') !== module) stale.push(out)
  for (const [file, text] of files) {
    const path = join(generatedDir, file)
    if (!existsSync(path) || readFileSync(path, 'utf8') !== text) stale.push(path)
  }
  for (const file of generatedFiles()) if (!files.has(file)) stale.push(join(generatedDir, file))
  if (stale.length > 0) {
    console.error(`stale: ${stale.join(', ')}: run node scripts/build-lua.mjs`)
    process.exit(1)
  }
} else {
  writeFileSync(out, module)
  for (const file of generatedFiles()) if (!files.has(file)) rmSync(join(generatedDir, file))
  for (const [file, text] of files) {
    mkdirSync(dirname(join(generatedDir, file)), { recursive: true })
    writeFileSync(join(generatedDir, file), text)
  }
}
