// `sluice serve` (dist/cli.js) on the harness's Redis, the server's clock: a key spends, the config
// file is rewritten with a lower burst, the service reloads it (it watches the file) and keeps the
// policy's counters (same algorithm and window, same storage id). The key's next decisions wait at
// most a full refill of the new burst, and its Redis key lives no longer than that.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, inject, it } from 'vitest'
import { type CliProcess, startCli } from '../helpers/cli-process.js'
import { freePort, post } from '../helpers/service.js'

async function until(
  what: string,
  test: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await test())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

describe('sluice serve on Redis: a reload that lowers a burst', () => {
  let dir: string | undefined
  let proc: CliProcess | undefined
  let redis: Redis | undefined

  afterEach(async () => {
    if (proc !== undefined && proc.child.exitCode === null) {
      proc.child.kill('SIGKILL')
      await proc.exited
    }
    redis?.disconnect()
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  })

  it('51 spent of 100 per minute, then burst 5: five admitted, then a wait of one token, a TTL of one refill', async () => {
    const { url: redisUrl, port: redisPort } = inject('redis')
    const prefix = `reload-${process.pid}-${Date.now()}`
    const config = (burst: string) =>
      `store: ${redisUrl}\nprefix: ${prefix}\npolicies:\n  tokens: { algorithm: token-bucket, limit: 100, window: 1m${burst} }\n`
    dir = mkdtempSync(join(tmpdir(), 'sluice-reload-'))
    const file = join(dir, 'sluice.yaml')
    writeFileSync(file, config(''))
    const port = await freePort()
    const url = `http://127.0.0.1:${port}`
    proc = startCli(['serve', '--config', file, '--port', String(port)])
    await until('the banner', () => proc!.output().includes(`sluice serving on ${url}`))

    const check = async () => (await post(`${url}/v1/check`, { policy: 'tokens', key: 'k' })).body
    const spent = await post(`${url}/v1/check`, { policy: 'tokens', key: 'k', cost: 51 })
    expect(spent.body).toMatchObject({ allowed: true, remaining: 49, limit: 100 })

    writeFileSync(file, config(', burst: 5'))
    await until(
      'the reload',
      async () => (await post(`${url}/v1/peek`, { policy: 'tokens', key: 'k' })).body.limit === 5,
    )
    expect(proc.output()).toContain('config reloaded')

    const after = []
    for (let i = 0; i < 6; i++) after.push(await check())
    expect(after.map((d) => d.allowed)).toEqual([true, true, true, true, true, false])
    for (const d of after) {
      expect(d.degraded, 'decided by Redis, not a fallback').toBeUndefined()
      // A token refills in 600 ms, the bucket of 5 in 3 s.
      expect(d.retryAfterMs as number).toBeLessThanOrEqual(600)
      expect(d.resetMs as number).toBeLessThanOrEqual(3000)
    }
    expect(after[5]!.retryAfterMs as number).toBeGreaterThan(0)

    redis = new Redis({ host: '127.0.0.1', port: redisPort })
    const keys = (await redis.keys(`${prefix}:*`)).filter((k) => !k.endsWith(':block'))
    expect(keys).toHaveLength(1)
    const ttl = await redis.pttl(keys[0]!)
    expect(ttl).toBeGreaterThan(0)
    expect(ttl).toBeLessThanOrEqual(3000)
  })
})
