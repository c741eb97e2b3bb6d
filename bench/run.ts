// Benchmark runner: loads every bench/cases/*.ts module, runs the selected ones one after another,
// and prints one table. `npm run bench -- [--quick] [--only <substring of a case name>]`
import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import type { BenchCase, BenchRow } from './types.js'

const { values } = parseArgs({
  options: { quick: { type: 'boolean', default: false }, only: { type: 'string' } },
})

const casesDir = join(fileURLToPath(new URL('.', import.meta.url)), 'cases')
const files = (await readdir(casesDir)).filter((f) => f.endsWith('.ts')).sort()
const cases: BenchCase[] = []
for (const file of files) {
  const mod = (await import(pathToFileURL(join(casesDir, file)).href)) as { benchCase?: BenchCase }
  if (mod.benchCase === undefined) throw new Error(`bench/cases/${file} does not export benchCase`)
  cases.push(mod.benchCase)
}
const selected = cases.filter((c) => values.only === undefined || c.name.includes(values.only))
if (selected.length === 0) {
  console.error(`no bench case matches --only ${values.only}; cases: ${cases.map((c) => c.name).join(', ')}`)
  process.exit(1)
}

const rows: (BenchRow & { case: string })[] = []
for (const c of selected) {
  const started = performance.now()
  process.stderr.write(`running ${c.name}${values.quick ? ' (quick)' : ''}... `)
  for (const row of await c.run({ quick: values.quick })) rows.push({ case: c.name, ...row })
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
// A Markdown table, so a run can be pasted into docs/benchmarks.md as it is.
console.log(`| ${header.join(' | ')} |`)
console.log(`| ${header.map(() => '---').join(' | ')} |`)
for (const line of lines) console.log(`| ${line.join(' | ')} |`)
console.log(
  `\nnode ${process.version}, ${process.platform}/${process.arch}, ${new Date().toISOString()}${values.quick ? ', --quick' : ''}`,
)
