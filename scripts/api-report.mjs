#!/usr/bin/env node
// `npm run api-report`: the public surface of every entry point of both packages, as API Extractor
// reports (packages/<package>/api/<entry>.api.md: every exported name with its signature), written
// from the built declarations (run `npm run build` first). Commit them: a change to the surface is
// then a reviewed diff. With --check nothing is written; it exits 1 and names each entry whose
// surface differs from its committed report (test/consumer/api-report.test.ts runs it).
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Extractor, ExtractorConfig } from '@microsoft/api-extractor'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const check = process.argv.includes('--check')

/** Each package and its entries: the name its report takes, and the built declarations. */
function entryPoints() {
  const library = JSON.parse(readFileSync(join(root, 'packages/sluice/entries.json'), 'utf8'))
  return [
    ...Object.keys(library).map((entry) => ({ pkg: 'sluice', entry })),
    { pkg: 'sluice-server', entry: 'index' },
  ]
}

const scratch = mkdtempSync(join(tmpdir(), 'sluice-api-'))
const changed = []
try {
  for (const { pkg, entry } of entryPoints()) {
    const folder = join(root, 'packages', pkg)
    mkdirSync(join(folder, 'api'), { recursive: true })
    const config = ExtractorConfig.prepare({
      configObject: {
        projectFolder: folder,
        mainEntryPointFilePath: join(folder, 'dist', `${entry}.d.ts`),
        compiler: {
          overrideTsconfig: {
            compilerOptions: {
              strict: true,
              skipLibCheck: true,
              module: 'nodenext',
              moduleResolution: 'nodenext',
              types: ['node'],
              typeRoots: [join(root, 'node_modules/@types')],
            },
          },
        },
        apiReport: {
          enabled: true,
          reportFolder: join(folder, 'api'),
          reportTempFolder: join(scratch, pkg),
          reportFileName: `${entry}.api.md`,
        },
        docModel: { enabled: false },
        dtsRollup: { enabled: false },
        tsdocMetadata: { enabled: false },
        messages: {
          // The report is the surface; doc-comment style and "forgotten export" notes are not.
          extractorMessageReporting: { default: { logLevel: 'none', addToApiReportFile: false } },
          tsdocMessageReporting: { default: { logLevel: 'none', addToApiReportFile: false } },
          compilerMessageReporting: { default: { logLevel: 'error' } },
        },
      },
      packageJsonFullPath: join(folder, 'package.json'),
      configObjectFullPath: undefined,
    })
    const result = Extractor.invoke(config, { localBuild: !check, messageCallback: quiet })
    if (result.apiReportChanged) changed.push(`packages/${pkg}/api/${entry}.api.md`)
    if (result.errorCount > 0) {
      process.stderr.write(`api-report: ${pkg} ${entry}: ${result.errorCount} error(s)\n`)
      process.exitCode = 1
    }
  }
} finally {
  rmSync(scratch, { recursive: true, force: true })
}
if (check && changed.length > 0) {
  process.stderr.write(
    `api-report: the public surface differs from the committed report:\n${changed.map((f) => `  ${f}`).join('\n')}\n` +
      'run `npm run build && npm run api-report`, review the diff of those files and commit it\n',
  )
  process.exitCode = 1
} else if (!check)
  console.log(changed.length === 0 ? 'api-report: unchanged' : `api-report: wrote ${changed.join(', ')}`)

/** API Extractor's own progress lines ("Analysis will use...") are not news. */
function quiet(message) {
  if (message.logLevel === 'info' || message.logLevel === 'verbose') message.handled = true
}
