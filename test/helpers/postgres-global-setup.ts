// vitest globalSetup: one PostgreSQL server per test run, shared by every test file through
// `inject('postgres')`, and stopped whatever the outcome. Test files use their own tables.
import type { TestProject } from 'vitest/node'
import { type PostgresServer, startPostgres } from './postgres-harness.js'

declare module 'vitest' {
  export interface ProvidedContext {
    postgres: { port: number; url: string }
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  let server: PostgresServer | undefined
  try {
    server = await startPostgres()
  } catch (error) {
    await server?.stop()
    throw error
  }
  project.provide('postgres', { port: server.port, url: server.url })
  return () => server.stop()
}
