// Outcome counting on a node:http response (Express, Fastify's `reply.raw`, node:http, Hono on
// @hono/node-server): the counted request is told when the response closes, whether it was sent
// whole or the client went away first. One listener, added only for a request that is counted.
import type { ServerResponse } from 'node:http'
import type { ResponseCounter } from '../http/outcome-counting.js'

/** Tell `counted` when `res` has ended; `raw` is the framework's response, for `requestWasSuccessful`. */
export function countOnClose(res: ServerResponse, counted: ResponseCounter, raw: unknown): void {
  // The decision may arrive after the client left (a remote store): the close has happened already.
  if (res.closed) counted.ended(res.statusCode, raw, res.writableFinished)
  else res.once('close', () => counted.ended(res.statusCode, raw, res.writableFinished))
}
