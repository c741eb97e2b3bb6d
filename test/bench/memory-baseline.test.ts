// The memory case's baseline mode (SLUICE_BENCH_BASELINE_DIST): the other build's token-bucket
// subjects run in a process of their own, beside the yardstick, not in the token bucket's process.
// It runs the group's script over this repository's own build, 5 short rounds; only which subjects
// ran is checked, never a figure.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'

const SCRIPT = fileURLToPath(new URL('../../bench/cases/memory.ts', import.meta.url))
const DIST = fileURLToPath(new URL('../../packages/sluice/dist/', import.meta.url))
const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-baseline-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** The ids the group's process measured, or its exit code and stderr when it failed. */
function group(
  name: string,
  baseline: string | undefined,
): string[] | { status: number | null; stderr: string } {
  const out = join(dir, `${name}-${baseline === undefined ? 'none' : 'set'}.json`)
  const env: NodeJS.ProcessEnv = { ...process.env }
  delete env.SLUICE_BENCH_BASELINE_DIST
  if (baseline !== undefined) env.SLUICE_BENCH_BASELINE_DIST = baseline
  const run = spawnSync(process.execPath, ['--import', 'tsx', SCRIPT, name, 'quick', out], {
    env,
    encoding: 'utf8',
    timeout: 60_000,
  })
  if (run.status !== 0) return { status: run.status, stderr: run.stderr }
  return (JSON.parse(readFileSync(out, 'utf8')) as { id: string }[]).map((m) => m.id)
}

describe('memory case: SLUICE_BENCH_BASELINE_DIST', () => {
  it('runs the other build in a process of its own, with the yardstick; the token bucket process keeps its own subjects', () => {
    expect(group('token-bucket-baseline', DIST)).toEqual([
      'sluice-token-bucket-consume-baseline',
      'sluice-token-bucket-consumeSync-baseline',
      'express-rate-limit-store',
    ])
    expect(group('token-bucket', DIST)).toEqual([
      'sluice-token-bucket-consume',
      'sluice-token-bucket-consumeSync',
      'express-rate-limit-store',
    ])
  })

  it('has no baseline group without the variable', () => {
    const refused = group('token-bucket-baseline', undefined)
    expect(refused).toMatchObject({ status: 1 })
    expect((refused as { stderr: string }).stderr).toContain('no group token-bucket-baseline')
  })
})
