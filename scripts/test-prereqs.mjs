#!/usr/bin/env node
// Before `npm test`: the system servers the suites start (redis-server, nginx, chromium, memcached,
// postgresql), and Go and
// Python's fastapi, uvicorn and httpx for the client examples (test/clients). As root
// with apt-get (a fresh CI image, a container), the missing ones are installed, as .ci/run does;
// otherwise the run stops at once with one line naming the exact install command, instead of a raw
// `spawn ENOENT` halfway through the suite.
import { spawnSync } from 'node:child_process'
import { accessSync, constants, readdirSync } from 'node:fs'
import { delimiter, join } from 'node:path'

/**
 * What the suites need: the Debian package and where its program is looked for, or the Python
 * module it provides (imported by the Python of `pythonForTests`).
 */
export const NEEDED = [
  { pkg: 'redis-server', bins: ['redis-server', 'redis-cli'] },
  { pkg: 'nginx', bins: ['nginx'], extraDirs: [process.env.SLUICE_PREREQS_SBIN ?? '/usr/sbin'] },
  { pkg: 'chromium', paths: ['/usr/bin/chromium'] },
  { pkg: 'golang-go', bins: ['go'] },
  { pkg: 'python3-fastapi', pythonModule: 'fastapi' },
  { pkg: 'python3-uvicorn', pythonModule: 'uvicorn' },
  { pkg: 'python3-httpx', pythonModule: 'httpx' },
  { pkg: 'memcached', bins: ['memcached'] },
  // The TLS tests (stores, listeners, Sentinel) make their certificates with it.
  { pkg: 'openssl', bins: ['openssl'] },
  // test/helpers/postgres-harness.ts runs initdb and pg_ctl of Debian's newest installed major version.
  { pkg: 'postgresql', anyOf: postgresPrograms },
]

/** pg_ctl of every PostgreSQL major version Debian installed (none: an empty list). */
function postgresPrograms() {
  const root = process.env.SLUICE_PREREQS_PGROOT ?? '/usr/lib/postgresql'
  try {
    return readdirSync(root).map((version) => join(root, version, 'bin', 'pg_ctl'))
  } catch {
    return []
  }
}

/**
 * The Python that sees Debian's python3-* packages: SLUICE_PYTHON, else /usr/bin/python3 (a pyenv
 * or venv python3 earlier on PATH would not see them), else python3. test/clients/helpers.ts uses
 * the same rule.
 */
export function pythonForTests() {
  const chosen = process.env.SLUICE_PYTHON
  if (chosen !== undefined && chosen !== '') return chosen
  return executable('/usr/bin/python3') ? '/usr/bin/python3' : 'python3'
}

/** The modules among `modules` that the tests' Python cannot import (all of them without a Python). */
function missingPythonModules(modules) {
  if (modules.length === 0) return []
  const script = 'import sys\nfor m in sys.argv[1:]:\n  try: __import__(m)\n  except Exception: print(m)\n'
  const result = spawnSync(pythonForTests(), ['-c', script, ...modules], {
    encoding: 'utf8',
    timeout: 30_000,
  })
  if (result.status !== 0) return modules
  return result.stdout.split('\n').filter((line) => line !== '')
}

function executable(path) {
  try {
    accessSync(path, constants.X_OK)
    return true
  } catch {
    return false
  }
}

function onPath(bin, extraDirs = []) {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), ...extraDirs]
  return dirs.some((dir) => dir !== '' && executable(join(dir, bin)))
}

/** The packages whose programs are missing on this machine. */
export function missingPackages() {
  const modules = missingPythonModules(NEEDED.flatMap((need) => need.pythonModule ?? []))
  return NEEDED.filter(
    (need) =>
      !(need.bins ?? []).every((bin) => onPath(bin, need.extraDirs)) ||
      !(need.paths ?? []).every(executable) ||
      (need.anyOf !== undefined && !need.anyOf().some(executable)) ||
      (need.pythonModule !== undefined && modules.includes(need.pythonModule)),
  ).map((need) => need.pkg)
}

function main() {
  const missing = missingPackages()
  if (missing.length === 0) return
  const command = `apt-get install -y ${missing.join(' ')}`
  const root = typeof process.getuid === 'function' && process.getuid() === 0
  const apt = onPath('apt-get')
  if (!root || !apt || process.env.SLUICE_NO_INSTALL === '1') {
    process.stderr.write(
      `npm test: the test suites need ${missing.join(', ')}; install ${missing.length === 1 ? 'it' : 'them'} first: sudo ${command}\n`,
    )
    process.exit(1)
  }
  process.stderr.write(`npm test: installing ${missing.join(', ')} (${command})\n`)
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
  for (const args of [['update'], ['install', '-y', ...missing]]) {
    const result = spawnSync('apt-get', args, { stdio: ['ignore', 'ignore', 'inherit'], env })
    if (result.status !== 0) {
      process.stderr.write(`npm test: apt-get ${args.join(' ')} failed; run: ${command}\n`)
      process.exit(1)
    }
  }
  // A package install can start a system redis-server or nginx; the tests start their own on free
  // ports and leave those alone.
  const still = missingPackages()
  if (still.length > 0) {
    process.stderr.write(`npm test: still missing after apt-get: ${still.join(', ')}\n`)
    process.exit(1)
  }
}

main()
