// The `message` and `statusCode` shorthands: the body and status of a rate-limit refusal, given as
// plain values (as express-rate-limit and @fastify/rate-limit take them) instead of an `onLimited`.
// Checked and serialised once, where the options or route options are compiled.
import { InvalidOptionsError } from '../errors.js'

/** A refusal's body: a string, sent as text/plain, or an object (or array), sent as JSON. */
export type LimitedMessage = string | Readonly<Record<string, unknown>> | readonly unknown[]

/** What the shorthands replace in a rate-limit refusal; a field left undefined keeps the default. */
export interface LimitedShorthand {
  readonly status: number | undefined
  readonly body: { readonly contentType: string; readonly text: string } | undefined
}

/**
 * The shorthands of `where` (the options, or one route's options), validated: `statusCode` a whole
 * number from 400 to 599, `message` text or a JSON-serialisable object, and neither when `onLimited`
 * decides the response. Undefined when neither is given. Throws `InvalidOptionsError`.
 */
export function limitedShorthand(
  given: { readonly message?: LimitedMessage | undefined; readonly statusCode?: number | undefined },
  where: string,
  hasOnLimited: boolean,
): LimitedShorthand | undefined {
  const { message, statusCode } = given
  if (message === undefined && statusCode === undefined) return undefined
  if (hasOnLimited) {
    const which = message !== undefined ? 'message' : 'statusCode'
    throw new InvalidOptionsError(
      `${where}: ${which} and onLimited both set the refusal; return { status, headers, body } from onLimited, or remove onLimited`,
    )
  }
  if (
    statusCode !== undefined &&
    (typeof statusCode !== 'number' || !Number.isInteger(statusCode) || statusCode < 400 || statusCode > 599)
  )
    throw new InvalidOptionsError(`${where}.statusCode: a status from 400 to 599, such as 429`)
  return { status: statusCode, body: message === undefined ? undefined : serialise(message, where) }
}

function serialise(message: LimitedMessage, where: string): NonNullable<LimitedShorthand['body']> {
  if (typeof message === 'string') return { contentType: 'text/plain; charset=utf-8', text: message }
  const problem = `${where}.message: a string (sent as text/plain) or an object (sent as JSON)`
  if (message === null || typeof message !== 'object') throw new InvalidOptionsError(problem)
  let text: string | undefined
  try {
    text = JSON.stringify(message)
  } catch (cause) {
    throw new InvalidOptionsError(`${problem}; this one cannot be written as JSON`, { cause })
  }
  if (text === undefined) throw new InvalidOptionsError(problem)
  return { contentType: 'application/json', text }
}

/** `over`'s fields where it has them, `under`'s otherwise: a route's shorthand over the limiter's. */
export function overlay(
  over: LimitedShorthand | undefined,
  under: LimitedShorthand | undefined,
): LimitedShorthand | undefined {
  if (over === undefined) return under
  if (under === undefined) return over
  return { status: over.status ?? under.status, body: over.body ?? under.body }
}
