// vitest globalSetup: one memcached per test run, shared by every test file through
// `inject('memcached')`, and stopped whatever the outcome.
import type { TestProject } from 'vitest/node'
import { startMemcached } from './memcached-harness.js'

declare module 'vitest' {
  export interface ProvidedContext {
    memcached: { port: number; address: string }
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await startMemcached()
  project.provide('memcached', { port: server.port, address: server.address })
  return () => server.stop()
}
