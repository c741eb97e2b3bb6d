// The real `sluice` process (dist/cli.js) with Envoy's gRPC service: `serve --grpc-port
// --envoy-config` on a folder, YAML grpc/envoy settings, reload of the Envoy rules on SIGHUP and on a
// file change, graceful SIGTERM for both listeners, and `sluice check --envoy-config`.
import type { ChildProcess } from 'node:child_process'
import { spawn, spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { d, FIXTURES, rlsClient } from '../helpers/envoy.js'
import { freePort, post } from '../helpers/service.js'

const CLI = fileURLToPath(new URL('../../packages/sluice-server/dist/cli.js', import.meta.url))
const POLICIES = 'policies:\n  api: { algorithm: fixed-window, limit: 5, window: 1m }\n'
const rules = (limit: number) =>
  `domain: edge\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: ${limit} }\n`

interface Proc {
  child: ChildProcess
  output: () => string
  exited: Promise<number | null>
}

function start(args: string[]): Proc {
  const child = spawn(process.execPath, [CLI, ...args], {
    env: { ...process.env, SLUICE_STORE: '', REDIS_URL: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  child.stdout?.on('data', (chunk: Buffer) => {
    out += chunk.toString()
  })
  child.stderr?.on('data', (chunk: Buffer) => {
    out += chunk.toString()
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  return { child, output: () => out, exited }
}

async function until(what: string, test: () => boolean | Promise<boolean>, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs
  while (!(await test())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

let dir: string | undefined
let proc: Proc | undefined
afterEach(async () => {
  if (proc !== undefined && proc.child.exitCode === null) {
    proc.child.kill('SIGKILL')
    await proc.exited
  }
  proc = undefined
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
})

describe('sluice serve with Envoy', () => {
  it('serves ShouldRateLimit from a folder given by flags, reloads it, and stops gracefully', async () => {
    dir = mkdtempSync(join(tmpdir(), 'sluice-envoy-'))
    const folder = join(dir, 'ratelimit')
    mkdirSync(folder)
    writeFileSync(join(folder, 'edge.yaml'), rules(2))
    writeFileSync(join(dir, 'sluice.yaml'), POLICIES)
    const [port, grpcPort] = [await freePort(), await freePort()]
    proc = start([
      'serve',
      '--config',
      join(dir, 'sluice.yaml'),
      '--port',
      String(port),
      '--grpc-port',
      String(grpcPort),
      '--envoy-config',
      folder,
    ])
    await until('the banner', () => proc!.output().includes(`gRPC 127.0.0.1:${grpcPort}`))
    const client = rlsClient(`127.0.0.1:${grpcPort}`)
    try {
      const ask = (user: string) =>
        client.shouldRateLimit({ domain: 'edge', descriptors: [d(['user', user])] })
      expect((await ask('a')).statuses[0]!.current_limit!.requests_per_unit).toBe(2)
      // The HTTP API is served by the same process.
      expect((await post(`http://127.0.0.1:${port}/v1/check`, { policy: 'api', key: 'k' })).status).toBe(200)
      // A change to a file of the folder is picked up (kept counters: same algorithm and window).
      writeFileSync(join(folder, 'edge.yaml'), rules(7))
      await until(
        'the new limit',
        async () => (await ask('a')).statuses[0]!.current_limit!.requests_per_unit === 7,
      )
      // A broken file is refused and the rules in force stay.
      writeFileSync(join(folder, 'edge.yaml'), 'domain: edge\ndescriptors:\n  - value: x\n')
      proc.child.kill('SIGHUP')
      await until('the refusal', () => proc!.output().includes('descriptor has empty key'))
      expect((await ask('b')).statuses[0]!.current_limit!.requests_per_unit).toBe(7)
      proc.child.kill('SIGTERM')
      expect(await proc.exited).toBe(0)
      const error = await client.refused({ domain: 'edge', descriptors: [d(['user', 'a'])] })
      expect(error.code).toBe(14) // UNAVAILABLE: nothing listens any more
    } finally {
      client.close()
    }
  })

  it('takes grpc.port and envoy.config from the YAML (the path relative to it)', async () => {
    dir = mkdtempSync(join(tmpdir(), 'sluice-envoy-'))
    writeFileSync(join(dir, 'edge.yaml'), rules(3))
    const grpcPort = await freePort()
    writeFileSync(
      join(dir, 'sluice.yaml'),
      `${POLICIES}grpc: { port: ${grpcPort} }\nenvoy: { config: edge.yaml }\n`,
    )
    // sluice check reads the same settings and validates the rules they name.
    const checked = spawnSync(process.execPath, [CLI, 'check', '--config', join(dir, 'sluice.yaml')], {
      encoding: 'utf8',
    })
    expect(checked.status, checked.stderr).toBe(0)
    expect(checked.stdout).toContain(
      `envoy: rules ${join(dir, 'edge.yaml')}, charge all-or-nothing, gRPC on 127.0.0.1:${grpcPort}`,
    )
    expect(checked.stdout).toContain('user: 3 per hour, fixed-window')
    proc = start(['serve', '--config', join(dir, 'sluice.yaml'), '--port', '0'])
    await until('the banner', () => proc!.output().includes(`gRPC 127.0.0.1:${grpcPort}`))
    const client = rlsClient(`127.0.0.1:${grpcPort}`)
    try {
      const res = await client.shouldRateLimit({ domain: 'edge', descriptors: [d(['user', 'a'])] })
      expect(res.statuses[0]!.limit_remaining).toBe(2)
    } finally {
      client.close()
    }
  })

  it('refuses --grpc-port without an Envoy config, naming what to add', () => {
    const run = spawnSync(process.execPath, [CLI, 'serve', '--port', '0', '--grpc-port', '0'], {
      encoding: 'utf8',
    })
    expect(run.status).toBe(1)
    expect(run.stderr).toMatch(
      /a gRPC port needs Envoy rules: set envoy.config in the config or pass --envoy-config/,
    )
  })
})

describe('sluice check --envoy-config', () => {
  const check = (...args: string[]) =>
    spawnSync(process.execPath, [CLI, 'check', ...args], { encoding: 'utf8' })

  it('validates the fixtures folder and prints domains and limits', () => {
    const run = check('--envoy-config', join(FIXTURES, 'valid'))
    expect(run.status, run.stderr).toBe(0)
    expect(run.stdout).toContain('domain storefront:')
    expect(run.stdout).toContain('client=mobile-app: 90 per minute, fixed-window')
  })

  it('exits 1 naming the file, line and problem', () => {
    const file = join(FIXTURES, 'invalid', 'bad-unit.yaml')
    const run = check('--envoy-config', file)
    expect(run.status).toBe(1)
    expect(run.stderr).toContain(`${file}:7: invalid rate limit unit 'week'`)
  })
})
