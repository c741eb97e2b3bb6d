// The real `sluice` process (dist/cli.js, built by `npm test`): serve, SIGHUP and file-change reload,
// SIGTERM graceful shutdown with a request in flight, and `sluice check`.

import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, beforeEach, describe, expect, inject, it } from 'vitest'
import { CLI, type CliProcess, startCli } from '../helpers/cli-process.js'
import { freePort, post } from '../helpers/service.js'

const policyYaml = (limit: number, window = '1m') =>
  `policies:\n  api: { algorithm: fixed-window, limit: ${limit}, window: ${window} }\n  other: { algorithm: gcra, limit: 5, window: 1s }\n`

type Proc = CliProcess
const start = startCli

/** Poll until `test` holds; the timeout only stops a test that would never pass (a loaded machine is slow). */
async function until(
  what: string,
  test: () => boolean | Promise<boolean>,
  timeoutMs = 25_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await test())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

describe('sluice serve (a real process)', () => {
  let dir: string
  let file: string
  let proc: Proc | undefined
  let url: string

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sluice-cli-'))
    file = join(dir, 'sluice.yaml')
    writeFileSync(file, policyYaml(2))
    const port = await freePort()
    proc = start(['serve', '--config', file, '--port', String(port)])
    url = `http://127.0.0.1:${port}`
    await until('the banner', () => proc!.output().includes(`sluice serving on ${url}`))
  })

  afterEach(async () => {
    if (proc !== undefined && proc.child.exitCode === null) {
      proc.child.kill('SIGKILL')
      await proc.exited
    }
    rmSync(dir, { recursive: true, force: true })
  })

  const peekApi = async () => (await post(`${url}/v1/peek`, { policy: 'api', key: 'k' })).body

  it('prints its URLs and serves decisions', async () => {
    expect(proc!.output()).toContain(`POST ${url}/v1/check`)
    expect(proc!.output()).toContain(`GET  ${url}/v1/authz?policy=api`)
    expect(proc!.output()).toContain(`dashboard: ${url}/dashboard`)
    const page = await fetch(`${url}/dashboard`)
    expect(page.status).toBe(200)
    expect(page.headers.get('content-type')).toContain('text/html')
    expect((await post(`${url}/v1/check`, { policy: 'api', key: 'k' })).body).toMatchObject({
      allowed: true,
      remaining: 1,
    })
  })

  it('reloads on SIGHUP keeping counters, and refuses an invalid config keeping the old one', async () => {
    await post(`${url}/v1/check`, { policy: 'api', key: 'k' })
    writeFileSync(file, policyYaml(5))
    proc!.child.kill('SIGHUP')
    await until('the new limit', async () => (await peekApi()).limit === 5)
    expect(await peekApi()).toMatchObject({ limit: 5, remaining: 4 })

    writeFileSync(file, policyYaml(5, '10 minutes'))
    proc!.child.kill('SIGHUP')
    await until('the refusal in the log', () => proc!.output().includes('config refused'))
    expect(proc!.output()).toContain('policies.api.window: \\"10 minutes\\" is not a duration, use 10m')
    expect(proc!.output()).toMatch(/sluice\.yaml:2/)
    expect(await peekApi()).toMatchObject({ limit: 5, remaining: 4 })
  })

  it('logs the good file put back after a refused one, so the last word is not the refusal', async () => {
    const good = policyYaml(2)
    writeFileSync(file, policyYaml(2, '10 minutes'))
    await until('the refusal in the log', () => proc!.output().includes('config refused'))
    writeFileSync(file, good)
    const lastLine = () => proc!.output().trim().split('\n').at(-1)!
    await until('a line after the refusal', () => !lastLine().includes('config refused'))
    const last = JSON.parse(lastLine()) as { level: number; msg: string; trigger: string }
    expect(last).toMatchObject({ level: 30, msg: 'config file valid again; it is the config in force' })
    expect(last.trigger).toBe('file change')
    expect(await peekApi()).toMatchObject({ limit: 2 })
  })

  it('reloads when the file changes', async () => {
    writeFileSync(file, policyYaml(9))
    await until('the new limit', async () => (await peekApi()).limit === 9)
  })

  it('stops on SIGTERM after finishing an in-flight request', async () => {
    const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(
        `${url}/v1/check`,
        { method: 'POST', headers: { 'content-type': 'application/json' } },
        (res) => {
          let body = ''
          res.on('data', (chunk: Buffer) => {
            body += chunk.toString()
          })
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
        },
      )
      req.on('error', reject)
      req.once('socket', (socket) =>
        socket.once('connect', () => {
          req.write('{"policy":"api",')
          setTimeout(() => {
            proc!.child.kill('SIGTERM')
            setTimeout(() => req.end('"key":"slow"}'), 300)
          }, 200)
        }),
      )
    })
    const { status, body } = await answer
    expect(status).toBe(200)
    expect(JSON.parse(body)).toMatchObject({ allowed: true, policy: 'api' })
    expect(await proc!.exited).toBe(0)
    expect(proc!.output()).toContain('"msg":"stopped"')
  })
})

describe('sluice serve --store', () => {
  it('serves on the Redis a URL names (SLUICE_STORE), and refuses a bad URL', async () => {
    const port = await freePort()
    const redisUrl = inject('redis').url
    const proc = start(['serve', '--port', String(port)], { SLUICE_STORE: redisUrl })
    try {
      await until('the banner', () => proc.output().includes('sluice serving on'))
      expect(proc.output()).toContain(`store: ${redisUrl}`)
      const url = `http://127.0.0.1:${port}`
      expect((await post(`${url}/v1/check`, { policy: 'api', key: `cli-${Date.now()}` })).body).toMatchObject(
        {
          allowed: true,
        },
      )
    } finally {
      proc.child.kill('SIGTERM')
      expect(await proc.exited).toBe(0)
    }
    const bad = spawnSync(process.execPath, [CLI, 'serve', '--port', '0', '--store', 'mysql://db'], {
      encoding: 'utf8',
    })
    expect(bad.status).toBe(1)
    expect(bad.stderr).toContain('use memory, redis://host:port')
  })
})

describe('sluice check and help', () => {
  it('prints what a valid config says', () => {
    const example = fileURLToPath(
      new URL('../../packages/sluice-server/examples/sluice.yaml', import.meta.url),
    )
    const res = spawnSync(process.execPath, [CLI, 'check', '--config', example], { encoding: 'utf8' })
    expect(res.status).toBe(0)
    expect(res.stdout).toContain('api (tier enterprise): token-bucket, 10000 per 60000ms, capacity 2000')
  })

  it('exits 1 naming file, line and path for an invalid one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-check-'))
    const file = join(dir, 'bad.yaml')
    writeFileSync(file, 'policies:\n  api: { algorithm: token-bucket, limit: 100, window: 10 minutes }\n')
    const res = spawnSync(process.execPath, [CLI, 'check', '--config', file], { encoding: 'utf8' })
    rmSync(dir, { recursive: true, force: true })
    expect(res.status).toBe(1)
    expect(res.stderr).toContain(`${file}:2: policies.api.window: "10 minutes" is not a duration, use 10m`)
  })

  it('has help per command', () => {
    for (const args of [['--help'], ['serve', '--help'], ['check', '--help']]) {
      const res = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8' })
      expect(res.status, args.join(' ')).toBe(0)
      expect(res.stdout).toContain('Usage: sluice')
    }
    expect(readFileSync(CLI, 'utf8')).toContain('redis+cluster://')
  })
})
