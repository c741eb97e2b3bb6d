// `penalty:` on a policy of the service's YAML: two instances sharing one Redis count the denials of
// a key together through /v1/check and block it for the penalty; `sluice check` shows it; a bad
// penalty names its file, line and key.
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, inject, it } from 'vitest'
import { describeConfig, parseConfig } from '../../packages/sluice-server/src/server/config.js'
import { openStore } from '../../packages/sluice-server/src/server/store-url.js'
import type { Running } from '../helpers/service.js'
import { post, startService } from '../helpers/service.js'

const CONFIG = `
policies:
  login:
    algorithm: fixed-window
    limit: 1
    window: 1m
    penalty: { after: 3, within: 10m, block: 1h, factor: 4, max: 1d }
`

describe('penalty in the service', () => {
  const running: Running[] = []
  afterAll(async () => {
    for (const r of running) await r.service.close()
  })

  it('two instances on one Redis count the denials together; the third blocks for the penalty', async () => {
    const prefix = `svc-penalty-${process.pid}-${Date.now()}`
    for (let i = 0; i < 2; i++) {
      const store = await openStore(`${inject('redis').url}/0`, { prefix })
      running.push(await startService(CONFIG, { store }))
    }
    const urls = running.map((r) => `${r.url}/v1/check`)
    const check = (i: number) => post(urls[i % 2]!, { policy: 'login', key: 'mallory' })
    expect((await check(0)).body).toMatchObject({ allowed: true })
    expect((await check(1)).body).toMatchObject({ allowed: false, reason: 'limit' })
    expect((await check(0)).body).toMatchObject({ allowed: false, reason: 'limit' })
    expect((await check(1)).body).toEqual({
      allowed: false,
      limit: 1,
      remaining: 0,
      resetMs: 3_600_000,
      retryAfterMs: 3_600_000,
      policy: 'login',
      reason: 'blocked',
      penalty: { level: 0, blockMs: 3_600_000 },
    })
    const after = (await check(0)).body
    expect(after).toMatchObject({ allowed: false, reason: 'blocked' })
    expect(after.penalty).toBeUndefined()
    expect(after.retryAfterMs).toBeGreaterThan(3_500_000)
    expect(after.retryAfterMs).toBeLessThanOrEqual(3_600_000)
  })

  it('sluice check shows the penalty of a policy', () => {
    const described = describeConfig(parseConfig(CONFIG, 'conf.yaml'))
    expect(described).toMatch(
      / {4}login: fixed-window, 1 per 60000ms, capacity 1, penalty after 3 denials within 600000ms: block 3600000ms x4 up to 86400000ms, onStoreError open/,
    )
  })

  it('a bad penalty names the file, the line and the key', () => {
    const bad = CONFIG.replace('factor: 4', 'factor: 0.5')
    expect(() => parseConfig(bad, 'conf.yaml')).toThrow(
      expect.objectContaining({
        code: 'SLUICE_INVALID_CONFIG',
        message: expect.stringMatching(/conf\.yaml:\d+.*policies\.login\.penalty\.factor: a number >= 1/s),
      }),
    )
    expect(() => parseConfig(CONFIG.replace('after: 3', 'aftr: 3'), 'conf.yaml')).toThrow(
      expect.objectContaining({ message: expect.stringContaining("did you mean 'after'?") }),
    )
  })

  it("docs/service.md's config loads with its penalty", () => {
    const text = readFileSync(fileURLToPath(new URL('../../docs/service.md', import.meta.url)), 'utf8')
    const yaml = /```yaml\n([\s\S]*?)```/.exec(text.slice(text.indexOf('## Config')))![1]!
    // Its policies: part (the rest names certificate files this test does not have).
    const policies = yaml.slice(yaml.indexOf('policies:'), yaml.indexOf('tiers:'))
    const signin = parseConfig(policies, 'service.md').lookup('signin')
    expect(signin?.resolved.penalty).toMatchObject({
      after: 5,
      withinMs: 600_000,
      blockMs: 900_000,
      factor: 2,
      maxMs: 86_400_000,
    })
  })
})
