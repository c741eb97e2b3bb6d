// Two `sluice serve` processes in two regions, from the config's `store: { region, regions }`:
// each region's Redis (password-protected) direct for its own process and behind a latency proxy
// for the other. A global policy's limit starts split in shares; the idle region hands its share to
// the busy one after a sync, and then denies; a region-scoped policy is not shared; the other region's Redis stopped shows stale in /readyz, /metrics and
// the dashboard; a reload that changes the regions says it needs a restart; the password is
// printed nowhere.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type CliProcess, servingUrl, startCli } from '../helpers/cli-process.js'
import { sample } from '../helpers/exposition.js'
import { type RedisProcess, startRedisProcess } from '../helpers/redis-process.js'
import { get, post } from '../helpers/service.js'
import { type LatencyProxy, startLatencyProxy } from './latency-proxy.js'

const PASSWORD = 'region-secret-7f3a'
const ONE_WAY_MS = 20
const LIMIT = 5
const DAY_MS = 86_400_000

/** Poll `probe` until it returns a value, at most `withinMs` (a bound for a loaded machine). */
async function eventually<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  withinMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + withinMs
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`not within ${withinMs}ms: ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

describe('sluice serve in two regions', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-regions-'))
  let eu: RedisProcess
  let us: RedisProcess
  const proxies: LatencyProxy[] = []
  const clis: CliProcess[] = []
  const urls: Record<'eu' | 'us', string> = { eu: '', us: '' }

  function config(region: 'eu' | 'us', ports: Record<'eu' | 'us', number>): string {
    const file = join(dir, `${region}.yaml`)
    writeFileSync(
      file,
      [
        'store:',
        `  region: ${region}`,
        '  regions:',
        `    eu: redis://:${PASSWORD}@127.0.0.1:${ports.eu}`,
        `    us: redis://:${PASSWORD}@127.0.0.1:${ports.us}`,
        '  syncEvery: 50ms',
        'policies:',
        `  shared: { algorithm: sliding-window-counter, limit: ${LIMIT}, window: 1d, scope: global }`,
        `  own: { algorithm: sliding-window-counter, limit: ${LIMIT}, window: 1d }`,
        '',
      ].join('\n'),
    )
    return file
  }

  beforeAll(async () => {
    // One aligned window for the whole test: the previous day's counts weigh nothing.
    if (DAY_MS - (Date.now() % DAY_MS) < 120_000) throw new Error('too close to midnight UTC; run again')
    eu = await startRedisProcess({ extra: ['--requirepass', PASSWORD] })
    us = await startRedisProcess({ extra: ['--requirepass', PASSWORD] })
    const euToUs = await startLatencyProxy(us.port, ONE_WAY_MS)
    const usToEu = await startLatencyProxy(eu.port, ONE_WAY_MS)
    proxies.push(euToUs, usToEu)
    const files = {
      eu: config('eu', { eu: eu.port, us: euToUs.port }),
      us: config('us', { eu: usToEu.port, us: us.port }),
    }
    for (const region of ['eu', 'us'] as const) {
      const cli = startCli(['serve', '--config', files[region], '--port', '0'])
      clis.push(cli)
      urls[region] = await servingUrl(cli)
    }
  }, 60_000)

  afterAll(async () => {
    for (const cli of clis) {
      cli.child.kill('SIGTERM')
      await cli.exited
    }
    for (const proxy of proxies) await proxy.close()
    await eu?.stop()
    await us?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  const consume = async (region: 'eu' | 'us', policy: string, key: string) =>
    (await post(`${urls[region]}/v1/check`, { policy, key })).body
  const remaining = async (region: 'eu' | 'us', policy: string, key: string) =>
    (await post(`${urls[region]}/v1/peek`, { policy, key })).body.remaining as number

  it('sluice check prints the regions, every password hidden', async () => {
    const check = startCli(['check', '--config', join(dir, 'eu.yaml')])
    expect(await check.exited).toBe(0)
    const out = check.output()
    expect(out).toContain(
      `  regions: local eu; eu redis://:***@127.0.0.1:${eu.port}, us redis://:***@127.0.0.1:`,
    )
    expect(out).toContain('  store: multi-region  prefix: sluice')
    expect(out).toContain('  sluice serve would use: multi-region (local eu; ')
    expect(out).toMatch(/ {4}shared: sliding-window-counter, 5 per 86400000ms, capacity 5, scope global,/)
    expect(out).not.toContain(PASSWORD)
  })

  it('a global policy is shared across the regions: the idle region hands its share to the busy one; a region one is not', async () => {
    // 5 in two shares: eu (first by name) 3, us 2.
    for (let i = 0; i < 3; i++) {
      expect(await consume('eu', 'shared', 'k')).toMatchObject({ allowed: true })
      expect(await consume('eu', 'own', 'k')).toMatchObject({ allowed: true })
    }
    // us reads eu's demand and hands over its 2 within a few sync periods (and a link delay). eu
    // keeps asking, as a busy region does: a demand entry counts for five sync periods after it is
    // written, so a single burst goes unseen when us's sync runs later than that on a loaded
    // machine. A denial that reaches the store is demand too; those eu's deny cache answers (for at
    // most three sync periods) are not, and the next try after them is.
    let admitted = 3
    await eventually('eu admits us’s share', async () => {
      if ((await consume('eu', 'shared', 'k')).allowed === true) admitted++
      return admitted === LIMIT ? true : undefined
    })
    expect(await consume('eu', 'shared', 'k')).toMatchObject({ allowed: false, remaining: 0 })
    // us holds none of the global limit, all of it being used in eu.
    expect(await remaining('us', 'shared', 'k')).toBe(0)
    expect(await consume('us', 'shared', 'k')).toMatchObject({ allowed: false, remaining: 0 })
    // The region-scoped policy, decided as often in eu, is untouched in us.
    expect(await remaining('us', 'own', 'k')).toBe(LIMIT)
    expect(await consume('us', 'own', 'k')).toMatchObject({ allowed: true, remaining: LIMIT - 1 })
    // The share gauge, one series per global policy (its storage id): eu holds all of it, us none.
    const share = async (region: 'eu' | 'us') => {
      const text = await (await fetch(`${urls[region]}/metrics`)).text()
      const line = text.split('\n').find((l) => l.startsWith('sluice_region_share_ratio{policy="shared.'))
      return line === undefined ? undefined : Number(line.split(' ').at(-1))
    }
    await eventually('eu’s share gauge at 1', async () => ((await share('eu')) === 1 ? true : undefined))
    expect(await share('us')).toBe(0)
  })

  it('both regions are healthy in /readyz and /metrics while both Redis answer', async () => {
    const ready = await eventually('eu ready with fresh regions', async () => {
      const r = await get(`${urls.eu}/readyz`)
      const regions = r.body.regions as { stale: boolean }[] | undefined
      return r.status === 200 && regions?.every((region) => !region.stale) ? r : undefined
    })
    expect(ready.body).toMatchObject({
      ready: true,
      reachable: true,
      regions: [
        { region: 'eu', local: true, stale: false },
        { region: 'us', local: false, stale: false },
      ],
    })
    const metrics = await (await fetch(`${urls.eu}/metrics`)).text()
    expect(sample(metrics, 'sluice_region_stale', { region: 'us' })).toBe(0)
  })

  it('the other region’s Redis stopped: stale in /readyz, /metrics and the dashboard; decisions go on', async () => {
    us.signal('SIGKILL')
    const ready = await eventually('us stale in eu’s /readyz', async () => {
      const r = await get(`${urls.eu}/readyz`)
      const regions = r.body.regions as { region: string; stale: boolean }[] | undefined
      return regions?.find((region) => region.region === 'us')?.stale === true ? r : undefined
    })
    // eu still decides on its own Redis: ready, the region stale with its error.
    expect(ready.status).toBe(200)
    expect(ready.body).toMatchObject({ ready: true, reachable: true })
    const regions = ready.body.regions as { region: string; stale: boolean; error?: string }[]
    expect(regions[0]).toMatchObject({ region: 'eu', local: true, stale: false })
    expect(regions[1]).toMatchObject({ region: 'us', local: false, stale: true })
    expect(regions[1]!.error).toEqual(expect.any(String))
    const metrics = await (await fetch(`${urls.eu}/metrics`)).text()
    expect(sample(metrics, 'sluice_region_stale', { region: 'us' })).toBe(1)
    expect(sample(metrics, 'sluice_region_stale', { region: 'eu' })).toBe(0)
    const snapshot = (await get(`${urls.eu}/dashboard/snapshot.json`)).body
    expect(snapshot.regions).toMatchObject([
      { region: 'eu', stale: false },
      { region: 'us', stale: true },
    ])
    expect(await consume('eu', 'own', 'other-key')).toMatchObject({ allowed: true })
    for (const text of [JSON.stringify(ready.body), metrics, JSON.stringify(snapshot)])
      expect(text).not.toContain(PASSWORD)
  })

  it('a reload that changes the regions says they take effect on restart', async () => {
    const file = join(dir, 'eu.yaml')
    const cli = clis[0]!
    writeFileSync(file, readFileSync(file, 'utf8').replace('syncEvery: 50ms', 'syncEvery: 100ms'))
    cli.child.kill('SIGHUP')
    await eventually('the reload warning', async () =>
      cli.output().includes('store and prefix changes take effect on restart') ? true : undefined,
    )
  })

  it('no process printed the password', () => {
    for (const cli of clis) {
      expect(cli.output()).toContain('multi-region, local ')
      expect(cli.output()).not.toContain(PASSWORD)
    }
  })
})
