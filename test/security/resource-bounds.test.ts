// Resource bounds of the service. Dashboard streams are capped and a consumer
// that stops reading is dropped once its buffer passes a bound; a client that dribbles its headers
// or body is cut after the configured timeout; connections are capped; and what Node's HTTP parser
// answers (400, 408, 431) is JSON like every other error. Real service, real sockets on 127.0.0.1,
// every bound made small through options so each case ends in a few seconds.
import type { IncomingMessage } from 'node:http'
import { request } from 'node:http'
import type { Socket } from 'node:net'
import { connect } from 'node:net'
import { describe, expect, it } from 'vitest'
import { post, servicesClosedAfterEach } from '../helpers/service.js'
import { parseAnswer, rawRequest } from './raw.js'

const startService = servicesClosedAfterEach()

const YAML = `
policies:
  api: { algorithm: fixed-window, limit: 10, window: 1m }
`
const portOf = (url: string) => Number(new URL(url).port)

/** Open an SSE stream; resolves with the response once its headers arrive. */
function openStream(url: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/dashboard/events`, resolve)
    req.on('error', reject)
    req.end()
  })
}

async function until(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/** Resolves with the time from now until the server closes `socket`. */
function closedAfter(socket: Socket, chunks: Buffer[]): Promise<number> {
  const started = performance.now()
  socket.on('data', (chunk) => chunks.push(chunk))
  socket.on('error', () => {})
  return new Promise((resolve) => socket.on('close', () => resolve(performance.now() - started)))
}

describe('dashboard streams', () => {
  it('refuses streams past the cap with a JSON 503, and takes a new one when a slot frees', async () => {
    const { service, url } = await startService(YAML, { observability: { maxStreams: 3 } })
    const open = [await openStream(url), await openStream(url), await openStream(url)]
    for (const res of open) expect(res.statusCode).toBe(200)
    const refused = await openStream(url)
    expect(refused.statusCode).toBe(503)
    expect(refused.headers['retry-after']).toBeDefined()
    const body = await new Promise<string>((resolve) => {
      let text = ''
      refused.on('data', (chunk: Buffer) => (text += chunk))
      refused.on('end', () => resolve(text))
    })
    expect(JSON.parse(body).error).toBe('too_many_streams')
    expect(service.observability!.dashboardStreams).toBe(3)
    open[0]!.destroy()
    await until(() => service.observability!.dashboardStreams === 2, 3000, 'the stream slot to free')
    const again = await openStream(url)
    expect(again.statusCode).toBe(200)
    for (const res of [...open, again]) res.destroy()
  })

  it('drops a consumer that stops reading once its buffer passes the bound; a reading one stays', async () => {
    // Big snapshots (20 policies x 10 top keys of ~1 KB) every 50 ms fill the kernel's socket
    // buffers of a paused reader in a few seconds; the bound then trips at 32 KB.
    const names = Array.from({ length: 20 }, (_, i) => `p${i}`)
    const yaml = `policies:\n${names.map((n) => `  ${n}: { algorithm: fixed-window, limit: 1000, window: 1m }`).join('\n')}\n`
    const { service, url } = await startService(yaml, {
      observability: { pushIntervalMs: 50, maxStreamBufferBytes: 32 * 1024 },
    })
    for (const policy of names)
      for (let i = 0; i < 10; i++)
        expect((await post(`${url}/v1/check`, { policy, key: `${'k'.repeat(990)}-${i}` })).status).toBe(200)

    const reader = await openStream(url)
    let read = 0
    reader.on('data', (chunk: Buffer) => (read += chunk.length))
    // The slow one: sends its request and never reads a byte.
    const stalled = connect(portOf(url), '127.0.0.1')
    stalled.write(`GET /dashboard/events HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n`)
    await until(() => service.observability!.dashboardStreams === 2, 3000, 'both streams to open')
    await until(
      () => service.observability!.dashboardStreams === 1,
      15_000,
      'the stalled stream to be dropped',
    )
    expect(read).toBeGreaterThan(1_000_000)
    expect(reader.destroyed).toBe(false)
    // Reading again, the stalled client finds its stream ended by the server.
    const ended = new Promise<void>((resolve) => stalled.on('close', () => resolve()))
    stalled.on('error', () => {})
    stalled.resume()
    await ended
    reader.destroy()
  }, 25_000)
})

describe('slow clients are cut after the configured timeouts', () => {
  const TIMEOUTS = `${YAML}http:\n  headersTimeout: 1s\n  requestTimeout: 1500ms\n`

  it('cuts a body sent one byte at a time after requestTimeout, with a JSON 408, and stores nothing', async () => {
    const { url } = await startService(TIMEOUTS)
    const socket = connect(portOf(url), '127.0.0.1')
    const chunks: Buffer[] = []
    const closed = closedAfter(socket, chunks)
    const body = JSON.stringify({ policy: 'api', key: 'alice', cost: 10 })
    socket.write(
      `POST /v1/check HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`,
    )
    let sent = 0
    const drip = setInterval(() => {
      if (!socket.destroyed && sent < body.length - 1) socket.write(body[sent++]!)
    }, 200)
    const ms = await closed
    clearInterval(drip)
    // Node checks the timeouts on an interval; the service sets it to a fraction of the timeout.
    expect(ms).toBeGreaterThan(1000)
    expect(ms).toBeLessThan(4000)
    const answer = parseAnswer(Buffer.concat(chunks))
    expect(answer.status).toBe(408)
    expect(answer.json?.error).toBe('request_timeout')
    expect((await post(`${url}/v1/peek`, { policy: 'api', key: 'alice' })).body.remaining).toBe(10)
  })

  it('cuts headers sent one byte at a time after headersTimeout, with a JSON 408', async () => {
    const { url } = await startService(TIMEOUTS)
    const socket = connect(portOf(url), '127.0.0.1')
    const chunks: Buffer[] = []
    const closed = closedAfter(socket, chunks)
    const head = `GET /healthz HTTP/1.1\r\nhost: x\r\nx-padding: ${'p'.repeat(100)}\r\n\r\n`
    let sent = 0
    const drip = setInterval(() => {
      if (!socket.destroyed && sent < head.length - 4) socket.write(head[sent++]!)
    }, 100)
    const ms = await closed
    clearInterval(drip)
    expect(ms).toBeLessThan(3500)
    const answer = parseAnswer(Buffer.concat(chunks))
    expect(answer.status).toBe(408)
    expect(answer.json?.error).toBe('request_timeout')
  })

  it('refuses timeouts that cannot work, naming file and line', async () => {
    await expect(startService(`${YAML}http:\n  headersTimeout: 20s\n  requestTimeout: 5s\n`)).rejects.toThrow(
      /^test\.yaml:5: http\.headersTimeout: .*above http\.requestTimeout/,
    )
    await expect(startService(`${YAML}http:\n  requestTimeout: 10 seconds\n`)).rejects.toThrow(
      /^test\.yaml:5: http\.requestTimeout: /,
    )
    await expect(startService(`${YAML}http:\n  maxConnections: 0\n`)).rejects.toThrow(
      /^test\.yaml:5: http\.maxConnections: /,
    )
  })

  it('refuses connections past http.maxConnections', async () => {
    const { url } = await startService(`${YAML}http:\n  maxConnections: 2\n`)
    const port = portOf(url)
    const held = [connect(port, '127.0.0.1'), connect(port, '127.0.0.1')]
    await Promise.all(held.map((s) => new Promise((resolve) => s.once('connect', resolve))))
    // Let the server accept both before the third arrives.
    await new Promise((resolve) => setTimeout(resolve, 200))
    const third = await rawRequest(
      port,
      'GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n',
      2000,
    )
    expect(third.status).toBe(0)
    for (const socket of held) socket.destroy()
    await new Promise((resolve) => setTimeout(resolve, 200))
    const later = await rawRequest(port, 'GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n')
    expect(later.status).toBe(200)
  })
})

describe("Node's parser errors are JSON", () => {
  it('answers an oversized header with a JSON 431', async () => {
    const { url } = await startService(YAML)
    const answer = await rawRequest(
      portOf(url),
      `GET /healthz HTTP/1.1\r\nhost: x\r\nx-big: ${'a'.repeat(20_000)}\r\n\r\n`,
    )
    expect(answer.status).toBe(431)
    expect(answer.headers['content-type']).toContain('application/json')
    expect(answer.json?.error).toBe('headers_too_large')
  })

  it('answers a malformed request with a JSON 400', async () => {
    const { url } = await startService(YAML)
    for (const bytes of [
      'GARBAGE\r\n\r\n',
      'GET /healthz HTTP/1.1\r\nbad header\r\n\r\n',
      'POST /v1/check HTTP/1.1\r\nhost: x\r\ncontent-length: abc\r\n\r\n',
    ]) {
      const answer = await rawRequest(portOf(url), bytes)
      expect(answer.status, JSON.stringify(bytes)).toBe(400)
      expect(answer.headers['content-type']).toContain('application/json')
      expect(answer.json?.error).toBe('bad_request')
    }
  })
})
