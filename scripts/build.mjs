#!/usr/bin/env node
// `npm run build`: the Lua scripts, then each package with tsup (ESM, CommonJS and declarations):
// the library first, since the service's declarations and its command import it; then rls.proto
// beside the service's chunks. A warning from the bundler fails the build.
import { spawnSync } from 'node:child_process'
import { copyFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const quiet = process.argv.includes('--silent')
const tsup = createRequire(import.meta.url).resolve('tsup/dist/cli-default.js')

function run(args, cwd) {
  const result = spawnSync(process.execPath, args, { cwd, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
  const output = `${result.stdout}${result.stderr}`
  if (result.status !== 0) {
    process.stderr.write(output)
    process.exit(result.status ?? 1)
  }
  return output
}

run([join(root, 'scripts/build-lua.mjs')], root)
for (const name of ['sluice', 'sluice-server']) {
  const output = run([tsup], join(root, 'packages', name))
  const warnings = output.split('\n').filter((line) => /warn|circular/i.test(line))
  if (!quiet || warnings.length > 0) process.stdout.write(output)
  if (warnings.length > 0) {
    process.stderr.write(
      `build: the bundler warned building ${name} (${warnings.length} line(s) above); a clean build has none\n`,
    )
    process.exit(1)
  }
}
// src/envoy/grpc.ts reads rls.proto from beside its own module, which is dist/ once built.
const server = join(root, 'packages', 'sluice-server')
copyFileSync(join(server, 'src/envoy/rls.proto'), join(server, 'dist/rls.proto'))
