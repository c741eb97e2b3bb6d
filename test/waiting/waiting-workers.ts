// Runs waiting-worker.ts in several OS processes and checks what they saw against a token-bucket rate.
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { expect } from 'vitest'

const run = promisify(execFile)

export interface Outcome {
  index: number
  allowed: boolean
  at: number
  reason?: string
  error?: string
}

export async function workers(processes: number, config: Record<string, unknown>): Promise<Outcome[][]> {
  const startAt = Date.now() + 2_500
  const all = Array.from({ length: processes }, () =>
    run(
      'node',
      ['--import', 'tsx', 'test/waiting/waiting-worker.ts', JSON.stringify({ ...config, startAt })],
      {
        timeout: 30_000,
      },
    ),
  )
  return (await Promise.all(all)).map(({ stdout }) => JSON.parse(stdout) as Outcome[])
}

/**
 * No more than `burst + rate x elapsed` events up to any time: the token bucket's (and GCRA's)
 * bound. `times` are taken after the store admitted (or the server received), so each is no earlier
 * than the admission it stands for: a count by these times never exceeds the true count.
 */
export function expectWithinRate(times: number[], start: number, burst: number, perMs: number): void {
  const sorted = times.slice().sort((a, b) => a - b)
  sorted.forEach((t, i) => {
    const bound = burst + Math.floor((t - start) * perMs)
    expect(i + 1, `event ${i + 1} at +${t - start} ms; the rate allows ${bound}`).toBeLessThanOrEqual(bound)
  })
}
