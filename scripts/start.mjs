#!/usr/bin/env node
// `npm start`: the decision service from this clone, in seconds. Only the command is built, as one
// JavaScript file without declarations (the declarations are what makes `npm run build` slow), into
// .start/ so the full build in dist/ is left as it was. Arguments after `npm start --` go to
// `sluice serve`.
import { spawn, spawnSync } from 'node:child_process'
import { copyFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'tsup'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const out = join(root, '.start')

const lua = spawnSync(process.execPath, [join(root, 'scripts/build-lua.mjs')], { stdio: 'inherit' })
if (lua.status !== 0) process.exit(lua.status ?? 1)
await build({
  entry: { cli: join(root, 'src/cli.ts') },
  format: ['esm'],
  dts: false,
  target: 'node20',
  platform: 'node',
  outDir: out,
  clean: true,
  splitting: false,
  sourcemap: true,
  silent: true,
  config: false,
})
// src/envoy/grpc.ts reads rls.proto from beside its own module.
copyFileSync(join(root, 'src/envoy/rls.proto'), join(out, 'rls.proto'))

const child = spawn(
  process.execPath,
  ['--enable-source-maps', join(out, 'cli.js'), 'serve', ...process.argv.slice(2)],
  {
    stdio: 'inherit',
  },
)
// A terminal's Ctrl-C reaches both processes; a signal sent to this one alone is passed on.
for (const signal of ['SIGINT', 'SIGTERM'])
  process.on(signal, () => child.exitCode === null && child.kill(signal))
child.on('exit', (code, signal) => {
  if (signal !== null) process.kill(process.pid, signal)
  else process.exit(code ?? 1)
})
