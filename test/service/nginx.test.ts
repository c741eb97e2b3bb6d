// A real nginx (Debian package) in front of a tiny upstream, asking the service through
// auth_request with exactly examples/nginx/sluice.conf (only its three ports replaced).

import type { ChildProcess } from 'node:child_process'
import { spawn, spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import type { Server } from 'node:http'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Running } from './helpers.js'
import { freePort, startService } from './helpers.js'

const EXAMPLE = fileURLToPath(new URL('../../examples/nginx/sluice.conf', import.meta.url))
const nginxBinary = ['/usr/sbin/nginx', 'nginx'].find((bin) => spawnSync(bin, ['-v']).status === 0)

function waitForPort(port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  return new Promise((resolve, reject) => {
    const attempt = () => {
      const socket = connect(port, '127.0.0.1')
      socket.once('connect', () => {
        socket.destroy()
        resolve()
      })
      socket.once('error', () => {
        socket.destroy()
        if (Date.now() > deadline) reject(new Error(`nothing listens on ${port} after ${timeoutMs}ms`))
        else setTimeout(attempt, 50)
      })
    }
    attempt()
  })
}

describe('nginx auth_request in front of the service', () => {
  let sluice: Running
  let upstream: Server
  let upstreamHits = 0
  let nginx: ChildProcess | undefined
  let nginxPort = 0
  let dir = ''

  beforeAll(async () => {
    if (nginxBinary === undefined)
      throw new Error('nginx is not installed: apt-get install -y nginx (.ci/run does)')
    sluice = await startService('policies:\n  api: { algorithm: fixed-window, limit: 3, window: 1m }\n')
    upstream = createServer((_req, res) => {
      upstreamHits++
      res.writeHead(200, { 'content-type': 'text/plain' }).end('upstream ok')
    })
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
    const upstreamPort = (upstream.address() as AddressInfo).port
    const sluicePort = Number(new URL(sluice.url).port)
    nginxPort = await freePort()

    dir = mkdtempSync(join(tmpdir(), 'sluice-nginx-'))
    mkdirSync(join(dir, 'logs'))
    const example = readFileSync(EXAMPLE, 'utf8')
    const site = example
      .replaceAll('127.0.0.1:8080', `127.0.0.1:${sluicePort}`)
      .replaceAll('127.0.0.1:3000', `127.0.0.1:${upstreamPort}`)
      .replaceAll('listen 127.0.0.1:8000', `listen 127.0.0.1:${nginxPort}`)
    // The templating must have hit every port, or the test would silently use the defaults.
    for (const port of ['8080', '3000', '8000']) expect(site).not.toContain(`127.0.0.1:${port};`)
    writeFileSync(join(dir, 'sluice.conf'), site)
    writeFileSync(
      join(dir, 'nginx.conf'),
      [
        'daemon off;',
        'worker_processes 1;',
        `pid ${dir}/nginx.pid;`,
        `error_log ${dir}/logs/error.log warn;`,
        'events { worker_connections 64; }',
        'http {',
        `  access_log ${dir}/logs/access.log;`,
        `  client_body_temp_path ${dir}/client_body;`,
        `  proxy_temp_path ${dir}/proxy;`,
        `  fastcgi_temp_path ${dir}/fastcgi;`,
        `  uwsgi_temp_path ${dir}/uwsgi;`,
        `  scgi_temp_path ${dir}/scgi;`,
        `  include ${dir}/sluice.conf;`,
        '}',
        '',
      ].join('\n'),
    )
    nginx = spawn(
      nginxBinary,
      ['-p', dir, '-e', join(dir, 'logs', 'startup.log'), '-c', join(dir, 'nginx.conf')],
      {
        stdio: 'ignore',
      },
    )
    await waitForPort(nginxPort, 10_000)
  })

  afterAll(async () => {
    if (nginx !== undefined && nginx.exitCode === null) {
      const exited = new Promise((resolve) => nginx?.once('exit', resolve))
      nginx.kill('SIGQUIT')
      await exited
    }
    await new Promise((resolve) => upstream?.close(resolve))
    await sluice?.service.close()
    if (dir !== '') rmSync(dir, { recursive: true, force: true })
  })

  it('passes allowed requests with rate-limit headers, then gives the client 429 with Retry-After', async () => {
    const results = []
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`http://127.0.0.1:${nginxPort}/some/page`)
      results.push({ status: res.status, body: await res.text(), headers: res.headers })
    }
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 429, 429])
    expect(upstreamHits).toBe(3)
    expect(results[0]!.body).toBe('upstream ok')
    expect(results[0]!.headers.get('x-ratelimit-limit')).toBe('3')
    expect(results[2]!.headers.get('x-ratelimit-remaining')).toBe('0')
    const denied = results[3]!
    const retryAfter = Number(denied.headers.get('retry-after'))
    expect(retryAfter).toBeGreaterThanOrEqual(1)
    expect(retryAfter).toBeLessThanOrEqual(60)
    expect(denied.headers.get('content-type')).toContain('application/json')
    expect(JSON.parse(denied.body)).toMatchObject({ error: 'rate_limit_exceeded', retry_after: retryAfter })
  })
})
