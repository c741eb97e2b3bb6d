// Raw HTTP over node:net for the security tests: bytes a fetch client would never send (invalid
// UTF-8, garbage request lines, oversized headers) and the answer exactly as the server wrote it.
import { connect } from 'node:net'

export interface RawAnswer {
  /** 0 when the server closed the connection without an answer. */
  status: number
  headers: Record<string, string>
  /** The body as text (the security tests' answers are small JSON documents). */
  body: string
  /** The body parsed as JSON, or undefined when it is not JSON. */
  json: Record<string, unknown> | undefined
}

/** Parse what a server wrote on a connection that carried one request. */
export function parseAnswer(raw: Buffer): RawAnswer {
  const text = raw.toString('latin1')
  const end = text.indexOf('\r\n\r\n')
  if (!text.startsWith('HTTP/1.') || end < 0) return { status: 0, headers: {}, body: text, json: undefined }
  const [statusLine, ...lines] = text.slice(0, end).split('\r\n')
  const headers: Record<string, string> = {}
  for (const line of lines) {
    const colon = line.indexOf(':')
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
  }
  const body = raw.subarray(Buffer.byteLength(text.slice(0, end + 4), 'latin1')).toString('utf8')
  let json: Record<string, unknown> | undefined
  try {
    json = JSON.parse(body) as Record<string, unknown>
  } catch {
    json = undefined
  }
  return { status: Number(statusLine!.split(' ')[1]), headers, body, json }
}

/**
 * Send `bytes` on a new connection to 127.0.0.1:`port` and read until the server closes it (or
 * `timeoutMs` passes: then whatever arrived). Send `connection: close` in the request to get the end.
 */
export function rawRequest(port: number, bytes: Buffer | string, timeoutMs = 5000): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    const chunks: Buffer[] = []
    const timer = setTimeout(() => socket.destroy(), timeoutMs)
    socket.on('data', (chunk) => chunks.push(chunk))
    socket.on('error', (error: NodeJS.ErrnoException) => {
      // A reset after the answer arrived still leaves the answer to read.
      if (error.code !== 'ECONNRESET' && error.code !== 'EPIPE') reject(error)
    })
    socket.on('close', () => {
      clearTimeout(timer)
      resolve(parseAnswer(Buffer.concat(chunks)))
    })
    socket.write(bytes)
  })
}

/** A POST with a body of raw bytes and the given content type, on a connection that then closes. */
export function rawPost(
  port: number,
  path: string,
  body: Buffer,
  contentType = 'application/json',
  extraHeaders = '',
): Promise<RawAnswer> {
  const head =
    `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\ncontent-type: ${contentType}\r\n` +
    `content-length: ${body.length}\r\nconnection: close\r\n${extraHeaders}\r\n`
  return rawRequest(port, Buffer.concat([Buffer.from(head, 'latin1'), body]))
}
