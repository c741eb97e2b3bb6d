// Exactness under real concurrency on memcached: 4 OS processes x 64 requests in flight on one key,
// limit 1,000 in a window far longer than the test: exactly 1,000 admitted, for every algorithm
// whose update is one compare-and-swap of one item (all of them, single-step), and no call fails.
import { spawn } from 'node:child_process'
import { describe, expect, inject, it } from 'vitest'
import { freshPrefix } from '../../helpers/memcached-clients.js'

/** Start one worker; resolves with its ready promise and its final counts. */
function worker(config: object): {
  ready: Promise<void>
  go(): void
  counts: Promise<Record<string, number>>
} {
  const child = spawn(
    'node',
    ['--import', 'tsx', 'test/stores/memcached/hammer-worker.ts', JSON.stringify(config)],
    {
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  )
  let out = ''
  let onReady: () => void = () => {}
  const ready = new Promise<void>((resolve) => {
    onReady = resolve
  })
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString()
    if (out.startsWith('ready\n')) onReady()
  })
  const counts = new Promise<Record<string, number>>((resolve, reject) => {
    child.once('exit', (code) => {
      if (code !== 0) reject(new Error(`worker exited with ${code}`))
      else resolve(JSON.parse(out.slice('ready\n'.length)) as Record<string, number>)
    })
  })
  return { ready, go: () => child.stdin.end('go\n'), counts }
}
const EXACT = ['fixed-window', 'sliding-window-log', 'token-bucket', 'gcra'] as const

describe('memcached exactness: 4 processes x 64 in flight, limit 1,000', () => {
  it('admits exactly 1,000 per algorithm', { timeout: 60_000 }, async () => {
    const config = {
      address: inject('memcached').address,
      prefix: freshPrefix('exact'),
      algorithms: EXACT,
      attempts: 1100,
      inFlight: 64,
      limit: 1000,
      window: '1d',
    }
    const workers = Array.from({ length: 4 }, () => worker(config))
    await Promise.all(workers.map((w) => w.ready))
    for (const w of workers) w.go()
    const perProcess = await Promise.all(workers.map((w) => w.counts))
    for (const algorithm of EXACT) {
      const counts = perProcess.map((p) => p[algorithm] ?? 0)
      const failed = perProcess.map((p) => p[`${algorithm} failed`] ?? 0)
      const total = counts.reduce((a, b) => a + b, 0)
      expect(failed, `${algorithm}: failed calls per process`).toEqual([0, 0, 0, 0])
      expect(total, `${algorithm}: admitted per process ${counts.join(', ')}`).toBe(1000)
      // Several processes admitted on the one key: the CAS rounds raced across processes. (Not all
      // four every time: a round admits up to 64 at once, so a process the scheduler starts late on
      // two shared cores can find the 1,000 gone.)
      expect(counts.filter((c) => c > 0).length, `admitted per process ${counts.join(', ')}`).toBeGreaterThan(
        1,
      )
    }
  })
})
