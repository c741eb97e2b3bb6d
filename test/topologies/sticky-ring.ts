// The sticky-routing topology of docs/topologies.md as a test fixture: a real nginx running the
// SHIPPED examples/nginx/sticky.conf (only its ports replaced) in front of three real `sluice serve`
// processes, each on its own memory store with the SHIPPED examples/nginx/sticky.yaml, and a tiny app.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import type { Server } from 'node:http'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { hashedApiKey } from '../../packages/sluice/src/http/keys.js'
import type { CliProcess } from '../helpers/cli-process.js'
import { startCli } from '../helpers/cli-process.js'
import type { RunningNginx } from '../helpers/nginx-harness.js'
import { startNginx } from '../helpers/nginx-harness.js'
import { freePort, post } from '../helpers/service.js'

const example = (name: string) => fileURLToPath(new URL(`../../examples/nginx/${name}`, import.meta.url))
const SHIPPED_CONF = example('sticky.conf')
const SHIPPED_YAML = example('sticky.yaml')
// The shipped policy: api, fixed window of 10 per minute (a window opens at a key's first request,
// so no window boundary falls inside a test shorter than a minute).
export const LIMIT = 10
/** The shipped `fail_timeout`: how long nginx leaves a failed instance out before trying it again. */
export const FAIL_TIMEOUT_MS = 10_000
const EXAMPLE_PORTS = { sluice: [8081, 8082, 8083], app: 3000, nginx: 8000 }

/** The shipped site with its five ports replaced; every one must have been hit. */
function stickySite(ports: { sluice: number[]; app: number; nginx: number }): string {
  let site = readFileSync(SHIPPED_CONF, 'utf8')
  EXAMPLE_PORTS.sluice.forEach((port, i) => {
    site = site.replaceAll(`server 127.0.0.1:${port} `, `server 127.0.0.1:${ports.sluice[i]} `)
  })
  site = site
    .replaceAll('server 127.0.0.1:3000;', `server 127.0.0.1:${ports.app};`)
    .replaceAll('listen 127.0.0.1:8000;', `listen 127.0.0.1:${ports.nginx};`)
  for (const port of [...EXAMPLE_PORTS.sluice, EXAMPLE_PORTS.app, EXAMPLE_PORTS.nginx])
    if (new RegExp(`127\\.0\\.0\\.1:${port}[; ]`).test(site)) throw new Error(`port ${port} was not replaced`)
  if (!site.includes(`fail_timeout=${FAIL_TIMEOUT_MS / 1000}s;`))
    throw new Error(`the shipped fail_timeout is no longer ${FAIL_TIMEOUT_MS / 1000}s`)
  return site
}

interface Instance {
  readonly port: number
  readonly url: string
  proc: CliProcess
}

async function serve(file: string, port: number): Promise<CliProcess> {
  const proc = startCli(['serve', '--config', file, '--port', String(port)])
  const url = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 10_000
  while (!proc.output().includes(`sluice serving on ${url}`)) {
    if (proc.child.exitCode !== null || Date.now() > deadline)
      throw new Error(`sluice serve did not start:\n${proc.output()}`)
    await new Promise((r) => setTimeout(r, 50))
  }
  return proc
}

const alive = (proc: CliProcess) => proc.child.exitCode === null && proc.child.signalCode === null

export interface StickyRing {
  readonly nginxPort: number
  /** Requests that reached the app (nginx's auth subrequest said yes). */
  appHits(): number
  /**
   * `perKey` requests for every key through nginx (each key in order, 8 keys at a time): admits
   * per key, and every status seen.
   */
  drain(
    keys: readonly string[],
    perKey: number,
  ): Promise<{ admitted: Map<string, number>; statuses: number[] }>
  /** Units each instance has counted for each key (LIMIT - remaining; undefined: instance dead). */
  usedByKey(keys: readonly string[]): Promise<Map<string, (number | undefined)[]>>
  kill(index: number): Promise<void>
  /** Start instance `index` again on its port: a new process, an empty memory store. */
  restart(index: number): Promise<void>
  stop(): Promise<void>
}

export async function startStickyRing(): Promise<StickyRing> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-sticky-'))
  const yaml = join(dir, 'sticky.yaml')
  writeFileSync(yaml, readFileSync(SHIPPED_YAML, 'utf8'))
  const instances: Instance[] = []
  let app: Server | undefined
  let nginx: RunningNginx | undefined
  let appHits = 0

  async function stop() {
    await nginx?.stop()
    // Not `app?.close(resolve)`: with no app (a setup that failed early) that promise never settles.
    const server = app
    if (server !== undefined) await new Promise((resolve) => server.close(resolve))
    for (const { proc } of instances) {
      if (alive(proc)) {
        proc.child.kill('SIGKILL')
        await proc.exited
      }
    }
    rmSync(dir, { recursive: true, force: true })
  }

  try {
    const ports = [await freePort(), await freePort(), await freePort()]
    const procs = await Promise.all(ports.map((port) => serve(yaml, port)))
    ports.forEach((port, i) => {
      instances.push({ port, url: `http://127.0.0.1:${port}`, proc: procs[i]! })
    })
    const server = createServer((_req, res) => {
      appHits++
      res.writeHead(200, { 'content-type': 'text/plain' }).end('app ok')
    })
    app = server
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const nginxPort = await freePort()
    nginx = await startNginx(
      stickySite({ sluice: ports, app: (server.address() as AddressInfo).port, nginx: nginxPort }),
      nginxPort,
    )
  } catch (error) {
    await stop()
    throw error
  }
  const nginxPort = nginx.port

  async function usedOn(key: string): Promise<(number | undefined)[]> {
    return Promise.all(
      instances.map(async ({ url, proc }) => {
        if (!alive(proc)) return undefined
        const peek = await post(`${url}/v1/peek`, { policy: 'api', key: hashedApiKey(key) })
        return LIMIT - (peek.body as { remaining: number }).remaining
      }),
    )
  }

  return {
    nginxPort,
    appHits: () => appHits,
    async drain(keys, perKey) {
      const admitted = new Map<string, number>()
      const statuses = new Set<number>()
      let next = 0
      const worker = async () => {
        while (next < keys.length) {
          const key = keys[next++]!
          let count = 0
          for (let i = 0; i < perKey; i++) {
            const res = await fetch(`http://127.0.0.1:${nginxPort}/orders`, { headers: { 'x-api-key': key } })
            await res.arrayBuffer()
            statuses.add(res.status)
            if (res.status === 200) count++
          }
          admitted.set(key, count)
        }
      }
      await Promise.all(Array.from({ length: 8 }, worker))
      return { admitted, statuses: [...statuses].sort() }
    },
    async usedByKey(keys) {
      const usage = new Map<string, (number | undefined)[]>()
      for (let i = 0; i < keys.length; i += 8)
        await Promise.all(keys.slice(i, i + 8).map(async (key) => usage.set(key, await usedOn(key))))
      return usage
    },
    async kill(index) {
      const { proc } = instances[index]!
      proc.child.kill('SIGKILL')
      await proc.exited
    },
    async restart(index) {
      const instance = instances[index]!
      if (alive(instance.proc)) throw new Error(`instance ${index} is still running`)
      instance.proc = await serve(yaml, instance.port)
    },
    stop,
  }
}
