// What the adapters read from a Node request for the HTTP core (internal): the request view the
// node:http and Express adapters hand to the core, a header's value, a request target's path.
import type { IncomingMessage } from 'node:http'
import type { HttpRequestInfo } from '../http/index.js'

/** One header value from a Node-style header map (arrays joined with `, `). */
export function headerValue(value: string | readonly string[] | undefined): string | undefined {
  return typeof value === 'string' ? value : Array.isArray(value) ? value.join(', ') : undefined
}

/** The path of a request target, without its query string. */
export function pathOf(url: string | undefined): string {
  if (url === undefined) return '/'
  const q = url.indexOf('?')
  return q < 0 ? url : url.slice(0, q)
}

/**
 * The core's view of a node:http request (Express's too): a class, so `header` is one shared
 * method rather than a closure per request.
 */
export class NodeRequestInfo implements HttpRequestInfo {
  readonly method: string
  readonly route: string | undefined
  readonly path: string
  readonly remoteAddress: string | undefined
  readonly frameworkClientAddress: string | undefined
  readonly raw: IncomingMessage
  constructor(
    req: IncomingMessage,
    route: string | undefined,
    path: string,
    frameworkClientAddress: string | undefined,
  ) {
    this.method = req.method ?? 'GET'
    this.route = route
    this.path = path
    this.remoteAddress = req.socket.remoteAddress
    this.frameworkClientAddress = frameworkClientAddress
    this.raw = req
  }
  header(name: string): string | undefined {
    return headerValue(this.raw.headers[name])
  }
}
