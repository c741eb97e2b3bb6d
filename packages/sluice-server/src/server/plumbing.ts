// The service's HTTP plumbing: the node:http server with request ids and the debug request log,
// JSON answers and error answers, and draining in-flight requests on close. Knows no endpoint:
// routes.ts hands it the function that answers a request.
import { randomBytes } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { createServer, STATUS_CODES } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import type { AddressInfo, Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import type { SecureContextOptions } from 'node:tls'
import { SluiceError } from 'sluice'
import type { HttpSettings } from './config-http.js'
import type { ClientErrorCode } from './requests.js'
import { ClientError } from './requests.js'
import type { ListeningAddress, ServiceContext } from './types.js'

const JSON_TYPE = 'application/json'

/** Answer with a JSON body, unless an answer already went out; once closing, with `connection: close`. */
export function send(
  ctx: ServiceContext,
  res: ServerResponse,
  status: number,
  body: string,
  headers?: Record<string, string>,
): void {
  if (res.headersSent) return
  if (headers !== undefined) for (const name in headers) res.setHeader(name, headers[name]!)
  if (ctx.closing) res.setHeader('connection', 'close')
  res.writeHead(status, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(body) })
  res.end(body)
}

function errorBody(code: string, message: string): string {
  return JSON.stringify({ error: code, message })
}

/**
 * Answer a request that threw: a ClientError with its status and code (logged at info), a store
 * error with 503 `store_unavailable`, anything else with 500 and only the request id to go on.
 */
function fail(
  ctx: ServiceContext,
  req: IncomingMessage,
  res: ServerResponse,
  id: string,
  error: unknown,
): void {
  const { logger } = ctx
  if (error instanceof ClientError) {
    logger.info({ reqId: id, method: req.method, url: req.url, error: error.code }, error.message)
    if (error.code === 'body_too_large' || error.code === 'unsupported_media_type') {
      // Do not read the rest of an oversized or refused body: answer, then close the connection.
      res.setHeader('connection', 'close')
      req.resume()
    }
    send(ctx, res, error.status, errorBody(error.code, error.message))
    return
  }
  if (error instanceof SluiceError && error.code.startsWith('SLUICE_STORE')) {
    logger.error({ reqId: id, err: error }, 'store unavailable')
    send(ctx, res, 503, errorBody('store_unavailable', `the store did not answer: ${error.message}`))
    return
  }
  logger.error({ reqId: id, method: req.method, url: req.url, err: error }, 'internal error')
  send(ctx, res, 500, errorBody('internal_error', 'internal error; see the service log for this request id'))
}

/** What Node's HTTP parser refused, as the answer every other error gets: status and a JSON body. */
function parserAnswer(error: NodeJS.ErrnoException): {
  status: number
  code: ClientErrorCode
  message: string
} {
  switch (error.code) {
    case 'HPE_HEADER_OVERFLOW':
      return { status: 431, code: 'headers_too_large', message: 'the request headers are too large' }
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return {
        status: 408,
        code: 'request_timeout',
        message: 'the request took too long to arrive (http.headersTimeout, http.requestTimeout)',
      }
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return { status: 413, code: 'body_too_large', message: 'the chunk extensions are too large' }
    default:
      return {
        status: 400,
        code: 'bad_request',
        message: `the request is not valid HTTP/1.1 (${error.code ?? 'parse error'})`,
      }
  }
}

/**
 * Node's `clientError`: answer in JSON when nothing of a response went out on the socket yet (as
 * Node's own handler decides), then close it. A reset connection gets nothing.
 */
function answerClientError(ctx: ServiceContext, error: NodeJS.ErrnoException, socket: Duplex): void {
  const inFlight = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage
  if (error.code !== 'ECONNRESET' && socket.writable && (inFlight == null || !inFlight.headersSent)) {
    const { status, code, message } = parserAnswer(error)
    ctx.logger.debug({ error: code, cause: error.code }, message)
    const body = errorBody(code, message)
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: ${JSON_TYPE}\r\n` +
        `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      () => socket.destroy(),
    )
    // The server sockets are half-open: do not wait on a client that never reads or closes.
    setTimeout(() => socket.destroy(), 1000).unref()
    return
  }
  socket.destroy()
}

const TIMED_OUT = Symbol('timed out')

/** True when `work` settles within `ms`, false when the time runs out first; rejects with its error. */
export async function settlesWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = setTimeout(resolve, ms, TIMED_OUT)
  })
  try {
    return (await Promise.race([work, timeout])) !== TIMED_OUT
  } finally {
    clearTimeout(timer)
  }
}

/** Answers one request; a throw (or rejection) becomes an error answer. */
export type Route = (
  ctx: ServiceContext,
  req: IncomingMessage,
  res: ServerResponse,
  id: string,
) => Promise<void>

/** The service's server, not yet listening. */
export interface HttpFront {
  listen(port: number, host: string): Promise<ListeningAddress>
  /**
   * Stop accepting, wait for in-flight requests (up to `graceMs`), then drop every connection.
   * Set `ctx.closing` first: answers given meanwhile then close their connections.
   */
  shutdown(graceMs: number): Promise<void>
  /**
   * HTTPS only: the certificate, key and CA for connections accepted from now on; open ones keep
   * theirs.
   */
  setSecureContext(options: SecureContextOptions): void
}

/** HTTPS for `serve`: the secure context's files, and whether clients must show a certificate. */
export interface ServeTls {
  readonly context: SecureContextOptions
  readonly requireClientCert: boolean
}

/**
 * A node:http server that answers every request with `route`, within the bounds of `settings`:
 * headers and whole-request timeouts (Node's checker runs at a quarter of the shorter, at most every
 * second), a connection cap, and JSON answers for what Node's parser refuses.
 */
export function serve(ctx: ServiceContext, route: Route, settings: HttpSettings, tls?: ServeTls): HttpFront {
  const { logger } = ctx

  // Request ids: the caller's X-Request-Id when it is sane, else a per-boot prefix and a counter.
  const bootId = randomBytes(4).toString('hex')
  let requestCounter = 0
  function requestId(req: IncomingMessage): string {
    const given = req.headers['x-request-id']
    if (typeof given === 'string' && given.length > 0 && given.length <= 128 && /^[\x21-\x7e]+$/.test(given))
      return given
    requestCounter = (requestCounter + 1) % Number.MAX_SAFE_INTEGER
    return `${bootId}-${requestCounter.toString(36)}`
  }

  let inFlight = 0
  let drained: (() => void) | undefined

  function settle(req: IncomingMessage, res: ServerResponse, id: string, started: number): void {
    inFlight--
    if (started > 0) {
      logger.debug(
        {
          reqId: id,
          method: req.method,
          url: req.url,
          status: res.statusCode,
          ms: performance.now() - started,
        },
        'request',
      )
    }
    if (ctx.closing && inFlight === 0) drained?.()
  }

  const { headersTimeoutMs, requestTimeoutMs } = settings
  const checkEveryMs = Math.min(
    1000,
    Math.max(50, Math.floor(Math.min(headersTimeoutMs, requestTimeoutMs) / 4)),
  )
  const options = {
    headersTimeout: headersTimeoutMs,
    requestTimeout: requestTimeoutMs,
    connectionsCheckingInterval: checkEveryMs,
  }
  const answer = (req: IncomingMessage, res: ServerResponse) => {
    inFlight++
    const id = requestId(req)
    res.setHeader('x-request-id', id)
    const started = logger.isLevelEnabled('debug') ? performance.now() : 0
    // With traces, the request's traceparent is the active context while it is answered.
    const answer =
      ctx.inTrace === undefined
        ? route(ctx, req, res, id)
        : ctx.inTrace(req.headers, () => route(ctx, req, res, id))
    answer.then(
      () => settle(req, res, id, started),
      (error: unknown) => {
        fail(ctx, req, res, id, error)
        settle(req, res, id, started)
      },
    )
  }
  const server =
    tls === undefined
      ? createServer(options, answer)
      : createHttpsServer(
          {
            ...options,
            ...tls.context,
            requestCert: tls.requireClientCert,
            rejectUnauthorized: tls.requireClientCert,
          },
          answer,
        )
  // A failed handshake (no client certificate, unknown CA, plain HTTP on the TLS port) is the
  // client's problem: logged at debug, its socket dropped.
  server.on('tlsClientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
    logger.debug({ error: 'tls_handshake', cause: error.code }, 'TLS handshake failed')
    socket.destroy()
  })
  server.keepAliveTimeout = 65_000
  server.maxConnections = settings.maxConnections
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) =>
    answerClientError(ctx, error, socket),
  )

  return {
    listen(port, host) {
      return new Promise((resolve, reject) => {
        server.once('error', reject)
        server.listen(port, host, () => {
          server.off('error', reject)
          const address = server.address() as AddressInfo
          const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address
          const scheme = tls === undefined ? 'http' : 'https'
          resolve({ host: address.address, port: address.port, url: `${scheme}://${shown}:${address.port}` })
        })
      })
    },
    async shutdown(graceMs) {
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()))
      server.closeIdleConnections()
      if (inFlight > 0) {
        const allSettled = new Promise<void>((resolve) => {
          drained = resolve
        })
        await settlesWithin(allSettled, graceMs)
      }
      server.closeAllConnections()
      await stopped
    },
    setSecureContext(context) {
      if ('setSecureContext' in server) server.setSecureContext(context)
    },
  }
}
