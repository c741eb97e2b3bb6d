// sluice/node: wrap a plain node:http request handler with the shared HTTP core.
import type { IncomingMessage, ServerResponse } from 'node:http'
import { asHttpLimiter, deliveryOf } from '../http/core.js'
import type {
  HttpLimiter,
  HttpLimiterOptions,
  HttpOutcome,
  HttpRequestInfo,
  RouteOptions,
} from '../http/index.js'
import { countedOf } from '../http/outcome-counting.js'
import type { NodeHandler } from '../http/types.js'
import { checkKnownKeys, keysOf } from '../options.js'
import { NodeRequestInfo, pathOf } from './request-info.js'
import { countOnClose } from './response-end.js'

export interface NodeAdapterOptions {
  /** The route pattern of a request (node:http has no router). Default: none, so every request is `METHOD *`. */
  route?: (req: IncomingMessage) => string | undefined
}

const OPTION_KEYS = keysOf<NonNullable<Parameters<typeof withSluice>[2]>>({ route: true, routeOptions: true })

export type { NodeHandler }

/** The core's view of a node:http request. */
export function nodeRequest(req: IncomingMessage, route: string | undefined): HttpRequestInfo {
  return new NodeRequestInfo(req, route, pathOf(req.url), undefined)
}

/** Apply an outcome to a node:http response: set the headers; answer when refused. Returns true if answered. */
export function sendOutcome(res: ServerResponse, outcome: HttpOutcome): boolean {
  const headers = outcome.headers
  for (const name in headers) res.setHeader(name, headers[name]!)
  if (outcome.action === 'continue') return false
  res.statusCode = outcome.status
  res.end(outcome.body)
  return true
}

/**
 * Wrap a node:http handler; the options' callbacks get the `IncomingMessage` as `request.raw`.
 * @example
 * http.createServer(withSluice({ limiter, rules: [{ policy: 'perIp', key: 'ip' }] }, (req, res) => res.end('ok')))
 */
export function withSluice(
  limiter: HttpLimiter<IncomingMessage> | HttpLimiterOptions<IncomingMessage>,
  handler: NodeHandler,
  options: NodeAdapterOptions & {
    routeOptions?: (route: string | undefined) => RouteOptions<IncomingMessage> | undefined
  } = {},
): (req: IncomingMessage, res: ServerResponse) => void {
  checkKnownKeys('withSluice options', options, OPTION_KEYS)
  const deliver = deliveryOf(asHttpLimiter(limiter))
  const answerOrHandle = (outcome: HttpOutcome, req: IncomingMessage, res: ServerResponse): void => {
    if (sendOutcome(res, outcome)) return
    const counted = countedOf(outcome)
    if (counted !== undefined) countOnClose(res, counted, res)
    handler(req, res)
  }
  return (req, res) => {
    const route = options.route?.(req)
    deliver(
      nodeRequest(req, route),
      options.routeOptions?.(route) as RouteOptions | undefined,
      answerOrHandle,
      req,
      res,
    )
  }
}
