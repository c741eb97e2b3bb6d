// `redis+sentinel://` in the service: the URL read and redacted, and the real `sluice serve`
// (dist/cli.js: `npm run -s build` first) on a real Sentinel group (a master, a replica, three
// sentinels, all with passwords): a start that cannot find the master says why, a master demoted
// under the service (READONLY) is left for the new one, and a master SIGKILLed under load is
// followed to the promoted replica while every request is answered through the policy's onStoreError.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { describeConfig, parseConfig } from '../../packages/sluice-server/src/server/config.js'
import { parseStoreUrl, redactStoreUrl } from '../../packages/sluice-server/src/server/store-url.js'
import { type CliProcess, servingUrl, startCli as startCliProcess } from '../helpers/cli-process.js'
import {
  type SentinelGroup,
  startSentinelGroup,
  startTlsSentinel,
  type TestCertificates,
} from '../helpers/sentinel-harness.js'
import { freePort, get } from '../helpers/service.js'
import { issue, makeCa, SERVER_EXT } from '../helpers/tls-certs.js'

// Every `sluice` process this file starts, killed after the file if still running (a test that
// fails or times out must not leave a service behind).
const started: CliProcess[] = []
afterAll(() => {
  for (const cli of started)
    if (cli.child.exitCode === null && cli.child.signalCode === null) cli.child.kill('SIGKILL')
})

function startCli(args: string[], env: Record<string, string> = {}): CliProcess {
  const cli = startCliProcess(args, env)
  started.push(cli)
  return cli
}

const PASSWORD = 'data-SECRET/pw'
const SENTINEL_PASSWORD = 'sentinel-SECRET&pw'

describe('redis+sentinel:// URLs', () => {
  it('reads the sentinels, the master name, db, both passwords, and TLS', () => {
    expect(
      parseStoreUrl('redis+sentinel://app:p%40ss@s1:26380,s2/mymaster?db=3&sentinel_password=a%26b+c'),
    ).toEqual({
      kind: 'sentinel',
      tls: false,
      sentinels: [
        { host: 's1', port: 26380 },
        { host: 's2', port: 26379 },
      ],
      masterName: 'mymaster',
      db: 3,
      username: 'app',
      password: 'p@ss',
      sentinelPassword: 'a&b+c',
      redacted: 'redis+sentinel://app:***@s1:26380,s2/mymaster?db=3&sentinel_password=***',
    })
    expect(parseStoreUrl('rediss+sentinel://s1/cache')).toMatchObject({
      kind: 'sentinel',
      tls: true,
      db: 0,
      username: undefined,
      password: undefined,
      sentinelPassword: undefined,
    })
  })

  it('refuses what it cannot use, saying what to write', () => {
    const refusals: [string, RegExp][] = [
      ['redis+sentinel://s1:26379', /name the master the sentinels monitor/],
      ['redis+sentinel://s1:26379/', /name the master the sentinels monitor/],
      ['redis+sentinel://s1/my master', /is not a master name/],
      ['redis+sentinel://s1/m/2', /is not a master name/],
      ['redis+sentinel://s1/m?db=x', /db "x" is not a number/],
      ['redis+sentinel://s1/m?db=1&db=2', /db is given twice/],
      ['redis+sentinel://s1/m?sentinel_pasword=x', /unknown Sentinel parameter "sentinel_pasword"/],
      ['redis+sentinel://s1:99999/m', /port 99999 is out of range/],
      ['redis+sentinel:///m', /no host/],
    ]
    for (const [url, why] of refusals) {
      expect(() => parseStoreUrl(url), url).toThrow(why)
      expect(() => parseStoreUrl(url), url).toThrow(/redis\+sentinel:\/\/host1:26379,host2:26379\/mastername/)
    }
  })

  it('hides the password and the sentinel password', () => {
    expect(redactStoreUrl('redis+sentinel://u:hunter2@s1,s2/m?sentinel_password=hunter3&db=1')).toBe(
      'redis+sentinel://u:***@s1,s2/m?sentinel_password=***&db=1',
    )
    expect(redactStoreUrl('rediss+sentinel://s1/m?db=1&sentinel_password=hunter3')).toBe(
      'rediss+sentinel://s1/m?db=1&sentinel_password=***',
    )
  })

  it('in YAML: the config accepts it and `sluice check` prints it redacted; a bad one is refused at its line', () => {
    const url = 'redis+sentinel://:hunter2@s1:26379,s2:26379/mymaster?sentinel_password=hunter3'
    const config = parseConfig(
      `store: ${JSON.stringify(url)}\npolicies:\n  api: { algorithm: gcra, limit: 5, window: 1m }\n`,
      'conf.yaml',
    )
    expect(config.store).toBe(url)
    const described = describeConfig(config)
    expect(described).toContain(
      'store: redis+sentinel://:***@s1:26379,s2:26379/mymaster?sentinel_password=***',
    )
    expect(described).not.toContain('hunter')
    const refused = (() => {
      try {
        parseConfig(
          'policies:\n  api: { algorithm: gcra, limit: 5, window: 1m }\nstore: "redis+sentinel://s1?sentinel_password=hunter3"\n',
          'conf.yaml',
        )
      } catch (error) {
        return error as Error
      }
      throw new Error('accepted')
    })()
    expect(refused).toMatchObject({ code: 'SLUICE_INVALID_CONFIG' })
    expect(refused.message).toMatch(/^conf\.yaml:3: store: .*name the master the sentinels monitor/)
    expect(refused.message).not.toContain('hunter3')
  })
})

/** A private CA and a certificate it signed for 127.0.0.1 and localhost, made with openssl in `dir`. */
function makeCertificates(dir: string): TestCertificates {
  const ca = makeCa(dir, 'ca').cert
  return { ca, ...issue(dir, 'ca', 'srv', '/CN=localhost', SERVER_EXT) }
}

describe('rediss+sentinel:// speaks TLS to the sentinels and to the master', () => {
  let dir: string
  let tls: Awaited<ReturnType<typeof startTlsSentinel>>
  let ca: string
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sluice-sentinel-certs-'))
    const certificates = makeCertificates(dir)
    ca = certificates.ca
    tls = await startTlsSentinel(certificates)
  })
  afterAll(async () => {
    await tls?.stop()
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  })

  it('serves from a TLS master found through a TLS sentinel (the private CA given with NODE_EXTRA_CA_CERTS)', async () => {
    const url = `rediss+sentinel://127.0.0.1:${tls.sentinelPort}/mymaster`
    const cli = startCli(['serve', '--port', '0', '--store', url], { NODE_EXTRA_CA_CERTS: ca })
    try {
      const served = await servingUrl(cli)
      const answer = await check(served, 'api', 'tls')
      expect(answer.status).toBe(200)
      expect(answer.body.degraded).toBeUndefined()
    } finally {
      cli.child.kill('SIGTERM')
      await cli.exited
    }
  })

  it('a sentinel whose certificate is not trusted stops the start with the certificate error', async () => {
    const url = `rediss+sentinel://127.0.0.1:${tls.sentinelPort}/mymaster?sentinel_password=hunter-SECRET`
    const cli = startCli(['serve', '--port', '0', '--store', url])
    expect(await cli.exited).toBe(1)
    expect(cli.output()).toBe(
      `sluice: cannot connect to rediss+sentinel://127.0.0.1:${tls.sentinelPort}/mymaster?sentinel_password=***: ` +
        `no sentinel (127.0.0.1:${tls.sentinelPort}) named master "mymaster": self-signed certificate in certificate chain (SELF_SIGNED_CERT_IN_CHAIN)\n`,
    )
  })
})

/** Poll until `test` holds; the bound only stops a test that would never pass. */
async function until(
  what: string,
  test: () => boolean | Promise<boolean>,
  timeoutMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await test())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 30))
  }
}

/** The pino lines a process printed, parsed. */
function logLines(cli: CliProcess): { level: number; msg: string; [field: string]: unknown }[] {
  return cli
    .output()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { level: number; msg: string })
}

interface Answer {
  allowed: boolean
  remaining: number
  degraded?: boolean
  reason?: string
}

/** One /v1/check; a request that gets no answer within 10 s fails the test (a hang). */
async function check(url: string, policy: string, key: string): Promise<{ status: number; body: Answer }> {
  const res = await fetch(`${url}/v1/check`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ policy, key }),
    signal: AbortSignal.timeout(10_000),
  })
  return { status: res.status, body: (await res.json()) as Answer }
}

const POLICIES =
  'policies:\n' +
  '  api: { algorithm: fixed-window, limit: 100000, window: 1h }\n' +
  '  login: { algorithm: fixed-window, limit: 100000, window: 1h, onStoreError: closed }\n'

describe('sluice serve on a real Sentinel group', () => {
  let group: SentinelGroup
  let dir: string
  let config: string
  let url: string

  beforeAll(async () => {
    group = await startSentinelGroup({ password: PASSWORD, sentinelPassword: SENTINEL_PASSWORD })
    dir = mkdtempSync(join(tmpdir(), 'sluice-sentinel-test-'))
    config = join(dir, 'sluice.yaml')
    writeFileSync(config, POLICIES)
    const hosts = group.sentinelPorts.map((p) => `127.0.0.1:${p}`).join(',')
    url = `redis+sentinel://:${encodeURIComponent(PASSWORD)}@${hosts}/${group.masterName}?sentinel_password=${encodeURIComponent(SENTINEL_PASSWORD)}`
  })

  afterAll(async () => {
    await group?.stop()
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  })

  const redacted = () =>
    `redis+sentinel://:***@${group.sentinelPorts.map((p) => `127.0.0.1:${p}`).join(',')}/${group.masterName}?sentinel_password=***`

  it('a start that cannot find the master says why: a name no sentinel knows, no sentinel password, no sentinel', async () => {
    const wrongName = startCli([
      'serve',
      '--port',
      '0',
      '--config',
      config,
      '--store',
      url.replace('/mymaster?', '/other?'),
    ])
    expect(await wrongName.exited).toBe(1)
    expect(wrongName.output()).toMatch(
      /no sentinel \(.*\) named master "other": ERR No such master with that name\n$/,
    )
    const noAuth = startCli(['serve', '--port', '0', '--config', config, '--store', url.replace(/\?.*$/, '')])
    expect(await noAuth.exited).toBe(1)
    expect(noAuth.output()).toMatch(/no sentinel \(.*\) named master "mymaster": NOAUTH/)
    const closed = await freePort()
    const closedUrl = `redis+sentinel://127.0.0.1:${closed}/${group.masterName}`
    const unreachable = startCli(['serve', '--port', '0', '--config', config, '--store', closedUrl])
    expect(await unreachable.exited).toBe(1)
    expect(unreachable.output()).toBe(
      `sluice: cannot connect to ${closedUrl}: no sentinel (127.0.0.1:${closed}) named master "mymaster": connect ECONNREFUSED 127.0.0.1:${closed}\n`,
    )
    for (const cli of [wrongName, noAuth]) expect(cli.output()).not.toContain('SECRET')
  })

  it('serves from the master, with both passwords hidden in the banner, /readyz and `sluice check`', async () => {
    const cli = startCli(['serve', '--port', '0', '--config', config, '--store', url])
    try {
      const served = await servingUrl(cli)
      expect(cli.output()).toContain(`(store: ${redacted()},`)
      const ready = await get(`${served}/readyz`)
      expect(ready).toMatchObject({ status: 200, body: { ready: true, reachable: true, store: redacted() } })
      const answer = await check(served, 'api', 'banner')
      expect(answer).toMatchObject({ status: 200, body: { allowed: true, remaining: 99_999 } })
      expect(answer.body.degraded).toBeUndefined()
      // The count is on the master the sentinels name.
      const master = await group.masterNamed()
      expect(await group.cli(master, 'KEYS', '*banner*')).not.toBe('')
      expect(cli.output()).not.toContain('SECRET')
    } finally {
      cli.child.kill('SIGTERM')
      await cli.exited
    }
    const file = join(dir, 'check.yaml')
    writeFileSync(file, `store: ${JSON.stringify(url)}\n${POLICIES}`)
    const checked = startCli(['check', '--config', file])
    expect(await checked.exited, checked.output()).toBe(0)
    expect(checked.output()).toContain(`store: ${redacted()}`)
    expect(checked.output()).not.toContain('SECRET')
  })

  it('a master demoted under the service (READONLY) is left for the one the sentinels name; counts continue', {
    timeout: 90_000,
  }, async () => {
    const cli = startCli(['serve', '--port', '0', '--config', config, '--store', url])
    try {
      const served = await servingUrl(cli)
      for (let i = 1; i <= 5; i++)
        expect((await check(served, 'api', 'demoted')).body).toMatchObject({
          allowed: true,
          remaining: 100_000 - i,
        })
      const before = await group.masterNamed()
      // The five counts are on the replica too before it takes over.
      expect(await group.cli(before, 'WAIT', '1', '5000')).toBe('1')
      await group.swapWithoutFailover()
      expect(await group.masterNamed()).not.toBe(before)

      // The connection to the old master is still open: its first write answers READONLY.
      const answers: Answer[] = []
      await until('a decision from the new master', async () => {
        const { status, body } = await check(served, 'api', 'demoted')
        expect(status).toBe(200)
        answers.push(body)
        return body.degraded === undefined
      })
      // Every answer was a decision: the failed ones admitted through onStoreError (open), none lost.
      for (const a of answers.slice(0, -1)) expect(a).toMatchObject({ allowed: true, degraded: true })
      // Counts continue where the old master left them: 5 before, this one now.
      expect(answers.at(-1)).toMatchObject({ allowed: true, remaining: 100_000 - 6 })
      const demoted = logLines(cli).filter((line) => line.msg.includes('answered READONLY'))
      expect(demoted, cli.output()).toHaveLength(1)
      expect(demoted[0]).toMatchObject({ level: 40, store: redacted() })
      expect(cli.output()).not.toContain('SECRET')
    } finally {
      cli.child.kill('SIGTERM')
      await cli.exited
    }
  })

  it('SIGKILL of the master under load: every request answered through onStoreError, then exact on the promoted replica', {
    timeout: 90_000,
  }, async () => {
    const cli = startCli(['serve', '--port', '0', '--config', config, '--store', url])
    try {
      const served = await servingUrl(cli)
      for (let i = 1; i <= 5; i++)
        expect((await check(served, 'api', 'exact')).body).toMatchObject({ remaining: 100_000 - i })
      const master = await group.masterNamed()
      const replica = master === group.masterPort ? group.replicaPort : group.masterPort
      expect(await group.cli(master, 'WAIT', '1', '5000')).toBe('1')

      // Load: 4 loops of /v1/check on both policies, bounded by a count and by the end of the test.
      let killedAt = 0
      let firstExactAt = 0
      let stop = false
      let sent = 0
      const outcomes = { fromRedis: 0, admittedDegraded: 0, deniedUnavailable: 0 }
      const unexpected: unknown[] = []
      const loop = async (worker: number) => {
        for (let i = 0; !stop && sent < 20_000; i++) {
          sent++
          const policy = i % 2 === 0 ? 'api' : 'login'
          const sentAfterKill = killedAt !== 0
          const { status, body } = await check(served, policy, `load-${worker}-${i % 50}`)
          if (status === 200 && body.degraded === undefined && body.reason === undefined) {
            outcomes.fromRedis++
            // Sent after the kill: only a live master can have decided it.
            if (sentAfterKill && firstExactAt === 0) firstExactAt = Date.now()
          } else if (status === 200 && policy === 'api' && body.allowed && body.degraded === true)
            outcomes.admittedDegraded++
          else if (
            status === 200 &&
            policy === 'login' &&
            !body.allowed &&
            body.reason === 'store_unavailable'
          )
            outcomes.deniedUnavailable++
          else unexpected.push({ status, policy, body })
        }
      }
      const loops = [0, 1, 2, 3].map(loop)
      await until('some decisions under load', () => outcomes.fromRedis >= 100)
      group.process(master).kill('SIGKILL')
      killedAt = Date.now()
      await until('the sentinels to promote the replica', async () => (await group.masterNamed()) === replica)
      const promotedAt = Date.now()
      await until('decisions from the promoted replica', () => firstExactAt !== 0)
      stop = true
      await Promise.all(loops)

      expect(unexpected).toEqual([])
      // The outage was seen: both policies answered through onStoreError.
      expect(outcomes.admittedDegraded).toBeGreaterThan(0)
      expect(outcomes.deniedUnavailable).toBeGreaterThan(0)
      // The count made on the old master continues on the promoted replica.
      expect((await check(served, 'api', 'exact')).body).toMatchObject({
        allowed: true,
        remaining: 100_000 - 6,
      })
      expect((await check(served, 'api', 'exact')).body.degraded).toBeUndefined()
      const lost = logLines(cli).filter((line) => line.msg.includes('connection lost'))
      const back = logLines(cli).filter((line) => line.msg.includes('connection back'))
      expect(lost, cli.output()).toHaveLength(1)
      expect(back, cli.output()).toHaveLength(1)
      expect(cli.output()).not.toContain('SECRET')
      expect(cli.output()).not.toContain('Unhandled error event')
      console.log(
        `sentinel failover: SIGKILL of the master to the first decision from the promoted replica ${firstExactAt - killedAt} ms ` +
          `(the sentinels named it after ${promotedAt - killedAt} ms); ` +
          `${sent} requests: ${outcomes.fromRedis} from Redis, ${outcomes.admittedDegraded} admitted degraded (open), ` +
          `${outcomes.deniedUnavailable} denied store_unavailable (closed)`,
      )
    } finally {
      cli.child.kill('SIGTERM')
      await cli.exited
    }
  })
})
