// Exactness under real concurrency: 4 OS processes x 64 requests in flight on one key, limit 1,000 in
// a window far longer than the test: exactly 1,000 admitted, on standalone Redis and on Cluster.
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { describe, expect, inject, it } from 'vitest'
import { resolvePolicy } from '../../../packages/sluice/src/policy.js'
import { redisStore } from '../../../packages/sluice/src/stores/redis/index.js'
import { freshPrefix, ioredis, ioredisCluster } from '../../helpers/redis-clients.js'

const run = promisify(execFile)
const EXACT = ['fixed-window', 'sliding-window-log', 'token-bucket', 'gcra'] as const

async function hammer(ports: number[], cluster: boolean): Promise<Record<string, number>[]> {
  const config = {
    ports,
    cluster,
    prefix: freshPrefix('exact'),
    algorithms: EXACT,
    attempts: 1100,
    inFlight: 64,
    limit: 1000,
    window: '1d',
    startAt: Date.now() + 2500,
  }
  const workers = Array.from({ length: 4 }, () =>
    run('node', ['--import', 'tsx', 'test/stores/redis/hammer-worker.ts', JSON.stringify(config)]),
  )
  const counts = (await Promise.all(workers)).map(
    ({ stdout }) => JSON.parse(stdout) as Record<string, number>,
  )
  // The window is a day: drop the keys now rather than leave them for others' DBSIZE.
  const client = cluster ? ioredisCluster() : ioredis()
  const store = redisStore(client, { prefix: config.prefix })
  const steps = EXACT.map((algorithm) => ({
    policy: resolvePolicy(algorithm.replaceAll('-', '_'), { algorithm, limit: 1000, window: '1d' }),
    key: 'hot',
    cost: 1,
  }))
  await Promise.all(steps.map((step) => store.reset([step])))
  client.disconnect()
  return counts
}

function check(perProcess: Record<string, number>[]): void {
  for (const algorithm of EXACT) {
    const counts = perProcess.map((p) => p[algorithm] ?? 0)
    const total = counts.reduce((a, b) => a + b, 0)
    expect(total, `${algorithm}: admitted per process ${counts.join(', ')}`).toBe(1000)
  }
}

describe('exactness: 4 processes x 64 in flight, limit 1,000', () => {
  it('standalone Redis', { timeout: 60_000 }, async () => {
    check(await hammer([inject('redis').port], false))
  })
  it('Redis Cluster', { timeout: 60_000 }, async () => {
    check(await hammer(inject('redisCluster').ports, true))
  })
})
