import { defineConfig } from 'vitest/config'
import { aliases } from './vitest.config.js'

// The fault tests (test/fault/): real redis-server processes killed, paused and flushed under load.
// One file at a time, after the rest of the suite, so their latency numbers measure Sluice rather
// than the other tests running beside them.
export default defineConfig({
  resolve: { alias: aliases() },
  test: {
    include: ['test/fault/**/*.test.ts'],
    globalSetup: [
      'test/helpers/redis-global-setup.ts',
      'test/helpers/memcached-global-setup.ts',
      'test/helpers/postgres-global-setup.ts',
    ],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    fileParallelism: false,
  },
})
