// Starts real redis-server processes for tests and benchmarks: one standalone server, or a
// 3-master/3-replica Redis Cluster, on free ports below 32768 (cluster bus = port + 10000 <= 32767).
// Every server is a child process killed on stop(), on process exit and on SIGINT/SIGTERM.
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { freePort } from './ports.js'

export { freePort }

const run = promisify(execFile)

export interface RedisServer {
  port: number
  url: string
  stop(): Promise<void>
}

export interface RedisClusterServers {
  /** All six node ports; masters and replicas are assigned by `redis-cli --cluster create`. */
  ports: number[]
  /** `redis://127.0.0.1:port` of each node. */
  urls: string[]
  /** Nodes for ioredis `new Cluster(nodes)`. */
  nodes: { host: string; port: number }[]
  /** Data directory: nodes-PORT.conf, redis-PORT.log. */
  dir: string
  /** The server process of a node (to kill it in failover tests). */
  process(port: number): ChildProcess
  stop(): Promise<void>
}

const live = new Set<ChildProcess>()
const dirs = new Set<string>()

/** Remove a server's data directory; never throws (a leftover temp dir must not fail a run). */
function removeDir(dir: string): void {
  dirs.delete(dir)
  try {
    rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 })
  } catch {
    // left in the OS temp dir
  }
}
let hooked = false

function hookExit(): void {
  if (hooked) return
  hooked = true
  const killAll = () => {
    for (const child of live) child.kill('SIGKILL')
    for (const dir of dirs) removeDir(dir)
  }
  process.on('exit', killAll)
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      killAll()
      process.exit(130)
    })
  }
}

export async function redisCli(port: number, ...args: string[]): Promise<string> {
  const { stdout } = await run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args])
  return stdout.trim()
}

/** A TLS cluster's server files: every node, its bus and its replication speak only TLS. */
export interface ClusterTlsFiles {
  readonly cert: string
  readonly key: string
  readonly ca: string
}

/** redis-server arguments for a TLS-only node on `port` (the plaintext port off). */
function tlsNodeArgs(port: number, tls: ClusterTlsFiles): string[] {
  return [
    ...['--port', '0', '--tls-port', String(port), '--tls-cluster', 'yes', '--tls-replication', 'yes'],
    ...['--tls-cert-file', tls.cert, '--tls-key-file', tls.key, '--tls-ca-cert-file', tls.ca],
    ...['--tls-auth-clients', 'no'],
  ]
}

export async function waitFor(what: string, timeoutMs: number, test: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    try {
      if (await test()) return
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error(`redis-harness: timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

/** redis-server arguments: loopback only, no persistence, files and log under `dir`. */
export function redisServerArgs(port: number, dir: string, extra: string[] = []): string[] {
  return [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    dir,
    '--logfile',
    join(dir, `redis-${port}.log`),
    ...extra,
  ]
}

function startServer(port: number, dir: string, extra: string[]): ChildProcess {
  return spawnRedisServer(redisServerArgs(port, dir, extra))
}

/** `redis-server ARGS` as a child process killed on stop, on process exit and on SIGINT/SIGTERM. */
export function spawnRedisServer(args: string[]): ChildProcess {
  const child = spawn('redis-server', args, { stdio: 'ignore' })
  live.add(child)
  child.once('exit', () => live.delete(child))
  hookExit()
  return child
}

export async function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  child.kill('SIGKILL')
  await exited
}

/** A redis-server on a free port (another if that one was taken meanwhile), answering PING. */
export async function startNode(
  dir: string,
  extra: (port: number) => string[],
  cliArgs: string[] = [],
): Promise<[number, ChildProcess]> {
  for (let attempt = 0; ; attempt++) {
    const port = await freePort()
    const child = startServer(port, dir, extra(port))
    try {
      await waitFor(
        `redis-server on ${port}`,
        5000,
        async () => (await redisCli(port, ...cliArgs, 'PING')) === 'PONG',
      )
      return [port, child]
    } catch (error) {
      // Another process took the port between the check and the start: try another one.
      await stopServer(child)
      if (attempt >= 3) throw error
    }
  }
}

/** Start one standalone redis-server on a free port; `extra`: more redis-server arguments. */
export async function startRedis(extra: string[] = []): Promise<RedisServer> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-redis-'))
  dirs.add(dir)
  const [port, child] = await startNode(dir, () => extra)
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    async stop() {
      await stopServer(child)
      removeDir(dir)
    },
  }
}

/**
 * Start a 3-master, 3-replica Redis Cluster on free ports and wait until it serves every slot.
 * With `tls`, every port speaks only TLS (clients, cluster bus, replication).
 */
export async function startCluster(options: { tls?: ClusterTlsFiles } = {}): Promise<RedisClusterServers> {
  const { tls } = options
  const cliArgs = tls === undefined ? [] : ['--tls', '--cacert', tls.ca]
  const dir = mkdtempSync(join(tmpdir(), 'sluice-cluster-'))
  dirs.add(dir)
  const children = new Map<number, ChildProcess>()
  const stop = async () => {
    await Promise.all([...children.values()].map(stopServer))
    removeDir(dir)
  }
  try {
    const started = await Promise.all(
      Array.from({ length: 6 }, () =>
        startNode(
          dir,
          (port) => [
            '--cluster-enabled',
            'yes',
            '--cluster-config-file',
            join(dir, `nodes-${port}.conf`),
            '--cluster-node-timeout',
            '2000',
            '--repl-diskless-sync-delay',
            '0',
            ...(tls === undefined ? [] : tlsNodeArgs(port, tls)),
          ],
          cliArgs,
        ),
      ),
    )
    for (const [port, child] of started) children.set(port, child)
    const ports = started.map(([port]) => port)
    await run('redis-cli', [
      ...cliArgs,
      '--cluster',
      'create',
      ...ports.map((p) => `127.0.0.1:${p}`),
      '--cluster-replicas',
      '1',
      '--cluster-yes',
    ])
    await waitFor('cluster_state:ok on every node', 20_000, async () => {
      const infos = await Promise.all(ports.map((p) => redisCli(p, ...cliArgs, 'CLUSTER', 'INFO')))
      return infos.every((info) => info.includes('cluster_state:ok'))
    })
    return {
      ports,
      urls: ports.map((p) => `redis://127.0.0.1:${p}`),
      nodes: ports.map((port) => ({ host: '127.0.0.1', port })),
      dir,
      process(port) {
        const child = children.get(port)
        if (child === undefined) throw new Error(`redis-harness: no cluster node on ${port}`)
        return child
      },
      stop,
    }
  } catch (error) {
    await stop()
    throw error
  }
}

/** One line of CLUSTER NODES: the node's port, its flags, and whether it serves slots. */
export interface ClusterNodeView {
  port: number
  flags: string[]
  servesSlots: boolean
}

/** Parse CLUSTER NODES as seen from one node. */
export async function clusterNodes(port: number): Promise<ClusterNodeView[]> {
  const text = await redisCli(port, 'CLUSTER', 'NODES')
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const f = line.split(' ')
      return {
        port: Number(f[1]!.split(':')[1]!.split('@')[0]),
        flags: f[2]!.split(','),
        servesSlots: f.length > 8,
      }
    })
}

/**
 * Wait until the topology is settled before killing a master: every node reports the same three
 * masters, each serving slots, and three replicas whose link to their master is up. Right after
 * `redis-cli --cluster create` a node can still call itself a master without slots (its CLUSTER
 * REPLICATE has not reached every node's view yet); killing that node kills no shard at all.
 */
export async function waitForReplicas(cluster: RedisClusterServers, timeoutMs = 10_000): Promise<void> {
  await waitFor('three masters with slots and three replicas in sync, on every node', timeoutMs, async () => {
    const infos = await Promise.all(cluster.ports.map((p) => redisCli(p, 'INFO', 'replication')))
    const replicasUp = infos.filter((i) => i.includes('role:slave') && i.includes('master_link_status:up'))
    if (replicasUp.length !== 3) return false
    const views = await Promise.all(cluster.ports.map(clusterNodes))
    return views.every((view) => {
      const masters = view.filter((n) => n.flags.includes('master') && n.servesSlots)
      const replicas = view.filter((n) => n.flags.includes('slave'))
      return (
        masters.length === 3 &&
        replicas.length === 3 &&
        view.every((n) => !n.flags.some((f) => f.startsWith('fail')))
      )
    })
  })
}
