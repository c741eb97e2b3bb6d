// The memory case's processes: the other build's token-bucket subjects (SLUICE_BENCH_BASELINE_DIST)
// run in a process of their own, beside the yardstick, not in the token bucket's process; a
// process's Sluice subjects decide through one limiter, as an app that uses one; and the processes
// take turns at which subject runs first. It runs the group's script over this repository's own
// build, 5 short rounds; only which subjects ran, in which order and through which limiter is
// checked, never a figure.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { firstIn } from '../../bench/cases/memory.js'

const SCRIPT = fileURLToPath(new URL('../../bench/cases/memory.ts', import.meta.url))
const DIST = fileURLToPath(new URL('../../packages/sluice/dist/', import.meta.url))
const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-baseline-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/**
 * What the group's process measured, as `id` or `id@limiter` for a Sluice subject, or its exit
 * code and stderr when it failed.
 */
function group(
  name: string,
  baseline: string | undefined,
  first = 'sluice',
): string[] | { status: number | null; stderr: string } {
  const out = join(dir, `${name}-${baseline === undefined ? 'none' : 'set'}-${first}.json`)
  const env: NodeJS.ProcessEnv = { ...process.env }
  delete env.SLUICE_BENCH_BASELINE_DIST
  if (baseline !== undefined) env.SLUICE_BENCH_BASELINE_DIST = baseline
  const run = spawnSync(process.execPath, ['--import', 'tsx', SCRIPT, name, 'quick', first, out], {
    env,
    encoding: 'utf8',
    timeout: 60_000,
  })
  if (run.status !== 0) return { status: run.status, stderr: run.stderr }
  return (JSON.parse(readFileSync(out, 'utf8')) as { id: string; limiter?: number }[]).map((m) =>
    m.limiter === undefined ? m.id : `${m.id}@${m.limiter}`,
  )
}

describe("memory case: each process's subjects", () => {
  it('runs the other build in a process of its own, with the yardstick; the token bucket process keeps its own subjects', () => {
    expect(group('token-bucket-baseline', DIST)).toEqual([
      'sluice-token-bucket-consume-baseline@0',
      'sluice-token-bucket-consumeSync-baseline@0',
      'express-rate-limit-store',
    ])
    expect(group('token-bucket', DIST)).toEqual([
      'sluice-token-bucket-consume@0',
      'sluice-token-bucket-consumeSync@0',
      'express-rate-limit-store',
    ])
  })

  it("decides a process's await and sync subjects through one limiter, and the fixed window's alone", () => {
    expect(group('sliding-window-counter', undefined)).toEqual([
      'sluice-sliding-window-counter-consume@0',
      'sluice-sliding-window-counter-consumeSync@0',
      'express-rate-limit-store',
    ])
    expect(group('fixed-window', undefined)).toEqual([
      'sluice-fixed-window-consume@0',
      'express-rate-limit-store',
    ])
  })

  it('runs the yardstick first in a process told so', () => {
    expect(group('fixed-window', undefined, 'yardstick')).toEqual([
      'express-rate-limit-store',
      'sluice-fixed-window-consume@0',
    ])
    expect(group('token-bucket-baseline', DIST, 'yardstick')).toEqual([
      'express-rate-limit-store',
      'sluice-token-bucket-consume-baseline@0',
      'sluice-token-bucket-consumeSync-baseline@0',
    ])
  })

  it('takes turns: Sluice first in even processes, the yardstick in odd ones, unless SLUICE_BENCH_YARDSTICK_FIRST sets one order', () => {
    expect([0, 1, 2, 3, 4, 5].map((p) => firstIn(p, undefined))).toEqual([
      'sluice',
      'yardstick',
      'sluice',
      'yardstick',
      'sluice',
      'yardstick',
    ])
    expect([0, 1, 2].map((p) => firstIn(p, '1'))).toEqual(['yardstick', 'yardstick', 'yardstick'])
    expect([0, 1, 2].map((p) => firstIn(p, '0'))).toEqual(['sluice', 'sluice', 'sluice'])
  })

  it('refuses an order it does not know', () => {
    const refused = group('fixed-window', undefined, 'peers')
    expect(refused).toMatchObject({ status: 1 })
    expect((refused as { stderr: string }).stderr).toContain('first is sluice or yardstick, not peers')
  })

  it('has no baseline group without the variable', () => {
    const refused = group('token-bucket-baseline', undefined)
    expect(refused).toMatchObject({ status: 1 })
    expect((refused as { stderr: string }).stderr).toContain('no group token-bucket-baseline')
  })
})
