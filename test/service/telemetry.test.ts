// OpenTelemetry from the config's `telemetry:` block: `sluice serve` exporting to an OTLP/HTTP
// receiver run here (decision metrics, a span per decision joined to the caller's `traceparent`),
// metrics without traces, and the block's checking and redaction.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pino } from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parseEnvoyConfig } from '../../packages/sluice-server/src/envoy/config.js'
import { parseConfig } from '../../packages/sluice-server/src/server/config.js'
import { createService } from '../../packages/sluice-server/src/server/service.js'
import {
  startTelemetry,
  TELEMETRY_PACKAGES,
  TRACE_PACKAGES,
} from '../../packages/sluice-server/src/server/telemetry.js'
import { CLI, servingUrl, startCli } from '../helpers/cli-process.js'
import { d, rlsClient } from '../helpers/envoy.js'
import { type OtlpReceiver, startOtlpReceiver } from '../helpers/otlp-receiver.js'
import { post, quietLogger } from '../helpers/service.js'

const HEADER_SECRET = 'otlp-secret-3f9a1c'
const CALLER = { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7' }
const AUTHZ_CALLER = { traceId: 'a3ce929d0e0e47364bf92f3577b34da6', spanId: 'b7ad6b7169203331' }
const traceparent = (c: { traceId: string; spanId: string }) => `00-${c.traceId}-${c.spanId}-01`

const POLICIES = `policies:
  api: { algorithm: fixed-window, limit: 2, window: 1m }
  web: { algorithm: fixed-window, limit: 10, window: 1m }
`

let dir: string
let receiver: OtlpReceiver
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sluice-otel-'))
  receiver = await startOtlpReceiver()
})
afterAll(async () => {
  await receiver.close()
  rmSync(dir, { recursive: true, force: true })
})

function configFile(name: string, telemetry: string): string {
  const file = join(dir, name)
  writeFileSync(file, `${POLICIES}telemetry:\n${telemetry}`)
  return file
}

describe('sluice serve with telemetry', () => {
  it('exports the decision metrics and one span per decision, joined to the caller trace', async () => {
    const file = configFile(
      'serve.yaml',
      `  otlp:\n    endpoint: ${receiver.url}\n    headers: { x-api-key: ${HEADER_SECRET} }\n  traces: true\n`,
    )
    const cli = startCli(['serve', '--config', file, '--port', '0'])
    try {
      const url = await servingUrl(cli)
      const check = { policy: 'api', key: 'user-secret-42' }
      expect((await post(`${url}/v1/check`, check, { traceparent: traceparent(CALLER) })).body.allowed).toBe(
        true,
      )
      expect((await post(`${url}/v1/check`, check)).body.allowed).toBe(true)
      expect((await post(`${url}/v1/check`, check)).body.allowed).toBe(false)
      const authz = await fetch(`${url}/v1/authz?policy=web`, {
        headers: { traceparent: traceparent(AUTHZ_CALLER) },
      })
      expect(authz.status).toBe(200)
      // SIGTERM: the service drains, then exports what is pending before it exits.
      cli.child.kill('SIGTERM')
      expect(await cli.exited).toBe(0)
    } finally {
      cli.child.kill('SIGKILL')
    }

    expect(receiver.sum('sluice.decisions', { 'sluice.policy': 'api', 'sluice.outcome': 'allowed' })).toBe(2)
    expect(receiver.sum('sluice.decisions', { 'sluice.policy': 'api', 'sluice.outcome': 'denied' })).toBe(1)
    expect(receiver.sum('sluice.decisions', { 'sluice.policy': 'web', 'sluice.outcome': 'allowed' })).toBe(1)
    expect(receiver.histogramCounts('sluice.store.duration')).toEqual({ 'memory consume': 4 })
    const exported = receiver.exports.filter((e) => e.path === '/v1/metrics' || e.path === '/v1/traces')
    expect(new Set(exported.map((e) => e.path))).toEqual(new Set(['/v1/metrics', '/v1/traces']))
    for (const e of exported) expect(e.headers['x-api-key']).toBe(HEADER_SECRET)

    const spans = receiver.spans()
    expect(spans).toHaveLength(4)
    expect(spans.every((s) => s.name === 'sluice.decision')).toBe(true)
    const api = spans.filter((s) => s.attributes['sluice.policy'] === 'api')
    expect(api.map((s) => s.attributes['sluice.outcome'])).toEqual(['allowed', 'allowed', 'denied'])
    for (const s of spans)
      expect(s.attributes).toMatchObject({
        'sluice.operation': 'consume',
        'sluice.store': 'memory',
        'sluice.cached': false,
        'sluice.degraded': false,
      })
    for (const s of spans) expect(typeof s.attributes['sluice.store.duration_ms']).toBe('number')
    // With traceparent: the caller's trace, the caller's span as parent. Without: a trace of its own.
    expect(api[0]).toMatchObject({ traceId: CALLER.traceId, parentSpanId: CALLER.spanId })
    for (const s of api.slice(1)) {
      expect(s.parentSpanId).toBe('')
      expect(s.traceId).not.toBe(CALLER.traceId)
    }
    const web = spans.find((s) => s.attributes['sluice.policy'] === 'web')
    expect(web).toMatchObject({ traceId: AUTHZ_CALLER.traceId, parentSpanId: AUTHZ_CALLER.spanId })
    expect(JSON.stringify(receiver.exports.map((e) => e.body))).not.toContain('user-secret-42')
    expect(cli.output()).toContain('telemetry: exporting over OTLP/HTTP')
    expect(cli.output()).not.toContain(HEADER_SECRET)
  })
})

describe('telemetry on the gRPC listener', () => {
  it("joins a ShouldRateLimit call's traceparent metadata", async () => {
    const own = await startOtlpReceiver()
    try {
      const config = parseConfig(
        `${POLICIES}telemetry:\n  otlp: { endpoint: '${own.url}' }\n  traces: true\n`,
        'grpc.yaml',
      )
      const envoy = parseEnvoyConfig([
        {
          file: 'rules.yaml',
          text: 'domain: d\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 5 }\n',
        },
      ])
      const telemetry = await startTelemetry(config.telemetry!)
      const service = createService({ config, logger: quietLogger, telemetry, envoy, grpc: { port: 0 } })
      await service.listen(0)
      const client = rlsClient(service.grpcAddress!.url)
      const request = { domain: 'd', descriptors: [d(['user', 'u1'])] }
      expect((await client.shouldRateLimit(request, { traceparent: traceparent(CALLER) })).overall_code).toBe(
        'OK',
      )
      client.close()
      await service.close(500)
      const [span] = own.spans()
      expect(span).toMatchObject({
        traceId: CALLER.traceId,
        parentSpanId: CALLER.spanId,
        name: 'sluice.decision',
      })
      expect(own.sum('sluice.decisions', { 'sluice.outcome': 'allowed' })).toBe(1)
    } finally {
      await own.close()
    }
  })
})

describe('telemetry in the service', () => {
  it("obeys the caller's sampled flag: a traceparent not sampled makes no span", async () => {
    const own = await startOtlpReceiver()
    try {
      const config = parseConfig(
        `${POLICIES}telemetry:\n  otlp: { endpoint: '${own.url}' }\n  traces: true\n`,
        'sampled.yaml',
      )
      const service = createService({
        config,
        logger: quietLogger,
        telemetry: await startTelemetry(config.telemetry!),
      })
      const { url } = await service.listen(0)
      const check = { policy: 'web', key: 'k' }
      await post(`${url}/v1/check`, check, {
        traceparent: `00-${AUTHZ_CALLER.traceId}-${AUTHZ_CALLER.spanId}-00`,
      })
      await post(`${url}/v1/check`, check, { traceparent: traceparent(CALLER) })
      await service.close(500)
      expect(own.spans().map((s) => s.traceId)).toEqual([CALLER.traceId])
      expect(own.sum('sluice.decisions', { 'sluice.policy': 'web', 'sluice.outcome': 'allowed' })).toBe(2)
    } finally {
      await own.close()
    }
  })

  it('logs a failed export at warn, without the headers, and goes on deciding', async () => {
    const closed = await startOtlpReceiver()
    await closed.close() // nothing listens there now
    const lines: string[] = []
    const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) })
    const config = parseConfig(
      `${POLICIES}telemetry:\n  otlp: { endpoint: '${closed.url}', headers: { x-api-key: ${HEADER_SECRET} } }\n`,
      'down.yaml',
    )
    const service = createService({
      config,
      logger: quietLogger,
      telemetry: await startTelemetry(config.telemetry!, { logger }),
    })
    const { url } = await service.listen(0)
    expect((await post(`${url}/v1/check`, { policy: 'web', key: 'k' })).body.allowed).toBe(true)
    await service.close(500)
    const warnings = lines
      .map((l) => JSON.parse(l) as { level: number; msg: string })
      .filter((l) => l.level === 40)
    expect(warnings.length).toBeGreaterThan(0)
    expect(warnings.every((w) => w.msg.startsWith('telemetry: '))).toBe(true)
    expect(lines.join('')).not.toContain(HEADER_SECRET)
  })
})

describe('telemetry without traces', () => {
  it('exports metrics only: no span, whatever traceparent says', async () => {
    const own = await startOtlpReceiver()
    try {
      const config = parseConfig(
        `${POLICIES}telemetry:\n  otlp: { endpoint: '${own.url}' }\n`,
        'metrics.yaml',
      )
      expect(config.telemetry).toEqual({ endpoint: own.url, headers: {}, intervalMs: 60_000, traces: false })
      const telemetry = await startTelemetry(config.telemetry!)
      expect(telemetry.tracer).toBeUndefined()
      const service = createService({ config, logger: quietLogger, telemetry })
      const { url } = await service.listen(0)
      await post(`${url}/v1/check`, { policy: 'web', key: 'k' }, { traceparent: traceparent(CALLER) })
      await service.close(500)
      expect(own.sum('sluice.decisions', { 'sluice.policy': 'web', 'sluice.outcome': 'allowed' })).toBe(1)
      expect(own.spans()).toEqual([])
      expect(own.exports.map((e) => e.path)).toEqual(['/v1/metrics'])
    } finally {
      await own.close()
    }
  })
})

describe('the telemetry block', () => {
  const parse = (telemetry: string) => () => parseConfig(`${POLICIES}telemetry:\n${telemetry}`, 'conf.yaml')

  it('reads endpoint, headers, interval and traces', () => {
    const config = parse(
      '  otlp:\n    endpoint: https://otel.example:4318/\n    headers: { X-Tenant: a }\n    interval: 15s\n  traces: true\n',
    )()
    expect(config.telemetry).toEqual({
      endpoint: 'https://otel.example:4318',
      headers: { 'x-tenant': 'a' },
      intervalMs: 15_000,
      traces: true,
    })
  })

  it.each([
    [
      'an unknown key',
      '  otlp: { endpoint: http://c:4318 }\n  trace: true\n',
      /conf\.yaml:6: telemetry\.trace: unknown key; did you mean 'traces'\?/,
    ],
    [
      'an unknown otlp key',
      '  otlp:\n    endpoint: http://c:4318\n    header: {}\n',
      /conf\.yaml:7: telemetry\.otlp\.header: unknown key; did you mean 'headers'\?/,
    ],
    ['no endpoint', '  otlp: {}\n', /conf\.yaml:\d+: telemetry\.otlp\.endpoint: is required/],
    [
      'a gRPC endpoint',
      '  otlp: { endpoint: grpc://c:4317 }\n',
      /conf\.yaml:5: telemetry\.otlp\.endpoint: must be an http:\/\/ or https:\/\/ URL/,
    ],
    [
      'a bad interval',
      '  otlp: { endpoint: http://c:4318, interval: soon }\n',
      /conf\.yaml:5: .*telemetry\.otlp\.interval/,
    ],
    [
      'a tiny interval',
      '  otlp: { endpoint: http://c:4318, interval: 10ms }\n',
      /telemetry\.otlp\.interval: must be at least 1s/,
    ],
    [
      'traces not a boolean',
      '  otlp: { endpoint: http://c:4318 }\n  traces: yes please\n',
      /conf\.yaml:6: telemetry\.traces: must be true or false/,
    ],
  ])('refuses %s with file:line', (_label, block, message) => {
    expect(parse(block)).toThrow(message)
  })

  it('names in its install line the optional peers sluice-server declares, each on its declared line', () => {
    const manifest = JSON.parse(
      readFileSync(join(import.meta.dirname, '../../packages/sluice-server/package.json'), 'utf8'),
    ) as {
      peerDependencies: Record<string, string>
      peerDependenciesMeta: Record<string, { optional?: boolean }>
    }
    const declared = Object.entries(manifest.peerDependencies).filter(([name]) =>
      name.startsWith('@opentelemetry/'),
    )
    const hinted = [...TELEMETRY_PACKAGES, ...TRACE_PACKAGES].map((spec) => {
      const at = spec.lastIndexOf('@')
      return [spec.slice(0, at), `^${spec.slice(at + 1)}`] as const
    })
    expect(hinted.map(([name]) => name).sort()).toEqual(declared.map(([name]) => name).sort())
    for (const [name, line] of hinted) {
      expect(manifest.peerDependencies[name]!.startsWith(line), name).toBe(true)
      expect(manifest.peerDependenciesMeta[name]?.optional, name).toBe(true)
    }
  })

  it('sluice check shows where telemetry goes, never a header value or a password', () => {
    const file = configFile(
      'check.yaml',
      `  otlp:\n    endpoint: https://user:pw-9d1e@otel.example:4318\n    headers: { authorization: Bearer ${HEADER_SECRET} }\n  traces: true\n`,
    )
    const res = spawnSync(process.execPath, [CLI, 'check', '--config', file], { encoding: 'utf8' })
    expect(res.status).toBe(0)
    expect(res.stdout).toContain(
      'telemetry: OTLP/HTTP to https://user:***@otel.example:4318 (headers authorization: <redacted>); metrics every 60000ms; traces on',
    )
    expect(res.stdout).not.toContain(HEADER_SECRET)
    expect(res.stdout).not.toContain('pw-9d1e')
  })
})
