// What examples/basic.mjs prints, checked where the repository runs it (consumer.test.ts) and where
// a fresh project that installed the packed library runs its copy (docs.test.ts).
import { expect } from 'vitest'

export function expectBasicOutput(stdout: string): void {
  expect(stdout).toContain('api user-42: allowed=true remaining=19/20')
  expect(stdout).toContain('after cost 5: remaining=14')
  expect(stdout).toContain('layered: allowed=true tightest=perUser remaining=99')
  // The example runs on the real clock: the wait is at most one token's 100 ms, less what passed.
  const wait = Number(/denied: allowed=false reason=limit retryAfterMs=(\d+)\n/.exec(stdout)?.[1])
  expect(wait).toBeGreaterThan(0)
  expect(wait).toBeLessThanOrEqual(100)
  const [, before, after] = /refund: remaining (\d+) -> (\d+)\n/.exec(stdout) ?? []
  expect(Number(after)).toBeGreaterThanOrEqual(Number(before) + 1)
  expect(stdout).toContain('reset: remaining=20')
  expect(stdout).toContain('error: SLUICE_INVALID_COST')
}
