#!/usr/bin/env node
// `npm start`: the decision service from this clone, in seconds. Only the command is built, as one
// JavaScript file without declarations (the declarations are what makes `npm run build` slow), with
// the library read from its source, into packages/sluice-server/.start/ (beside the package's
// examples/sluice.yaml, its default config). The full builds in dist/ are left as they are.
// Arguments after `npm start --` go to `sluice serve`.
import { spawn, spawnSync } from 'node:child_process'
import { copyFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'tsup'
import { librarySources } from './library-entries.mjs'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const server = join(root, 'packages', 'sluice-server')
const out = join(server, '.start')

const lua = spawnSync(process.execPath, [join(root, 'scripts/build-lua.mjs')], { stdio: 'inherit' })
if (lua.status !== 0) process.exit(lua.status ?? 1)
const sources = librarySources()
await build({
  entry: { cli: join(server, 'src/cli.ts') },
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
  noExternal: [/^sluice(\/|$)/],
  esbuildPlugins: [
    {
      name: 'library-from-source',
      setup(builder) {
        // Every other package stays an import, resolved from node_modules as when installed.
        builder.onResolve({ filter: /^[^./]/ }, (args) =>
          sources[args.path] === undefined ? { external: true } : { path: sources[args.path] },
        )
      },
    },
  ],
})
// src/envoy/grpc.ts reads rls.proto from beside its own module.
copyFileSync(join(server, 'src/envoy/rls.proto'), join(out, 'rls.proto'))

const child = spawn(
  process.execPath,
  ['--enable-source-maps', join(out, 'cli.js'), 'serve', ...process.argv.slice(2)],
  { stdio: 'inherit' },
)
// A terminal's Ctrl-C reaches both processes; a signal sent to this one alone is passed on.
for (const signal of ['SIGINT', 'SIGTERM'])
  process.on(signal, () => child.exitCode === null && child.kill(signal))
child.on('exit', (code, signal) => {
  if (signal !== null) process.kill(process.pid, signal)
  else process.exit(code ?? 1)
})
