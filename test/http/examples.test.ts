// The examples start and limit: each runs in its own process on a free port.
import { type ChildProcess, spawn } from 'node:child_process'
import { afterEach, describe, expect, it } from 'vitest'

const root = new URL('../..', import.meta.url).pathname
let child: ChildProcess | undefined

afterEach(() => {
  child?.kill('SIGTERM')
  child = undefined
})

function start(name: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, ['--import', 'tsx', `examples/${name}/server.ts`], {
      cwd: root,
      env: { ...process.env, PORT: '0' },
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    child = proc
    const timer = setTimeout(() => reject(new Error(`${name} example did not start`)), 20_000)
    let out = ''
    proc.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      const match = /listening on (http:\/\/\S+)/.exec(out)
      if (match?.[1] !== undefined) {
        clearTimeout(timer)
        resolve(match[1].replace(/\/$/, ''))
      }
    })
    proc.once('exit', (code) => reject(new Error(`${name} example exited with ${code}`)))
  })
}

describe.each(['express', 'fastify', 'hono', 'node'])('examples/%s', (name) => {
  it('serves with layered limits per tier', async () => {
    const base = await start(name)
    const alice = await fetch(`${base}/users/1`, { headers: { authorization: 'Bearer alice' } })
    expect(alice.status).toBe(200)
    // userFree: a 20-token bucket refilled at 60 a minute states its burst, refilled in 20 s.
    expect(alice.headers.get('ratelimit-policy')).toBe('"perIp";q=300;w=60, "userFree";q=20;w=20')
    const carol = await fetch(`${base}/users/1`, { headers: { authorization: 'Bearer carol' } })
    expect(carol.headers.get('ratelimit-policy')).toBe('"perIp";q=300;w=60') // enterprise: no user layer
    const report = await fetch(`${base}/reports`, {
      method: 'POST',
      headers: { authorization: 'Bearer bob' },
    })
    expect(report.headers.get('ratelimit')).toMatch(
      /^"perIp";r=297;t=\d+, "userPro";r=95;t=\d+, "reports";r=5;t=60$/,
    )
    const health = await fetch(`${base}/health`)
    expect(health.headers.get('x-ratelimit-limit')).toBeNull()
  })
})
