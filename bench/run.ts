// Benchmark runner: loads every bench/cases/*.ts module, runs the selected cases one after another,
// prints every row as one table, then the summary table (bench/summary.ts).
//   npm run bench -- [--quick] [--only <case name, or a substring of names>] [--all] [--profile DIR]
//                    [--variants <HTTP server variants, comma-separated>]
//   npm run bench -- --check
// The default run is DEFAULT_CASES, the cases the summary reads; `--all` runs every case, and
// `--only` picks any case: its exact name, else every case whose name contains it. `--check` runs no
// case: it measures the budgets (bench/budgets/) and exits non-zero when one is missed.
// Each case runs in a Node.js process of its own (this script again, with `--case <name>`: bench/child.ts), so no
// case's figures depend on which cases ran before it: what an earlier case leaves in the heap and in
// V8's type feedback for Sluice's shared code (the limiter, the failover layer) made a later case's
// decisions slower than the same case run alone.
import { mkdirSync, writeFileSync } from 'node:fs'
import { readdir } from 'node:fs/promises'
import { loadavg } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { inChild } from './child.js'
import { summaryTable } from './summary.js'
import type { BenchCase, BenchRow } from './types.js'

const { values, positionals } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    only: { type: 'string' },
    all: { type: 'boolean', default: false },
    profile: { type: 'string' },
    variants: { type: 'string' },
    check: { type: 'boolean', default: false },
    // Internal: run this one case here and write its rows as JSON to the file named last (bench/child.ts).
    case: { type: 'string' },
  },
  allowPositionals: true,
})

if (values.check) {
  const { checkBudgets } = await import('./budgets/measure.js')
  process.exit(await checkBudgets())
}

/** The cases whose rows the summary table reads (bench/summary.ts). */
// biome-ignore format: one name a line, so adding a case is a one-line change that merges cleanly
const DEFAULT_CASES = [
  'http-fastify',
  'http-express',
  'memory',
  'redis',
  'redis-memory',
  'envoy',
]

const casesDir = join(fileURLToPath(new URL('.', import.meta.url)), 'cases')
const files = (await readdir(casesDir)).filter((f) => f.endsWith('.ts')).sort()
const cases: BenchCase[] = []
for (const file of files) {
  const mod = (await import(pathToFileURL(join(casesDir, file)).href)) as {
    benchCase?: BenchCase
    benchCases?: BenchCase[]
  }
  const found = [...(mod.benchCase === undefined ? [] : [mod.benchCase]), ...(mod.benchCases ?? [])]
  if (found.length === 0) throw new Error(`bench/cases/${file} exports neither benchCase nor benchCases`)
  cases.push(...found)
}
const missing = DEFAULT_CASES.filter((name) => !cases.some((c) => c.name === name))
if (missing.length > 0) throw new Error(`bench/run.ts DEFAULT_CASES names no case ${missing.join(', ')}`)
const only = values.only
const selected =
  values.case !== undefined
    ? cases.filter((c) => c.name === values.case)
    : only === undefined
      ? cases.filter((c) => values.all || DEFAULT_CASES.includes(c.name))
      : cases.some((c) => c.name === only)
        ? cases.filter((c) => c.name === only)
        : cases.filter((c) => c.name.includes(only))
if (selected.length === 0) {
  console.error(`no bench case matches --only ${only}; cases: ${cases.map((c) => c.name).join(', ')}`)
  process.exit(1)
}
const profileDir = values.profile === undefined ? undefined : resolve(values.profile)
if (profileDir !== undefined) mkdirSync(profileDir, { recursive: true })

const variants = values.variants?.split(',').map((v) => v.trim())

if (values.case !== undefined) {
  const rows = await selected[0]!.run({ quick: values.quick, profileDir, variants })
  writeFileSync(positionals.at(-1)!, JSON.stringify(rows))
  process.exit(0)
}

/** Run case `name` in a child process of its own and return its rows. */
function runIsolated(name: string): Promise<BenchRow[]> {
  const args = ['--case', name]
  if (values.quick) args.push('--quick')
  if (profileDir !== undefined) args.push('--profile', profileDir)
  if (values.variants !== undefined) args.push('--variants', values.variants)
  return inChild<BenchRow[]>(fileURLToPath(import.meta.url), args, `bench case ${name}`)
}

const began = performance.now()
const load = loadavg()
  .map((n) => n.toFixed(2))
  .join(', ')
const rows: (BenchRow & { case: string })[] = []
for (const c of selected) {
  const started = performance.now()
  process.stderr.write(`running ${c.name}${values.quick ? ' (quick)' : ''}... `)
  for (const row of await runIsolated(c.name)) rows.push({ case: c.name, ...row })
  process.stderr.write(`${((performance.now() - started) / 1000).toFixed(1)} s\n`)
}

/** Three significant digits, with thousands separators for large numbers. */
function format(n: number): string {
  if (Math.abs(n) >= 1000) return Math.round(n).toLocaleString('en-US')
  return Number(n.toPrecision(3)).toString()
}

const header = ['case', 'subject', 'metric', 'value', 'unit', 'ratio', 'note']
const lines = rows.map((r) => [
  r.case,
  r.subject,
  r.metric,
  format(r.value),
  r.unit,
  r.ratio === undefined ? '' : `${r.ratio.toFixed(2)}x`,
  r.note ?? '',
])
// Markdown tables, so a run can be pasted into docs/benchmarks.md as it is.
console.log(`| ${header.join(' | ')} |`)
console.log(`| ${header.map(() => '---').join(' | ')} |`)
for (const line of lines) console.log(`| ${line.join(' | ')} |`)
console.log('\n## Summary\n')
for (const line of summaryTable(rows)) console.log(line)
const seconds = Math.round((performance.now() - began) / 1000)
console.log(
  `\nnode ${process.version}, ${process.platform}/${process.arch}, ${new Date().toISOString()}${values.quick ? ', --quick' : ''}; ` +
    `cases ${Math.floor(seconds / 60)} min ${seconds % 60} s; load average at the start ${load}` +
    (profileDir === undefined ? '' : `; server profiles in ${profileDir}`),
)
