// `npm test` starts with scripts/test-prereqs.mjs: on a machine without the system servers the suites
// need, it stops at once with one line naming the install command (or installs them as root).
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const SCRIPT = fileURLToPath(new URL('../../scripts/test-prereqs.mjs', import.meta.url))

function run(env: Record<string, string>) {
  return spawnSync(process.execPath, [SCRIPT], { env, encoding: 'utf8', timeout: 10_000 })
}

describe('the pre-test check', () => {
  it('passes silently when every server is installed', () => {
    const r = run({ PATH: process.env.PATH ?? '' })
    expect(r.stderr).toBe('')
    expect(r.status).toBe(0)
  })

  it('stops with one line naming the exact install command when servers are missing', () => {
    // No redis-server or nginx on this PATH (and /usr/sbin is where nginx lives: the script looks
    // there too, so point it at an empty PATH and forbid installs).
    const r = run({ PATH: '/nonexistent', SLUICE_NO_INSTALL: '1', SLUICE_PREREQS_SBIN: '/nonexistent' })
    expect(r.status).toBe(1)
    const lines = r.stderr.trim().split('\n')
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/^npm test: the test suites need redis-server, nginx/)
    expect(lines[0]).toMatch(/apt-get install -y redis-server nginx/)
    expect(r.stderr).not.toMatch(/ENOENT|at .*\.mjs/)
  })

  it('names Go and the Python packages of the client examples when they are missing', () => {
    // No go on this PATH, and a Python that does not exist (the examples' tests use SLUICE_PYTHON's).
    const r = run({
      PATH: '/nonexistent',
      SLUICE_NO_INSTALL: '1',
      SLUICE_PREREQS_SBIN: '/nonexistent',
      SLUICE_PYTHON: '/nonexistent/python3',
    })
    expect(r.status).toBe(1)
    const lines = r.stderr.trim().split('\n')
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(
      /need redis-server, nginx, golang-go, python3-fastapi, python3-uvicorn, python3-httpx\b/,
    )
    expect(lines[0]).toMatch(
      /sudo apt-get install -y redis-server nginx golang-go python3-fastapi python3-uvicorn python3-httpx\b/,
    )
  })

  it('names memcached (test/stores/memcached starts one) when it is missing', () => {
    const r = run({ PATH: '/nonexistent', SLUICE_NO_INSTALL: '1', SLUICE_PREREQS_SBIN: '/nonexistent' })
    expect(r.status).toBe(1)
    expect(r.stderr).toMatch(/need [^;]*\bmemcached\b[^;]*;/)
    expect(r.stderr).toMatch(/apt-get install -y [^\n]*\bmemcached\b/)
  })

  it('names openssl (the TLS tests make their certificates with it) when it is missing', () => {
    const r = run({ PATH: '/nonexistent', SLUICE_NO_INSTALL: '1', SLUICE_PREREQS_SBIN: '/nonexistent' })
    expect(r.status).toBe(1)
    expect(r.stderr).toMatch(/need [^;]*\bopenssl\b[^;]*;/)
    expect(r.stderr).toMatch(/apt-get install -y [^\n]*\bopenssl\b/)
  })

  it('names postgresql when no PostgreSQL server programs are installed', () => {
    const r = run({
      PATH: process.env.PATH ?? '',
      SLUICE_NO_INSTALL: '1',
      SLUICE_PREREQS_PGROOT: '/nonexistent',
    })
    expect(r.status).toBe(1)
    expect(r.stderr).toBe(
      'npm test: the test suites need postgresql; install it first: sudo apt-get install -y postgresql\n',
    )
  })

  it('checks the Python packages by importing them with the Python the tests use', () => {
    // Every program is on PATH; only the Python modules are missing (this Python has none of them).
    const r = run({
      PATH: process.env.PATH ?? '',
      SLUICE_NO_INSTALL: '1',
      SLUICE_PYTHON: '/nonexistent/python3',
    })
    expect(r.status).toBe(1)
    expect(r.stderr).toBe(
      'npm test: the test suites need python3-fastapi, python3-uvicorn, python3-httpx; install them first: sudo apt-get install -y python3-fastapi python3-uvicorn python3-httpx\n',
    )
  })
})
