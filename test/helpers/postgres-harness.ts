// Starts a real PostgreSQL (Debian's postgresql package) for tests and benchmarks: initdb in a temp
// folder owned by the `postgres` user (initdb refuses root), pg_ctl on a free port below 32768,
// loopback only, no fsync. Stopped (immediate mode) on stop(), on process exit and on SIGINT/SIGTERM.
import { execFile, execFileSync } from 'node:child_process'
import { chmodSync, chownSync, copyFileSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { freePort } from './redis-harness.js'

const run = promisify(execFile)

export interface PostgresServer {
  port: number
  /** `postgres://sluice@127.0.0.1:PORT/postgres` (trust auth). */
  url: string
  dir: string
  /** Kill the server at once (SIGKILL of the postmaster and its children), keeping its data. */
  kill(): Promise<void>
  /** Start it again on the same port and data (after kill). */
  restart(): Promise<void>
  stop(): Promise<void>
}

/** The folder of Debian's initdb / pg_ctl (the newest installed major version). */
export function postgresBinDir(): string | undefined {
  const root = '/usr/lib/postgresql'
  if (!existsSync(root)) return undefined
  const versions = readdirSync(root)
    .filter((v) => /^\d+$/.test(v) && existsSync(join(root, v, 'bin', 'pg_ctl')))
    .sort((a, b) => Number(b) - Number(a))
  return versions[0] === undefined ? undefined : join(root, versions[0], 'bin')
}

const running = new Set<string>()
let hooked = false

function asPostgres(bin: string, args: string[]): string[] {
  // Tests run as root here; initdb and postgres refuse root, so run them as the postgres user.
  return process.getuid?.() === 0 ? ['-u', 'postgres', '--', bin, ...args] : [bin, ...args]
}

function pgCtl(bin: string, dataDir: string, args: string[]): [string, string[]] {
  const full = asPostgres(join(bin, 'pg_ctl'), ['-D', dataDir, ...args])
  return process.getuid?.() === 0 ? ['runuser', full] : [full[0]!, full.slice(1)]
}

function stopSync(bin: string, dir: string): void {
  try {
    const [cmd, args] = pgCtl(bin, join(dir, 'data'), ['-m', 'immediate', 'stop'])
    execFileSync(cmd, args, { stdio: 'ignore', timeout: 10_000 })
  } catch {
    // not running
  }
  rmSync(dir, { recursive: true, force: true })
}

function hookExit(bin: string): void {
  if (hooked) return
  hooked = true
  const stopAll = () => {
    for (const dir of running) stopSync(bin, dir)
    running.clear()
  }
  process.on('exit', stopAll)
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      stopAll()
      process.exit(130)
    })
  }
}

/** A server certificate and key (PEM files) for `ssl=on`; copied into the server's folder. */
export interface PostgresSslFiles {
  readonly cert: string
  readonly key: string
}

/** Start one PostgreSQL server on a free port (with `ssl`, also accepting TLS). About 2 s. */
export async function startPostgres(options: { ssl?: PostgresSslFiles } = {}): Promise<PostgresServer> {
  const bin = postgresBinDir()
  if (bin === undefined) throw new Error('postgres-harness: no PostgreSQL (apt-get install postgresql)')
  const dir = mkdtempSync(join(tmpdir(), 'sluice-pg-'))
  running.add(dir)
  hookExit(bin)
  const root = process.getuid?.() === 0
  if (root) {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim())
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim())
    chownSync(dir, uid, gid)
  }
  const dataDir = join(dir, 'data')
  const initdb = asPostgres(join(bin, 'initdb'), ['-D', dataDir, '-A', 'trust', '-U', 'sluice', '-E', 'UTF8'])
  await run(root ? 'runuser' : initdb[0]!, root ? initdb : initdb.slice(1))
  const port = await freePort()
  let sslSettings = ''
  if (options.ssl !== undefined) {
    // postgres reads its key only when the server's user owns it and no one else can read it.
    const cert = join(dir, 'server.crt')
    const key = join(dir, 'server.key')
    copyFileSync(options.ssl.cert, cert)
    copyFileSync(options.ssl.key, key)
    chmodSync(key, 0o600)
    if (root) {
      const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim())
      const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim())
      chownSync(cert, uid, gid)
      chownSync(key, uid, gid)
    }
    sslSettings = ` -c ssl=on -c ssl_cert_file=${cert} -c ssl_key_file=${key}`
  }
  const start = async () => {
    const [cmd, args] = pgCtl(bin, dataDir, [
      '-o',
      `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300${sslSettings}`,
      '-l',
      join(dir, 'log'),
      '-w',
      '-t',
      '30',
      'start',
    ])
    await run(cmd, args)
  }
  await start()
  const stopNow = async () => {
    const [cmd, args] = pgCtl(bin, dataDir, ['-m', 'immediate', 'stop'])
    await run(cmd, args).catch(() => {})
  }
  return {
    port,
    url: `postgres://sluice@127.0.0.1:${port}/postgres`,
    dir,
    async kill() {
      // Immediate mode: the postmaster SIGQUITs its children, no checkpoint: a crash as far as
      // clients can tell (connections drop, the next start runs recovery).
      await stopNow()
    },
    restart: start,
    async stop() {
      await stopNow()
      running.delete(dir)
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
