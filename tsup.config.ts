import { defineConfig } from 'tsup'

// One entry per public subpath; each is built as ESM (.js) and CommonJS (.cjs) with types for both.
export default defineConfig({
  entry: {
    index: 'src/index.ts',
    cli: 'src/cli.ts',
    redis: 'src/stores/redis/index.ts',
  },
  format: ['esm', 'cjs'],
  dts: { entry: { index: 'src/index.ts', redis: 'src/stores/redis/index.ts' } },
  target: 'node20',
  platform: 'node',
  sourcemap: true,
  clean: true,
  splitting: false,
  shims: true,
  loader: { '.lua': 'text' },
})
