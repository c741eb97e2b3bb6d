// `sluice/metrics` as a user imports it: the built files through the package's exports map.
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { describe, expect, it } from 'vitest'

const root = new URL('../../', import.meta.url)
const script = `
  const m = await import('sluice/metrics')
  const { createLimiter } = await import('sluice')
  const limiter = createLimiter({ policies: { api: { algorithm: 'fixed-window', limit: 1, window: '1m' } } })
  const obs = m.createObservability({ limiter })
  await limiter.consume('api', 'a'); await limiter.consume('api', 'a')
  const text = await obs.metrics.registry.metrics()
  obs.close()
  const cjs = (await import('node:module')).createRequire(process.cwd() + '/')('sluice/metrics')
  console.log(JSON.stringify({
    esm: Object.keys(m).sort(),
    cjs: typeof cjs.createObservability,
    denied: /sluice_decisions_total\\{policy="api",outcome="denied"\\} 1/.test(text),
  }))
`

describe('the sluice/metrics subpath (built package)', () => {
  it('loads as ESM and CommonJS and works', () => {
    expect(existsSync(new URL('packages/sluice/dist/metrics.js', root)), 'run npm run build first').toBe(true)
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
      cwd: root,
      encoding: 'utf8',
      timeout: 20_000,
    })
    const result = JSON.parse(out) as { esm: string[]; cjs: string; denied: boolean }
    // The factories and keyFingerprint (docs/observability.md); the data structures stay inside.
    expect(result.esm).toEqual([
      'createDashboard',
      'createMetrics',
      'createObservability',
      'createOpenTelemetry',
      'keyFingerprint',
    ])
    expect(result.cjs).toBe('function')
    expect(result.denied).toBe(true)
    for (const file of ['metrics.d.ts', 'metrics.d.cts'])
      expect(existsSync(new URL(`packages/sluice/dist/${file}`, root)), file).toBe(true)
  })
})
