// The gRPC listener Envoy calls, under the HTTP listener's rules: its bounds in the config, with
// defaults and file:line errors.
import { pino } from 'pino'
import { describe, expect, it } from 'vitest'
import { parseEnvoyConfig } from '../../src/envoy/config.js'
import { describeConfig, parseConfig } from '../../src/server/config.js'
import { servicesClosedAfterEach } from '../service/helpers.js'

const startService = servicesClosedAfterEach()
const RULES =
  'domain: d\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 1000000 }\n'
const POLICIES = 'policies:\n  api: { algorithm: fixed-window, limit: 1000000, window: 1m }\n'

describe('grpc: bounds in the config', () => {
  it("defaults to the HTTP listener's bounds where one applies, and sluice check prints them", () => {
    const config = parseConfig(`${POLICIES}grpc: { port: 8081 }\n`, 'test.yaml')
    expect(config.grpc).toMatchObject({
      maxConnections: 1024,
      handshakeTimeoutMs: 10_000,
      idleTimeoutMs: 300_000,
      callTimeoutMs: 10_000,
      maxConcurrentStreams: 100,
      maxSessionMemoryMb: 10,
    })
    const tuned = parseConfig(
      `${POLICIES}grpc:\n  port: 8081\n  maxConnections: 64\n  handshakeTimeout: 2s\n  idleTimeout: 1m\n  callTimeout: 500ms\n  maxConcurrentStreams: 32\n  maxSessionMemoryMb: 4\n`,
      'test.yaml',
    )
    expect(describeConfig(tuned)).toContain(
      'grpc: max 64 connections; handshake 2000ms, idle 60000ms, call 500ms; per connection 32 streams, 4 MB',
    )
  })

  it('keeps the bounds it started with on reload, and names the ones that wait for a restart', async () => {
    const lines: { msg: string; settings?: string[] }[] = []
    const { service } = await startService(`${POLICIES}grpc: { port: 0, maxConnections: 8 }\n`, {
      envoy: parseEnvoyConfig([{ file: 'rules.yaml', text: RULES }]),
      logger: pino({ level: 'warn' }, { write: (line: string) => lines.push(JSON.parse(line)) }),
    })
    service.reload(
      parseConfig(
        `${POLICIES}grpc: { port: 0, maxConnections: 9, callTimeout: 1s, trustedPeers: [private] }\n`,
        't.yaml',
      ),
    )
    expect(lines.find((line) => line.msg.includes('take effect on restart'))?.settings).toEqual([
      'grpc.maxConnections',
      'grpc.callTimeout',
    ])
  })

  it('refuses bounds that cannot work, naming file and line', async () => {
    await expect(startService(`${POLICIES}grpc:\n  port: 0\n  maxConnections: 0\n`)).rejects.toThrow(
      /^test\.yaml:5: grpc\.maxConnections: /,
    )
    await expect(startService(`${POLICIES}grpc:\n  port: 0\n  idleTimeout: 5 minutes\n`)).rejects.toThrow(
      /^test\.yaml:5: grpc\.idleTimeout: .*not a duration/,
    )
    await expect(startService(`${POLICIES}grpc:\n  port: 0\n  handshakeTimeout: 0\n`)).rejects.toThrow(
      /^test\.yaml:5: grpc\.handshakeTimeout: /,
    )
    await expect(startService(`${POLICIES}grpc:\n  port: 0\n  maxConcurrentStreams: 1.5\n`)).rejects.toThrow(
      /^test\.yaml:5: grpc\.maxConcurrentStreams: /,
    )
    await expect(startService(`${POLICIES}grpc:\n  port: 0\n  maxSessionMemoryMb: 0\n`)).rejects.toThrow(
      /^test\.yaml:5: grpc\.maxSessionMemoryMb: /,
    )
    await expect(startService(`${POLICIES}grpc:\n  port: 0\n  idleTimout: 1s\n`)).rejects.toThrow(
      /^test\.yaml:5: grpc\.idleTimout: unknown key; did you mean 'idleTimeout'\?/,
    )
  })
})
