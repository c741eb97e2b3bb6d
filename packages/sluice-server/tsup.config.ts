import { defineConfig } from 'tsup'

// The service as a library (index) and the `sluice` command (cli). `sluice` and every other
// dependency stay imports: the service runs on the installed library, one copy of it.
export default defineConfig({
  entry: { index: 'src/index.ts', cli: 'src/cli.ts' },
  format: ['esm', 'cjs'],
  dts: { entry: { index: 'src/index.ts' } },
  target: 'node20',
  platform: 'node',
  sourcemap: false,
  clean: true,
  splitting: true,
  shims: true,
})
