// The request object the node:http and Express adapters hand to the HTTP core (internal).
import type { IncomingMessage } from 'node:http'
import { headerValue } from '../http/core.js'
import type { HttpRequestInfo } from '../http/index.js'

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
