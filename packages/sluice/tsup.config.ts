import { readFileSync } from 'node:fs'
import { defineConfig } from 'tsup'

// One entry per public subpath (entries.json; package.json's "exports" has the matching entry).
// Each is built as ESM (.js) and CommonJS (.cjs) with types for both. Shared code goes into common
// chunks, so `instanceof SluiceError` holds across subpaths.
const entries = JSON.parse(readFileSync(new URL('./entries.json', import.meta.url), 'utf8')) as Record<
  string,
  string
>

export default defineConfig({
  entry: entries,
  format: ['esm', 'cjs'],
  dts: true,
  target: 'node20',
  platform: 'node',
  sourcemap: false,
  clean: true,
  splitting: true,
  shims: true,
})
