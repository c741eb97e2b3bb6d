// The public surface of both packages is the committed API report (packages/*/api/*.api.md): a
// change to an entry point's names or signatures without the report fails here, so every change to
// the surface is a reviewed diff (`npm run build && npm run api-report`, then commit the reports).
import { spawnSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

const ROOT = join(import.meta.dirname, '..', '..')

describe('the API reports', () => {
  it('cover every entry point of both packages', () => {
    const entries = Object.keys(JSON.parse(readFileSync(join(ROOT, 'packages/sluice/entries.json'), 'utf8')))
    expect(readdirSync(join(ROOT, 'packages/sluice/api')).sort()).toEqual(
      entries.map((entry) => `${entry}.api.md`).sort(),
    )
    expect(readdirSync(join(ROOT, 'packages/sluice-server/api'))).toEqual(['index.api.md'])
  })

  it('match the built declarations of every entry point', () => {
    const run = spawnSync(process.execPath, [join(ROOT, 'scripts/api-report.mjs'), '--check'], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 240_000,
    })
    expect(run.stderr).toBe('')
    expect(run.status).toBe(0)
  }, 300_000)
})
