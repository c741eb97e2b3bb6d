#!/usr/bin/env node
// Before `npm test`: the system servers the suites start (redis-server, nginx, chromium). As root
// with apt-get (a fresh CI image, a container), the missing ones are installed, as .ci/run does;
// otherwise the run stops at once with one line naming the exact install command, instead of a raw
// `spawn ENOENT` halfway through the suite.
import { spawnSync } from 'node:child_process'
import { accessSync, constants } from 'node:fs'
import { delimiter, join } from 'node:path'

/** What the suites need: the Debian package and where its program is looked for. */
export const NEEDED = [
  { pkg: 'redis-server', bins: ['redis-server', 'redis-cli'] },
  { pkg: 'nginx', bins: ['nginx'], extraDirs: [process.env.SLUICE_PREREQS_SBIN ?? '/usr/sbin'] },
  { pkg: 'chromium', paths: ['/usr/bin/chromium'] },
]

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
  return NEEDED.filter(
    (need) =>
      !(need.bins ?? []).every((bin) => onPath(bin, need.extraDirs)) || !(need.paths ?? []).every(executable),
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
