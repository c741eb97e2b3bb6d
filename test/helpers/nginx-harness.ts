// A real nginx (Debian package) from a temporary folder: any site (startNginx), or exactly
// examples/nginx/sluice.conf with only its three ports replaced (Sluice 8080, the app 3000, nginx 8000).
import type { ChildProcess } from 'node:child_process'
import { spawn, spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const SHIPPED_NGINX_CONF = fileURLToPath(new URL('../../examples/nginx/sluice.conf', import.meta.url))
const nginxBinary = ['/usr/sbin/nginx', 'nginx'].find((bin) => spawnSync(bin, ['-v']).status === 0)

export interface RunningNginx {
  readonly port: number
  /** The site file nginx runs (the shipped file with the ports replaced). */
  readonly site: string
  stop(): Promise<void>
}

/** Resolves once something accepts connections on 127.0.0.1:`port`. */
export function waitForPort(port: number, timeoutMs: number): Promise<void> {
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

/**
 * Start a real nginx serving `site` (server blocks for its `http {}`), listening on `port`, from a
 * temporary prefix folder of its own; resolves once it accepts connections.
 */
export async function startNginx(site: string, port: number): Promise<RunningNginx> {
  if (nginxBinary === undefined)
    throw new Error('nginx is not installed: apt-get install -y nginx (.ci/run does)')
  const dir = mkdtempSync(join(tmpdir(), 'sluice-nginx-'))
  mkdirSync(join(dir, 'logs'))
  writeFileSync(join(dir, 'site.conf'), site)
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
      `  include ${dir}/site.conf;`,
      '}',
      '',
    ].join('\n'),
  )
  const nginx: ChildProcess = spawn(
    nginxBinary,
    ['-p', dir, '-e', join(dir, 'logs', 'startup.log'), '-c', join(dir, 'nginx.conf')],
    { stdio: 'ignore' },
  )
  try {
    await waitForPort(port, 10_000)
  } catch (error) {
    nginx.kill('SIGKILL')
    let log = ''
    try {
      log = readFileSync(join(dir, 'logs', 'startup.log'), 'utf8')
    } catch {}
    rmSync(dir, { recursive: true, force: true })
    throw new Error(`${(error as Error).message}; nginx said: ${log}`)
  }
  return {
    port,
    site,
    async stop() {
      if (nginx.exitCode === null) {
        const exited = new Promise((resolve) => nginx.once('exit', resolve))
        nginx.kill('SIGQUIT')
        await exited
      }
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

/**
 * Start nginx with a shipped site of examples/nginx/ (default sluice.conf) on `nginxPort`, asking
 * Sluice on `sluicePort` for `upstreamPort`.
 */
export function startShippedNginx(
  ports: {
    sluice: number
    upstream: number
    nginx: number
  },
  file = 'sluice.conf',
): Promise<RunningNginx> {
  const shipped = file === 'sluice.conf' ? SHIPPED_NGINX_CONF : join(SHIPPED_NGINX_CONF, '..', file)
  const site = readFileSync(shipped, 'utf8')
    .replaceAll('127.0.0.1:8080', `127.0.0.1:${ports.sluice}`)
    .replaceAll('127.0.0.1:3000', `127.0.0.1:${ports.upstream}`)
    .replaceAll('listen 127.0.0.1:8000', `listen 127.0.0.1:${ports.nginx}`)
  // The templating must have hit every port, or the test would silently use the defaults.
  for (const port of ['8080', '3000', '8000'])
    if (site.includes(`127.0.0.1:${port};`)) throw new Error(`port ${port} was not replaced`)
  return startNginx(site, ports.nginx)
}
