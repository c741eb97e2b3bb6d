// Sticky routing without a shared store (issue 17): a real nginx runs the SHIPPED
// examples/nginx/sticky.conf (only its ports replaced) in front of three real `sluice serve`
// processes, each on its own memory store with the SHIPPED examples/nginx/sticky.yaml. Per-key
// limits are exact through nginx; then one instance is SIGKILLed and what its keys lose is measured
// (the figures go to docs/topologies.md).
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import type { Server } from 'node:http'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { hashedApiKey } from '../../src/http/keys.js'
import type { CliProcess } from '../helpers/cli-process.js'
import { startCli } from '../helpers/cli-process.js'
import type { RunningNginx } from '../helpers/nginx-harness.js'
import { startNginx } from '../helpers/nginx-harness.js'
import { freePort, post } from '../service/helpers.js'

const example = (name: string) => fileURLToPath(new URL(`../../examples/nginx/${name}`, import.meta.url))
const SHIPPED_CONF = example('sticky.conf')
const SHIPPED_YAML = example('sticky.yaml')
// The shipped policy: api, fixed window of 10 per minute (a window opens at a key's first request,
// so no window boundary falls inside this test).
const LIMIT = 10
const KEYS = Array.from({ length: 60 }, (_, i) => `sk_test_${String(i).padStart(3, '0')}`)
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
  return site
}

/** nginx 1.23 and later join repeated headers in $http_*; 1.22 (Debian 12) reads the first line. */
function nginxJoinsRepeatedHeaders(): boolean {
  // The binary the harness runs: /usr/sbin/nginx, else nginx on PATH. `nginx -v` prints to stderr.
  const out = ['/usr/sbin/nginx', 'nginx']
    .map((bin) => spawnSync(bin, ['-v'], { encoding: 'utf8' }))
    .find((run) => run.status === 0)
  const version = /nginx\/(\d+)\.(\d+)/.exec(out?.stderr ?? '')
  if (version === null) throw new Error(`cannot read the nginx version: ${out?.stderr}`)
  const [major, minor] = [Number(version[1]), Number(version[2])]
  return major > 1 || minor >= 23
}

interface Instance {
  port: number
  url: string
  proc: CliProcess
}

async function serve(file: string, port: number): Promise<Instance> {
  const proc = startCli(['serve', '--config', file, '--port', String(port)])
  const url = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 10_000
  while (!proc.output().includes(`sluice serving on ${url}`)) {
    if (proc.child.exitCode !== null || Date.now() > deadline)
      throw new Error(`sluice serve did not start:\n${proc.output()}`)
    await new Promise((r) => setTimeout(r, 50))
  }
  return { port, url, proc }
}

describe('sticky routing: nginx consistent hash over three sluice serve instances, memory stores', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-sticky-'))
  let instances: Instance[] = []
  let app: Server | undefined
  let nginx: RunningNginx | undefined
  let appHits = 0
  /** Which instance (index) counted each key before the kill. */
  const homeBefore = new Map<string, number>()
  let victim = -1

  beforeAll(async () => {
    const yaml = join(dir, 'sticky.yaml')
    writeFileSync(yaml, readFileSync(SHIPPED_YAML, 'utf8'))
    const ports = [await freePort(), await freePort(), await freePort()]
    instances = await Promise.all(ports.map((port) => serve(yaml, port)))
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
  })

  afterAll(async () => {
    await nginx?.stop()
    // Not `app?.close(resolve)`: with no app (a setup that failed early) that promise never settles.
    const server = app
    if (server !== undefined) await new Promise((resolve) => server.close(resolve))
    for (const { proc } of instances) {
      if (proc.child.exitCode === null) {
        proc.child.kill('SIGKILL')
        await proc.exited
      }
    }
    rmSync(dir, { recursive: true, force: true })
  })

  /** `perKey` requests for every key through nginx (each key in order, 8 keys at a time): admits per key. */
  async function drain(keys: readonly string[], perKey: number): Promise<Map<string, number>> {
    const admitted = new Map<string, number>()
    const statuses = new Set<number>()
    let next = 0
    const worker = async () => {
      while (next < keys.length) {
        const key = keys[next++]!
        let count = 0
        for (let i = 0; i < perKey; i++) {
          const res = await fetch(`http://127.0.0.1:${nginx!.port}/orders`, { headers: { 'x-api-key': key } })
          await res.arrayBuffer()
          statuses.add(res.status)
          if (res.status === 200) count++
        }
        admitted.set(key, count)
      }
    }
    await Promise.all(Array.from({ length: 8 }, worker))
    // Only allow and deny: a dead instance never surfaces as an error to the client.
    expect([...statuses].sort()).toEqual([200, 429])
    return admitted
  }

  /** What each live instance has counted for `key`: units used (LIMIT - remaining), by instance index. */
  async function usedOn(key: string): Promise<(number | undefined)[]> {
    return Promise.all(
      instances.map(async ({ url, proc }) => {
        if (proc.child.exitCode !== null || proc.child.signalCode !== null) return undefined
        const peek = await post(`${url}/v1/peek`, { policy: 'api', key: hashedApiKey(key) })
        return LIMIT - (peek.body as { remaining: number }).remaining
      }),
    )
  }

  /** usedOn for every key, 8 keys at a time. */
  async function usedByKey(): Promise<Map<string, (number | undefined)[]>> {
    const usage = new Map<string, (number | undefined)[]>()
    for (let i = 0; i < KEYS.length; i += 8)
      await Promise.all(KEYS.slice(i, i + 8).map(async (key) => usage.set(key, await usedOn(key))))
    return usage
  }

  it(`admits exactly ${LIMIT} per key through nginx, each key counted on exactly one instance`, async () => {
    const admitted = await drain(KEYS, LIMIT + 1)
    for (const key of KEYS) expect(admitted.get(key), key).toBe(LIMIT)
    expect(appHits).toBe(KEYS.length * LIMIT)
    const perInstance = [0, 0, 0]
    const usage = await usedByKey()
    for (const key of KEYS) {
      const used = usage.get(key)!
      // One instance has the whole count; the other two never saw the key.
      expect(used.filter((u) => u === LIMIT).length, key).toBe(1)
      expect(used.filter((u) => u === 0).length, key).toBe(2)
      const home = used.indexOf(LIMIT)
      homeBefore.set(key, home)
      perInstance[home]!++
    }
    // The hash spreads the keys: every instance counts some.
    for (const n of perInstance) expect(n).toBeGreaterThan(0)
    console.log(`sticky: keys per instance before the kill: ${perInstance.join(' / ')} of ${KEYS.length}`)
  })

  it('SIGKILL of one instance: only its keys move, each gets at most LIMIT more; the rest stay exact', async () => {
    expect(homeBefore.size).toBe(KEYS.length)
    // The instance with the most keys, so the measured share is the worst of the three.
    const counts = [0, 1, 2].map((i) => [...homeBefore.values()].filter((h) => h === i).length)
    victim = counts.indexOf(Math.max(...counts))
    const dead = instances[victim]!.proc
    dead.child.kill('SIGKILL')
    await dead.exited

    // The same window (1 minute from each key's first request): every key asks again.
    const started = Date.now()
    const admitted = await drain(KEYS, LIMIT + 1)
    const elapsedMs = Date.now() - started
    const moved = KEYS.filter((key) => homeBefore.get(key) === victim)
    const stayed = KEYS.filter((key) => homeBefore.get(key) !== victim)
    expect(moved.length).toBeGreaterThan(0)
    expect(stayed.length).toBeGreaterThan(0)

    // Keys whose instance lives: exact over the whole window (nothing more after their LIMIT).
    for (const key of stayed) expect(admitted.get(key), key).toBe(0)
    // Keys of the dead instance: their counters restart on the next instance of the ring, so each
    // gets LIMIT more in its window; never more than that (the bound).
    for (const key of moved) expect(admitted.get(key), key).toBe(LIMIT)

    const newHomes = [0, 0, 0]
    const usage = await usedByKey()
    for (const key of KEYS) {
      const used = usage.get(key)!
      expect(used[victim]).toBeUndefined()
      const live = used.filter((u) => u !== undefined)
      // Still on exactly one instance: a moved key on one survivor, never split over both.
      expect(live.filter((u) => u === LIMIT).length, key).toBe(1)
      expect(live.filter((u) => u === 0).length, key).toBe(1)
      const home = used.indexOf(LIMIT)
      // Consistent hashing: a key whose instance is alive did not move.
      if (homeBefore.get(key) !== victim) expect(home, key).toBe(homeBefore.get(key))
      else newHomes[home]!++
    }
    const extra = moved.reduce((sum, key) => sum + admitted.get(key)!, 0)
    console.log(
      `sticky: killed instance ${victim}; keys moved: ${moved.length} of ${KEYS.length} ` +
        `(${((100 * moved.length) / KEYS.length).toFixed(1)}%), to the survivors: ${newHomes
          .filter((_, i) => i !== victim)
          .join(' / ')}; extra admits per moved key: ${extra / moved.length} (limit ${LIMIT}); ` +
        `extra admits per stayed key: 0; total admitted ${KEYS.length * LIMIT + extra} for a budget of ` +
        `${KEYS.length * LIMIT} (+${((100 * extra) / (KEYS.length * LIMIT)).toFixed(1)}%); ` +
        `second pass ${KEYS.length * (LIMIT + 1)} requests in ${elapsedMs} ms`,
    )
  })

  it('a request without an API key is a 401 from nginx: no instance is asked, the app is not reached', async () => {
    const hitsBefore = appHits
    const res = await fetch(`http://127.0.0.1:${nginx!.port}/orders`)
    await res.arrayBuffer()
    // Without the guard, Sluice's 400 missing_key would reach the client as a 500.
    expect(res.status).toBe(401)
    expect(appHits).toBe(hitsBefore)
  })

  it('a second X-Api-Key line from the client reaches Sluice as nothing: it counts what nginx hashed', async () => {
    // A stayed key, exhausted above; raw requests carry the key twice, the second varying each time.
    const key = KEYS.find((k) => homeBefore.get(k) !== victim)!
    const raw = (second: string) =>
      new Promise<number>((resolve, reject) => {
        const socket = connect(nginx!.port, '127.0.0.1')
        let reply = ''
        socket.on('data', (chunk) => {
          reply += chunk.toString()
        })
        socket.on('end', () => resolve(Number(reply.split(' ')[1])))
        socket.on('error', reject)
        socket.write(
          `GET /orders HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Api-Key: ${key}\r\nX-Api-Key: ${second}\r\n` +
            `X-Forwarded-For: 198.51.100.${second.length}\r\nConnection: close\r\n\r\n`,
        )
      })
    const statuses: number[] = []
    for (let i = 0; i < 5; i++) statuses.push(await raw(`other-${i}`))
    if (nginxJoinsRepeatedHeaders()) {
      // nginx 1.23+: hashed and sent as "key, other-i", a new key of its own on one instance.
      expect(statuses).toEqual([200, 200, 200, 200, 200])
    } else {
      // nginx 1.22: both the hash and the header are the first line, the exhausted key.
      expect(statuses).toEqual([429, 429, 429, 429, 429])
      for (let i = 0; i < 5; i++) {
        const used = await usedOn(`${key}, other-${i}`)
        expect(used.filter((u) => u !== undefined && u > 0)).toEqual([])
      }
    }
    const used = await usedOn(key)
    expect(used.filter((u) => u === LIMIT).length).toBe(1)
  })
})
