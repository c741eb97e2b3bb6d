#!/usr/bin/env node
// `npm run build`: the Lua scripts, then tsup (ESM, CommonJS and declarations), then rls.proto beside
// the chunks. A warning from the bundler fails the build: the one that used to pass quietly was a
// circular re-export that Rollup says "will likely lead to broken execution order".
import { spawnSync } from 'node:child_process'
import { copyFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const quiet = process.argv.includes('--silent')

function run(args) {
  const result = spawnSync(process.execPath, args, {
    cwd: root,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  })
  const output = `${result.stdout}${result.stderr}`
  if (result.status !== 0) {
    process.stderr.write(output)
    process.exit(result.status ?? 1)
  }
  return output
}

run([join(root, 'scripts/build-lua.mjs')])
const tsup = createRequire(import.meta.url).resolve('tsup/dist/cli-default.js')
const output = run([tsup])
const warnings = output.split('\n').filter((line) => /warn|circular/i.test(line))
if (!quiet || warnings.length > 0) process.stdout.write(output)
if (warnings.length > 0) {
  process.stderr.write(
    `build: the bundler warned (${warnings.length} line(s) above); a clean build has none\n`,
  )
  process.exit(1)
}
// src/envoy/grpc.ts reads rls.proto from beside its own module, which is dist/ once built.
copyFileSync(join(root, 'src/envoy/rls.proto'), join(root, 'dist/rls.proto'))
