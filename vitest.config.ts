import { configDefaults, defineConfig } from 'vitest/config'
import { librarySources } from './scripts/library-entries.mjs'

// Everything but the fault tests, files in parallel. The fault tests measure latency while they kill
// and pause redis-server, so they run afterwards on their own, one file at a time
// (vitest.fault.config.ts), where no other test competes for the two cores. The service's imports
// of `sluice` read the library's source, the same modules the tests import.
export default defineConfig({
  resolve: { alias: aliases() },
  test: {
    include: ['test/**/*.test.ts', 'packages/*/src/**/*.test.ts'],
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

/** `sluice` and its subpaths, matched exactly, to the library's source. */
export function aliases() {
  return Object.entries(librarySources()).map(([specifier, file]) => ({
    find: new RegExp(`^${specifier.replace('/', '\\/')}$`),
    replacement: file,
  }))
}
