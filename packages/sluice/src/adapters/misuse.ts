// An adapter called by another framework (Express middleware given to Fastify's `register`, the
// Fastify plugin mounted with `app.use`, ...): recognise the caller and name the import to use.
import { WrongAdapterError } from '../errors.js'

type Adapter = 'express' | 'fastify' | 'hono'

const HOW: Record<Adapter, string> = {
  express:
    "import { sluice } from 'sluice/express' and mount it on routes: app.get('/path', sluice(options), handler)",
  fastify: "import { sluice } from 'sluice/fastify' and register it: await app.register(sluice, options)",
  hono: "import { sluice } from 'sluice/hono' and mount it: app.use('*', sluice(options))",
}

const WHAT: Record<Adapter, string> = {
  express: 'Express middleware',
  fastify: 'a Fastify plugin',
  hono: 'Hono middleware',
}

function field(value: unknown, name: string): unknown {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[name] : undefined
}

/** Which framework made this call, from the shape of its arguments. */
function callerOf(args: readonly unknown[]): Adapter | undefined {
  const [first, second] = args
  if (typeof field(first, 'addHook') === 'function' && typeof field(first, 'register') === 'function')
    return 'fastify'
  if (typeof field(field(first, 'req'), 'header') === 'function' && typeof second === 'function')
    return 'hono'
  if (typeof field(second, 'setHeader') === 'function') return 'express'
  return undefined
}

/**
 * The error for `adapter` called with another framework's arguments.
 * @example wrongAdapter('express', [fastifyInstance, {}, done]).message
 * // "sluice/express is Express middleware, but Fastify called it as a plugin ... import { sluice } from 'sluice/fastify' ..."
 */
export function wrongAdapter(adapter: Adapter, given: readonly unknown[]): WrongAdapterError {
  // Parameters the caller left out arrive as undefined: count only those it passed.
  const args = [...given]
  while (args.length > 0 && args[args.length - 1] === undefined) args.pop()
  const caller = callerOf(args)
  const asWhat =
    caller === 'fastify'
      ? 'Fastify called it as a plugin (instance, options, done)'
      : caller === 'hono'
        ? 'Hono called it as middleware (c, next)'
        : caller === 'express'
          ? 'it was called as Express or node:http middleware (req, res, next)'
          : args.length <= 1
            ? 'it was called directly, like a factory (sluice(options))'
            : `it was called with ${args.length} arguments it does not understand`
  const instead =
    caller === undefined || caller === adapter
      ? `Use it this way: ${HOW[adapter]}.`
      : `For ${caller === 'express' ? 'Express' : caller === 'fastify' ? 'Fastify' : 'Hono'}, ${HOW[caller]}.`
  return new WrongAdapterError(`sluice/${adapter} is ${WHAT[adapter]}, but ${asWhat}. ${instead}`)
}
