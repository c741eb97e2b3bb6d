// The dashboard's HTTP side: one node:http handler serving the page, a Server-Sent Events stream of
// snapshots and the latest snapshot as JSON, all under one base path.
import type { IncomingMessage, ServerResponse } from 'node:http'
import { InvalidOptionsError } from '../errors.js'
import { dashboardPage } from './page.js'

export interface DashboardOptions<S> {
  /** Base path, e.g. `/dashboard`: the page there, `<path>/events` (SSE), `<path>/snapshot.json`. */
  path: string
  /** How often connected pages get a new snapshot, ms. */
  intervalMs: number
  snapshot: () => S
  /** Event streams open at once; one more is answered 503 with Retry-After. Default 16. */
  maxStreams?: number
  /**
   * Bytes a stream may have waiting to be sent (beyond what the kernel holds) before it is dropped
   * as a consumer that stopped reading; checked before every push. Default 256 KiB.
   */
  maxStreamBufferBytes?: number
}

const DASHBOARD_DEFAULTS = { maxStreams: 16, maxStreamBufferBytes: 256 * 1024 } as const

function positiveInteger(value: number | undefined, fallback: number, what: string): number {
  if (value === undefined) return fallback
  if (!Number.isSafeInteger(value) || value < 1)
    throw new InvalidOptionsError(`${what}: use a whole number, at least 1 (got ${String(value)})`)
  return value
}

export interface Dashboard {
  handler: (req: IncomingMessage, res: ServerResponse) => void
  /** Connected SSE streams. */
  readonly clients: number
  /** End every stream and stop the timer. */
  close(): void
}

/** Build the dashboard handler. Streams only run while a page is connected. */
export function createDashboard<S>(options: DashboardOptions<S>): Dashboard {
  const base = options.path.replace(/\/+$/, '')
  if (!/^(\/[A-Za-z0-9._~-]+)*$/.test(base))
    throw new InvalidOptionsError(
      `dashboardPath: ${JSON.stringify(options.path)} is not a plain path; use something like /dashboard`,
    )
  if (!Number.isSafeInteger(options.intervalMs) || options.intervalMs < 50)
    throw new InvalidOptionsError('pushIntervalMs: use a whole number of ms, at least 50')
  const maxStreams = positiveInteger(options.maxStreams, DASHBOARD_DEFAULTS.maxStreams, 'maxStreams')
  const maxBuffered = positiveInteger(
    options.maxStreamBufferBytes,
    DASHBOARD_DEFAULTS.maxStreamBufferBytes,
    'maxStreamBufferBytes',
  )
  const page = dashboardPage(base)
  const clients = new Set<ServerResponse>()
  let timer: NodeJS.Timeout | undefined

  function push(): void {
    if (clients.size === 0) return
    const frame = `data: ${JSON.stringify(options.snapshot())}\n\n`
    for (const res of clients) {
      // A consumer that stopped reading: its frames pile up in memory. Drop it (its page reconnects
      // once it reads again).
      if (res.writableLength > maxBuffered) {
        clients.delete(res)
        // A reset, not a close: a close would leave the kernel holding the unsent bytes of an
        // orphaned socket until the peer reads them; a reset frees them now.
        if (res.socket !== null) res.socket.resetAndDestroy()
        else res.destroy()
      } else res.write(frame)
    }
    if (clients.size === 0) stopTimer()
  }

  function stopTimer(): void {
    if (timer !== undefined) clearInterval(timer)
    timer = undefined
  }

  function stream(res: ServerResponse): void {
    if (clients.size >= maxStreams) {
      const body = JSON.stringify({
        error: 'too_many_streams',
        message: `${maxStreams} dashboard streams are open already; try again later`,
      })
      res.writeHead(503, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
        'retry-after': '10',
        'cache-control': 'no-store',
        // A refused client keeps no connection either.
        connection: 'close',
      })
      res.end(body)
      return
    }
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      // Ask proxies such as nginx not to buffer the stream.
      'x-accel-buffering': 'no',
    })
    res.write(`retry: 2000\ndata: ${JSON.stringify(options.snapshot())}\n\n`)
    clients.add(res)
    if (timer === undefined) {
      timer = setInterval(push, options.intervalMs)
      timer.unref()
    }
    // The response's close: the client went away, or push() dropped it.
    res.on('close', () => {
      clients.delete(res)
      if (clients.size === 0) stopTimer()
    })
  }

  function handler(req: IncomingMessage, res: ServerResponse): void {
    // Express's app.use('/dashboard', ...) strips its mount path from req.url; originalUrl keeps it.
    const url = (req as IncomingMessage & { originalUrl?: string }).originalUrl ?? req.url ?? '/'
    const pathname = new URL(url, 'http://localhost').pathname.replace(/\/+$/, '')
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain; charset=utf-8' })
      res.end('method not allowed\n')
      return
    }
    if (pathname === base) {
      res.writeHead(200, {
        'content-type': 'text/html; charset=utf-8',
        'cache-control': 'no-store',
        // Everything is inline; nothing may load from elsewhere.
        'content-security-policy':
          "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:",
      })
      res.end(req.method === 'HEAD' ? undefined : page)
    } else if (pathname === `${base}/events`) {
      stream(res)
    } else if (pathname === `${base}/snapshot.json`) {
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' })
      res.end(JSON.stringify(options.snapshot()))
    } else {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' })
      res.end('not found\n')
    }
  }

  return {
    handler,
    get clients() {
      return clients.size
    },
    close() {
      stopTimer()
      for (const res of clients) res.end()
      clients.clear()
    },
  }
}
