// The built `sluice` command (dist/cli.js, built by `npm test`) as a child process, its stdout and
// stderr collected together: what the CLI, redaction and eviction tests start and read.
import type { ChildProcess } from 'node:child_process'
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'

export const CLI = fileURLToPath(new URL('../../packages/sluice-server/dist/cli.js', import.meta.url))

export interface CliProcess {
  child: ChildProcess
  /** Everything printed so far, stdout and stderr interleaved. */
  output: () => string
  exited: Promise<number | null>
}

/**
 * Start `sluice <args>`. The store and admin variables of the environment running the tests are
 * cleared (a developer's REDIS_URL must not change what a test serves on); `env` sets them.
 */
export function startCli(args: string[], env: Record<string, string> = {}): CliProcess {
  const child = spawn(process.execPath, [CLI, ...args], {
    env: { ...process.env, SLUICE_STORE: '', REDIS_URL: '', SLUICE_ADMIN_TOKEN: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  const collect = (chunk: Buffer) => {
    out += chunk.toString()
  }
  child.stdout?.on('data', collect)
  child.stderr?.on('data', collect)
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  return { child, output: () => out, exited }
}

/**
 * The first group of `pattern` once a process has printed it: where a process started on port 0
 * says it listens. Rejects when the process exits first or nothing is printed within `withinMs` (a
 * bound for a loaded machine, not a measurement).
 */
export async function announcedUrl(
  proc: Pick<CliProcess, 'child' | 'output'>,
  pattern: RegExp,
  withinMs = 20_000,
): Promise<string> {
  const deadline = Date.now() + withinMs
  for (;;) {
    const m = pattern.exec(proc.output())
    if (m !== null) return m[1]!
    if (Date.now() > deadline || proc.child.exitCode !== null)
      throw new Error(`not listening: ${proc.output()}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

/** The URL `sluice serve` prints once it listens (see `announcedUrl`). */
export function servingUrl(cli: Pick<CliProcess, 'child' | 'output'>, withinMs = 20_000): Promise<string> {
  return announcedUrl(cli, /sluice serving on (https?:\/\/\S+)/, withinMs)
}
