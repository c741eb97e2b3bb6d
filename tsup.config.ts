import { defineConfig } from 'tsup'

// One entry per public subpath (add a line here and the matching "exports" entry in package.json).
const publicEntries = {
  index: 'src/index.ts',
  metrics: 'src/metrics/index.ts',
  redis: 'src/stores/redis/index.ts',
  express: 'src/adapters/express.ts',
  fastify: 'src/adapters/fastify.ts',
  hono: 'src/adapters/hono.ts',
  node: 'src/adapters/node.ts',
  server: 'src/server/index.ts',
  memcached: 'src/stores/memcached/index.ts',
  postgres: 'src/stores/postgres/index.ts',
}

// Each entry is built as ESM (.js) and CommonJS (.cjs) with types for both. Shared code goes into
// common chunks, so `instanceof SluiceError` holds across subpaths.
export default defineConfig({
  entry: { ...publicEntries, cli: 'src/cli.ts' },
  format: ['esm', 'cjs'],
  dts: { entry: publicEntries },
  target: 'node20',
  platform: 'node',
  sourcemap: true,
  clean: true,
  splitting: true,
  shims: true,
  loader: { '.lua': 'text' },
})
