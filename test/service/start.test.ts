// `npm start` as the README's quick start runs it: the service from this clone on the memory store,
// built as the command alone without declarations, quietly. How long it takes is a budget of
// `npm run bench -- --check`; here, what it does.
import { spawn } from 'node:child_process'
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

describe('npm start', () => {
  it('serves /healthz on the memory store from a JavaScript-only build, with no warnings, and stops on SIGTERM', async () => {
    const child = spawn(process.execPath, [join(ROOT, 'scripts/start.mjs'), '--port', '0'], {
      cwd: ROOT,
      env: { ...process.env, SLUICE_STORE: '', REDIS_URL: '', SLUICE_CONFIG: '', SLUICE_PORT: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString()
    })
    child.stderr.on('data', (chunk: Buffer) => {
      out += chunk.toString()
    })
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
    try {
      const url = await new Promise<string>((resolve, reject) => {
        const look = () => {
          const found = /sluice serving on (http:\/\/127\.0\.0\.1:\d+) \(store: memory,/.exec(out)
          if (found?.[1] !== undefined) resolve(found[1])
        }
        child.stdout.on('data', look)
        exited.then((code) => reject(new Error(`npm start exited with ${code} before serving:\n${out}`)))
      })
      const health = await fetch(`${url}/healthz`)
      expect(health.status).toBe(200)
      const check = await fetch(`${url}/v1/check`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ policy: 'api', key: 'start-test' }),
      })
      expect(check.status).toBe(200)
      expect(out).not.toMatch(/warn|circular/i)
      const built = readdirSync(join(ROOT, 'packages', 'sluice-server', '.start'))
      expect(built).toContain('cli.js')
      expect(built).toContain('rls.proto')
      expect(built.filter((name) => name.endsWith('.d.ts') || name.endsWith('.d.cts'))).toEqual([])
      child.kill('SIGTERM')
      expect(await exited).toBe(0)
      expect(out).toMatch(/"msg":"stopped"/)
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL')
    }
  })
})
