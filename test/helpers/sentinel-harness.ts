// A Redis Sentinel group for tests: a master, one replica and three sentinels (quorum 2), each a
// redis-server child process on a free port below 32768 started through redis-harness.ts, all in one
// temporary folder removed on stop(). The sentinels notice a dead master after 1 s and fail over.
import type { ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  freePort,
  redisCli,
  redisServerArgs,
  spawnRedisServer,
  startNode,
  stopServer,
  waitFor,
} from './redis-harness.js'

export const MASTER_NAME = 'mymaster'

export interface SentinelGroupOptions {
  /** The data nodes' password (`requirepass`; the replica and the sentinels are given it). */
  password?: string
  /** The sentinels' own password (`requirepass` on each sentinel, `sentinel sentinel-pass` between them). */
  sentinelPassword?: string
}

export interface SentinelGroup {
  /** The name the sentinels monitor the master by. */
  readonly masterName: string
  /** The sentinels' ports. */
  readonly sentinelPorts: readonly number[]
  /** `redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/mymaster` (no credentials) */
  readonly url: string
  /** The data nodes' ports: the master and the replica as started. */
  readonly masterPort: number
  readonly replicaPort: number
  /** The server process of a data node (to SIGKILL the master). */
  process(port: number): ChildProcess
  /** redis-cli to a data node or a sentinel, with its password. */
  cli(port: number, ...args: string[]): Promise<string>
  /** The master's port as the first sentinel that answers names it. */
  masterNamed(): Promise<number>
  /** Resolves when every sentinel names `port` as the master and its replica's link is up. */
  settled(port: number, timeoutMs?: number): Promise<void>
  /**
   * The replica becomes the master and the master its replica, with REPLICAOF, and the sentinels
   * are pointed at the new master. Unlike a Sentinel failover, no client connection is closed: a
   * client still connected to the old master gets READONLY for every write.
   */
  swapWithoutFailover(): Promise<void>
  stop(): Promise<void>
}

/** redis-cli with a password when there is one. */
function cli(password: string | undefined, port: number, ...args: string[]): Promise<string> {
  return password === undefined
    ? redisCli(port, ...args)
    : redisCli(port, '--no-auth-warning', '-a', password, ...args)
}

/** `redis-cli SENTINEL MASTER name` as a map of its fields. */
async function sentinelMaster(password: string | undefined, port: number): Promise<Map<string, string>> {
  const lines = (await cli(password, port, 'SENTINEL', 'MASTER', MASTER_NAME)).split('\n')
  const fields = new Map<string, string>()
  for (let i = 0; i + 1 < lines.length; i += 2) fields.set(lines[i]!, lines[i + 1]!)
  return fields
}

function sentinelConfig(
  port: number,
  dir: string,
  masterPort: number,
  options: SentinelGroupOptions,
): string {
  const { password, sentinelPassword } = options
  return [
    `port ${port}`,
    'bind 127.0.0.1',
    `dir ${dir}`,
    `logfile ${join(dir, `sentinel-${port}.log`)}`,
    `sentinel monitor ${MASTER_NAME} 127.0.0.1 ${masterPort} 2`,
    `sentinel down-after-milliseconds ${MASTER_NAME} 1000`,
    `sentinel failover-timeout ${MASTER_NAME} 4000`,
    ...(password === undefined ? [] : [`sentinel auth-pass ${MASTER_NAME} ${password}`]),
    ...(sentinelPassword === undefined
      ? []
      : [`requirepass ${sentinelPassword}`, `sentinel sentinel-pass ${sentinelPassword}`]),
    '',
  ].join('\n')
}

/** Start a sentinel (its config file written in `dir`: sentinels rewrite it) and wait for PING. */
async function startSentinel(
  dir: string,
  masterPort: number,
  options: SentinelGroupOptions,
): Promise<[number, ChildProcess]> {
  for (let attempt = 0; ; attempt++) {
    const port = await freePort()
    const file = join(dir, `sentinel-${port}.conf`)
    writeFileSync(file, sentinelConfig(port, dir, masterPort, options))
    const child = spawnRedisServer([file, '--sentinel'])
    try {
      await waitFor(
        `sentinel on ${port}`,
        5000,
        async () => (await cli(options.sentinelPassword, port, 'PING')) === 'PONG',
      )
      return [port, child]
    } catch (error) {
      await stopServer(child)
      if (attempt >= 3) throw error
    }
  }
}

async function configureAuth(port: number, password: string): Promise<void> {
  await redisCli(port, 'CONFIG', 'SET', 'requirepass', password, 'masterauth', password)
}

/** Start a master, a replica and three sentinels, and wait until the sentinels know each other. */
export async function startSentinelGroup(options: SentinelGroupOptions = {}): Promise<SentinelGroup> {
  const { password, sentinelPassword } = options
  const dir = mkdtempSync(join(tmpdir(), 'sluice-sentinel-'))
  const children = new Map<number, ChildProcess>()
  const sentinels: ChildProcess[] = []
  const stop = async () => {
    await Promise.all([...children.values(), ...sentinels].map(stopServer))
    rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 })
  }
  try {
    // startNode PINGs without a password: each node gets its password once it answered.
    const [masterPort, master] = await startNode(dir, () => ['--repl-diskless-sync-delay', '0'])
    if (password !== undefined) await configureAuth(masterPort, password)
    children.set(masterPort, master)
    const [replicaPort, replica] = await startNode(dir, () => [
      '--replicaof',
      '127.0.0.1',
      String(masterPort),
      '--repl-diskless-sync-delay',
      '0',
      ...(password === undefined ? [] : ['--masterauth', password]),
    ])
    children.set(replicaPort, replica)
    if (password !== undefined) await configureAuth(replicaPort, password)
    const sentinelPorts: number[] = []
    for (let i = 0; i < 3; i++) {
      const [port, child] = await startSentinel(dir, masterPort, options)
      sentinelPorts.push(port)
      sentinels.push(child)
    }

    const masterNamed = async () => {
      for (const port of sentinelPorts) {
        try {
          const answer = (
            await cli(sentinelPassword, port, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', MASTER_NAME)
          ).split('\n')
          if (answer.length === 2) return Number(answer[1])
        } catch {
          // that sentinel is not answering: ask the next
        }
      }
      throw new Error('sentinel-harness: no sentinel names the master')
    }
    const settled = (port: number, timeoutMs = 20_000) =>
      waitFor(
        `every sentinel to name ${port} with its replica and the two other sentinels`,
        timeoutMs,
        async () => {
          const views = await Promise.all(sentinelPorts.map((p) => sentinelMaster(sentinelPassword, p)))
          const replicaInfo = await cli(
            password,
            port === masterPort ? replicaPort : masterPort,
            'INFO',
            'replication',
          )
          return (
            replicaInfo.includes(`master_port:${port}`) &&
            replicaInfo.includes('master_link_status:up') &&
            views.every(
              (v) =>
                v.get('port') === String(port) &&
                v.get('num-other-sentinels') === '2' &&
                v.get('num-slaves') === '1' &&
                v.get('flags') === 'master',
            )
          )
        },
      )
    await settled(masterPort)

    return {
      masterName: MASTER_NAME,
      sentinelPorts,
      url: `redis+sentinel://${sentinelPorts.map((p) => `127.0.0.1:${p}`).join(',')}/${MASTER_NAME}`,
      masterPort,
      replicaPort,
      process(port) {
        const child = children.get(port)
        if (child === undefined) throw new Error(`sentinel-harness: no data node on ${port}`)
        return child
      },
      masterNamed,
      settled,
      cli: (port, ...args) =>
        cli(port === masterPort || port === replicaPort ? password : sentinelPassword, port, ...args),
      async swapWithoutFailover() {
        const from = await masterNamed()
        const to = from === masterPort ? replicaPort : masterPort
        await cli(password, to, 'REPLICAOF', 'NO', 'ONE')
        for (const port of sentinelPorts) {
          await cli(sentinelPassword, port, 'SENTINEL', 'REMOVE', MASTER_NAME)
          await cli(sentinelPassword, port, 'SENTINEL', 'MONITOR', MASTER_NAME, '127.0.0.1', String(to), '2')
          await cli(
            sentinelPassword,
            port,
            'SENTINEL',
            'SET',
            MASTER_NAME,
            'down-after-milliseconds',
            '1000',
            'failover-timeout',
            '4000',
            ...(password === undefined ? [] : ['auth-pass', password]),
          )
        }
        await cli(password, from, 'REPLICAOF', '127.0.0.1', String(to))
        await settled(to)
      },
      stop,
    }
  } catch (error) {
    await stop()
    throw error
  }
}

/** Files of a private CA and a certificate it signed for 127.0.0.1 and localhost. */
export interface TestCertificates {
  readonly ca: string
  readonly cert: string
  readonly key: string
}

/**
 * A master and one sentinel (quorum 1) that speak TLS only, with `certificates` (their clients
 * need not present one), the sentinel reaching the master over TLS too. No failover: what a
 * start over TLS needs.
 */
export async function startTlsSentinel(
  certificates: TestCertificates,
): Promise<{ sentinelPort: number; masterPort: number; stop(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-sentinel-tls-'))
  const children: ChildProcess[] = []
  const stop = async () => {
    await Promise.all(children.map(stopServer))
    rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 })
  }
  const tls = [
    ['tls-cert-file', certificates.cert],
    ['tls-key-file', certificates.key],
    ['tls-ca-cert-file', certificates.ca],
    ['tls-auth-clients', 'no'],
    ['tls-replication', 'yes'],
  ]
  const tlsPing = (port: number) =>
    waitFor(`TLS redis-server on ${port}`, 5000, async () => {
      const answer = await redisCli(port, '--tls', '--cacert', certificates.ca, 'PING')
      return answer === 'PONG'
    })
  try {
    const masterPort = await freePort()
    children.push(
      spawnRedisServer([
        ...redisServerArgs(
          masterPort,
          dir,
          tls.flatMap(([name, value]) => [`--${name}`, value!]),
        ),
        '--port',
        '0',
        '--tls-port',
        String(masterPort),
      ]),
    )
    await tlsPing(masterPort)
    const sentinelPort = await freePort()
    const file = join(dir, `sentinel-${sentinelPort}.conf`)
    writeFileSync(
      file,
      [
        'port 0',
        `tls-port ${sentinelPort}`,
        ...tls.map(([name, value]) => `${name} ${value}`),
        'bind 127.0.0.1',
        `dir ${dir}`,
        `logfile ${join(dir, `sentinel-${sentinelPort}.log`)}`,
        `sentinel monitor ${MASTER_NAME} 127.0.0.1 ${masterPort} 1`,
        '',
      ].join('\n'),
    )
    children.push(spawnRedisServer([file, '--sentinel']))
    await tlsPing(sentinelPort)
    return { sentinelPort, masterPort, stop }
  } catch (error) {
    await stop()
    throw error
  }
}
