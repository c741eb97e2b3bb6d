// The client examples (examples/go, examples/fastapi) against a real `sluice serve` process
// (dist/cli.js): one shared suite, run once per language by go.test.ts and fastapi.test.ts.
import type { ChildProcess } from 'node:child_process'
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { rateLimitBody } from '../../packages/sluice/src/http/headers.js'
import { announcedUrl, servingUrl } from '../helpers/cli-process.js'
import { type RedisServer, startRedis } from '../helpers/redis-harness.js'

const CLI = fileURLToPath(new URL('../../packages/sluice-server/dist/cli.js', import.meta.url))
export const EXAMPLES = fileURLToPath(new URL('../../examples/', import.meta.url))

/**
 * The Python that sees Debian's python3-fastapi / -uvicorn / -httpx: /usr/bin/python3 (a pyenv or
 * venv python3 earlier on PATH would not), or SLUICE_PYTHON. scripts/test-prereqs.mjs uses the same rule.
 */
export function python(): string {
  const chosen = process.env.SLUICE_PYTHON
  if (chosen !== undefined && chosen !== '') return chosen
  return existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3'
}

/** Go off the network, with its caches in a temp folder (never the user's ~/go). */
export function goEnv(dir: string): Record<string, string> {
  return { GOCACHE: join(dir, 'gocache'), GOPATH: join(dir, 'gopath'), GOFLAGS: '-mod=mod', GOPROXY: 'off' }
}

export interface Proc {
  child: ChildProcess
  output: () => string
  exited: Promise<void>
}

export function startProcess(
  command: string,
  args: string[],
  env: Record<string, string>,
  cwd?: string,
): Proc {
  const child = spawn(command, args, {
    env: { ...process.env, ...env },
    cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  const collect = (chunk: Buffer) => {
    if (out.length < 100_000) out += chunk.toString()
  }
  child.stdout?.on('data', collect)
  child.stderr?.on('data', collect)
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => resolve())
    // A program or folder that does not exist: no 'exit' follows, and the error is the output.
    child.once('error', (error) => {
      out += String(error)
      resolve()
    })
  })
  return { child, output: () => out, exited }
}

export async function stopProcess(proc: Proc | undefined): Promise<void> {
  if (proc === undefined || proc.child.exitCode !== null || proc.child.signalCode !== null) return
  proc.child.kill('SIGCONT') // a paused process cannot die of SIGKILL until it is scheduled: resume it
  proc.child.kill('SIGKILL')
  await proc.exited
}

/** Poll `url` until it answers 200 (the process is up), or fail with what the process printed. */
export async function waitForHttp(url: string, proc: Proc, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    try {
      const res = await fetch(url)
      await res.arrayBuffer()
      if (res.status === 200) return
    } catch {
      // not listening yet
    }
    if (proc.child.exitCode !== null || proc.child.pid === undefined)
      throw new Error(`${url}: the process exited:\n${proc.output()}`)
    if (Date.now() > deadline) throw new Error(`${url}: no answer within ${timeoutMs} ms:\n${proc.output()}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

/**
 * The limit the suite's service applies to GET /hello: 3 per minute, fixed window; `strict` is the
 * same policy failing closed inside the service when its Redis is down.
 */
export const LIMIT = 3
const CONFIG = `policies:
  api: { algorithm: fixed-window, limit: ${LIMIT}, window: 1m }
  strict: { algorithm: fixed-window, limit: ${LIMIT}, window: 1m, onStoreError: closed }
`

export interface AppOptions {
  sluiceUrl: string
  /** Deliberately a string: one test passes a misspelled mode. */
  failMode: string
  policy: string
}

/**
 * Starts the example app on port 0 (its `PORT`), asking Sluice at `sluiceUrl` about `policy`, in
 * `failMode`; the app prints `demo listening on <url>` once it listens.
 */
export type StartApp = (options: AppOptions) => Proc

type AppName = 'open' | 'closed' | 'strict'
const APPS: Record<AppName, { failMode: string; policy: string }> = {
  open: { failMode: 'open', policy: 'api' },
  closed: { failMode: 'closed', policy: 'api' },
  strict: { failMode: 'open', policy: 'strict' },
}

/**
 * The shared suite: a real `sluice serve` on a free port, two instances of the example (fail open
 * and fail closed) in front of it; limited after LIMIT requests with the adapters' headers and body;
 * then the service paused (SIGSTOP: calls time out) and killed (calls are refused).
 */
export function clientSuite(name: string, prepare: (dir: string) => Promise<StartApp> | StartApp): void {
  describe(`${name} client against a real sluice serve`, () => {
    let dir: string
    let sluice: Proc | undefined
    let sluiceUrl: string
    let redis: RedisServer | undefined
    let start: StartApp
    const apps: Partial<Record<AppName, { proc: Proc; url: string }>> = {}

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), `sluice-client-${name}-`))
      const config = join(dir, 'sluice.yaml')
      writeFileSync(config, CONFIG)
      redis = await startRedis()
      sluice = startProcess(
        process.execPath,
        [CLI, 'serve', '--config', config, '--port', '0', '--store', redis.url],
        { SLUICE_STORE: '', REDIS_URL: '', SLUICE_LOG_LEVEL: 'warn' },
      )
      start = await prepare(dir)
      sluiceUrl = await servingUrl(sluice)
      await waitForHttp(`${sluiceUrl}/healthz`, sluice)
      // Each on port 0, read back from what it prints: a port picked beforehand could be served by
      // another process by the time the app binds it, and the suite would test that process.
      for (const [app, options] of Object.entries(APPS) as [AppName, (typeof APPS)[AppName]][])
        apps[app] = { proc: start({ sluiceUrl, ...options }), url: '' }
      for (const app of Object.values(apps)) {
        app.url = await announcedUrl(app.proc, /demo listening on (http:\/\/\S+)/)
        await waitForHttp(`${app.url}/healthz`, app.proc)
      }
    })

    afterAll(async () => {
      await stopProcess(sluice)
      for (const app of Object.values(apps)) await stopProcess(app.proc)
      await redis?.stop()
      rmSync(dir, { recursive: true, force: true })
    })

    const hello = (app: AppName, user?: string) =>
      fetch(`${apps[app]!.url}/hello`, user === undefined ? {} : { headers: { 'x-user': user } })

    it(`admits ${LIMIT} requests with the rate-limit headers, then answers 429 with Retry-After and the adapters' body`, async () => {
      for (let i = 1; i <= LIMIT; i++) {
        const res = await hello('open', 'alice')
        expect(res.status).toBe(200)
        expect(await res.json()).toEqual({ hello: 'world' })
        expect(res.headers.get('x-ratelimit-limit')).toBe(String(LIMIT))
        expect(res.headers.get('x-ratelimit-remaining')).toBe(String(LIMIT - i))
        expect(res.headers.get('ratelimit-policy')).toBe(`"api";q=${LIMIT}`)
        expect(res.headers.get('ratelimit')).toMatch(
          new RegExp(`^"api";r=${LIMIT - i};t=([1-9]|[1-5][0-9]|60)$`),
        )
        const reset = Number(res.headers.get('x-ratelimit-reset'))
        expect(reset).toBeGreaterThan(Date.now() / 1000)
        expect(reset).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 60)
        expect(res.headers.get('retry-after')).toBeNull()
      }
      const denied = await hello('open', 'alice')
      expect(denied.status).toBe(429)
      expect(denied.headers.get('content-type')).toMatch(/^application\/json/)
      const retryAfter = Number(denied.headers.get('retry-after'))
      expect(retryAfter).toBeGreaterThanOrEqual(1)
      expect(retryAfter).toBeLessThanOrEqual(60)
      expect(denied.headers.get('x-ratelimit-remaining')).toBe('0')
      expect(denied.headers.get('ratelimit')).toBe(`"api";r=0;t=${retryAfter}`)
      // Byte for byte what Sluice's own adapters send for this denial.
      const expected = rateLimitBody({
        allowed: false,
        limit: LIMIT,
        remaining: 0,
        resetMs: retryAfter * 1000,
        retryAfterMs: retryAfter * 1000,
        policy: 'api',
        key: 'user:alice',
        reason: 'limit',
      })
      expect(await denied.text()).toBe(expected.body)
    })

    it('sends the same numbers as the service’s own headers for the same key (GET /v1/authz)', async () => {
      // Without X-User the example keys on the client IP, as /v1/authz does for a loopback peer.
      for (let i = 0; i < LIMIT; i++) expect((await hello('closed')).status).toBe(200)
      const denied = await hello('closed')
      const own = await fetch(`${sluiceUrl}/v1/authz?policy=api`)
      await own.arrayBuffer()
      expect(denied.status).toBe(429)
      expect(own.status).toBe(429)
      for (const header of ['x-ratelimit-limit', 'x-ratelimit-remaining'])
        expect(denied.headers.get(header), header).toBe(own.headers.get(header))
      // The same instant, read a few milliseconds apart: equal or one second off.
      for (const header of ['retry-after', 'x-ratelimit-reset']) {
        const drift = Number(own.headers.get(header)) - Number(denied.headers.get(header))
        expect(Math.abs(drift), header).toBeLessThanOrEqual(1)
      }
      // The JSON answer has no window: the example's RateLimit-Policy is the service's without w.
      expect(own.headers.get('ratelimit-policy')).toBe(`${denied.headers.get('ratelimit-policy')};w=60`)
    })

    it('counts each key on its own budget', async () => {
      const bob = await hello('open', 'bob')
      expect(bob.status).toBe(200)
      expect(bob.headers.get('x-ratelimit-remaining')).toBe(String(LIMIT - 1))
    })

    it('refuses a misspelled fail mode when it starts', async () => {
      const proc = start({ sluiceUrl, failMode: 'sometimes', policy: 'api' })
      await proc.exited
      expect(proc.child.exitCode).not.toBe(0)
      expect(proc.output()).toMatch(/fail_?mode .*sometimes.*open.*closed/i)
    })

    it("passes on the service's store_unavailable denial (a closed policy, Redis down) as the adapters' 503", async () => {
      const strictBefore = await hello('strict', 'erin')
      expect(strictBefore.status).toBe(200)
      await redis!.stop()
      const strict = await hello('strict', 'erin')
      expect(strict.status).toBe(503)
      const retryAfter = Number(strict.headers.get('retry-after'))
      expect(retryAfter).toBeGreaterThanOrEqual(1)
      const expected = rateLimitBody({
        allowed: false,
        limit: LIMIT,
        remaining: 0,
        resetMs: retryAfter * 1000,
        retryAfterMs: retryAfter * 1000,
        policy: 'strict',
        key: 'user:erin',
        reason: 'store_unavailable',
      })
      expect(expected.status).toBe(503)
      expect(await strict.text()).toBe(expected.body)
      // The open policy is admitted by the service (degraded): the client's fail mode is not involved.
      const open = await hello('open', 'erin')
      expect(open.status).toBe(200)
      expect(open.headers.get('x-ratelimit-limit')).toBe(String(LIMIT))
    })

    it('fails open or closed, as configured, when the service does not answer in time (paused)', async () => {
      sluice!.child.kill('SIGSTOP')
      try {
        const started = Date.now()
        const open = await hello('open', 'carol')
        expect(open.status).toBe(200)
        expect(await open.json()).toEqual({ hello: 'world' })
        expect(open.headers.get('x-ratelimit-limit')).toBeNull()
        const closed = await hello('closed', 'carol')
        expect(closed.status).toBe(503)
        expect(closed.headers.get('retry-after')).toBe('1')
        expect(await closed.json()).toEqual({
          error: 'store_unavailable',
          message: 'The rate limiter cannot reach its store. Please try again in 1 second.',
          retry_after: 1,
          policy: 'api',
        })
        // Two calls, each bounded by the 500 ms default timeout (plus a busy machine's slack).
        expect(Date.now() - started).toBeLessThan(5_000)
      } finally {
        sluice!.child.kill('SIGCONT')
      }
    })

    it('fails open or closed, as configured, when the service is down (killed)', async () => {
      await stopProcess(sluice)
      const open = await hello('open', 'dave')
      expect(open.status).toBe(200)
      expect(open.headers.get('x-ratelimit-limit')).toBeNull()
      const closed = await hello('closed', 'dave')
      expect(closed.status).toBe(503)
      expect(closed.headers.get('retry-after')).toBe('1')
      expect(((await closed.json()) as { error: string }).error).toBe('store_unavailable')
    })
  })
}
