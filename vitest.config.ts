import { configDefaults, defineConfig } from 'vitest/config'

// Everything but the fault tests, files in parallel. The fault tests measure latency while they kill
// and pause redis-server, so they run afterwards on their own, one file at a time
// (vitest.fault.config.ts), where no other test competes for the two cores.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'src/**/*.test.ts'],
    exclude: [...configDefaults.exclude, 'test/fault/**'],
    globalSetup: [
      'test/helpers/redis-global-setup.ts',
      'test/helpers/memcached-global-setup.ts',
      'test/helpers/postgres-global-setup.ts',
    ],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    pool: 'forks',
  },
})
