// Starts real memcached processes for tests and benchmarks on free ports below 32768. Every server
// is a child process killed on stop(), on process exit and on SIGINT/SIGTERM.
import { type ChildProcess, spawn } from 'node:child_process'
import { connect } from 'node:net'
import { freePort } from './redis-harness.js'

export interface MemcachedServer {
  port: number
  /** `host:port`, what memjs.Client.create takes. */
  address: string
  /** The server process (to kill it in fault tests). */
  process(): ChildProcess
  /** Start a fresh (empty) memcached on the same port after a kill. */
  restart(): Promise<void>
  stop(): Promise<void>
}

const live = new Set<ChildProcess>()
let hooked = false

function hookExit(): void {
  if (hooked) return
  hooked = true
  const killAll = () => {
    for (const child of live) child.kill('SIGKILL')
  }
  process.on('exit', killAll)
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      killAll()
      process.exit(130)
    })
  }
}

/** True when a memcached answers `version` on the port. */
export function memcachedAnswers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(500, () => done(false))
    socket.once('error', () => done(false))
    socket.once('connect', () => socket.write('version\r\n'))
    socket.once('data', (data) => done(data.toString().startsWith('VERSION')))
  })
}

function spawnServer(port: number): ChildProcess {
  // -U 0: no UDP; -u nobody: memcached refuses to run as root without it; -t 1: one worker thread
  // is plenty here and leaves the cores to the tests.
  const child = spawn(
    'memcached',
    ['-u', 'nobody', '-l', '127.0.0.1', '-p', String(port), '-U', '0', '-t', '1', '-m', '64'],
    { stdio: 'ignore' },
  )
  live.add(child)
  child.once('exit', () => live.delete(child))
  hookExit()
  return child
}

async function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  child.kill('SIGKILL')
  await exited
}

async function waitUp(port: number, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 5000
  while (!(await memcachedAnswers(port))) {
    if (child.exitCode !== null || Date.now() > deadline)
      throw new Error(`memcached-harness: memcached on ${port} did not start`)
    await new Promise((r) => setTimeout(r, 25))
  }
}

/** Start one memcached on a free port. */
export async function startMemcached(): Promise<MemcachedServer> {
  for (let attempt = 0; ; attempt++) {
    const port = await freePort()
    let child = spawnServer(port)
    try {
      await waitUp(port, child)
    } catch (error) {
      // Another process took the port between the check and the start: try another one.
      await kill(child)
      if (attempt >= 3) throw error
      continue
    }
    return {
      port,
      address: `127.0.0.1:${port}`,
      process: () => child,
      async restart() {
        await kill(child)
        child = spawnServer(port)
        await waitUp(port, child)
      },
      async stop() {
        await kill(child)
      },
    }
  }
}
