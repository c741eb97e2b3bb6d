// Counting a /v1/authz request by its response: an allowed answer of a policy with
// `outcomes.countIf` carries a ticket (header X-Sluice-Ticket), a random id for the charge it made;
// the proxy reports the response's status with POST /v1/outcome?ticket=&status= (nginx: post_action,
// examples/nginx/sluice-outcome.conf), and a status that does not count gives the units back.
// Tickets live in this process only, bounded in count and lifetime, and are spent on first use.
import { randomBytes } from 'node:crypto'
import type { ServerResponse } from 'node:http'
import type { Decision } from 'sluice'
import type { PolicyEntry } from './config.js'
import { send } from './plumbing.js'
import { ClientError } from './requests.js'
import type { ServiceContext } from './types.js'

/** The header of /v1/authz's answer that carries the ticket. */
export const TICKET_HEADER = 'x-sluice-ticket'

interface Ticket {
  /** The limiter policy charged (its display name, `login` or `login.pro`). */
  readonly policy: string
  readonly key: string
  readonly cost: number
  readonly countIf: (status: number) => boolean
  readonly issuedAt: number
  /** When the charged units expire by themselves (the decision's reset): no refund from then on. */
  readonly unitsExpireAt: number
  readonly expiresAt: number
}

const ticketsOf = new WeakMap<ServiceContext, Map<string, Ticket>>()

function tickets(ctx: ServiceContext): Map<string, Ticket> {
  let map = ticketsOf.get(ctx)
  if (map === undefined) {
    map = new Map()
    ticketsOf.set(ctx, map)
  }
  return map
}

/** 18 random bytes: 24 base64url characters, never guessed. */
const TICKET = /^[A-Za-z0-9_-]{24}$/
const STATUS = /^[1-5][0-9]{2}$/

/**
 * The ticket of an allowed /v1/authz decision on `entry`, set as a header of `res`; nothing when
 * the policy does not count by outcome or the request was denied (a denial charged nothing).
 */
export function issueTicket(
  ctx: ServiceContext,
  res: ServerResponse,
  entry: PolicyEntry,
  key: string,
  cost: number,
  d: Decision,
): void {
  const { outcomes } = ctx.config
  const countIf = outcomes.countIf.get(entry.name)
  if (countIf === undefined || !d.allowed || d.degraded === true) return
  const map = tickets(ctx)
  const now = Date.now()
  // Oldest first (insertion order, one lifetime for all): drop the expired, then make room.
  for (const [id, t] of map) {
    if (t.expiresAt > now && map.size < outcomes.maxTickets) break
    map.delete(id)
  }
  const id = randomBytes(18).toString('base64url')
  map.set(id, {
    policy: entry.displayName,
    key,
    cost,
    countIf,
    issuedAt: now,
    unitsExpireAt: now + d.resetMs,
    expiresAt: now + outcomes.ticketTtlMs,
  })
  res.setHeader(TICKET_HEADER, id)
}

/** POST /v1/outcome?ticket=&status=: spend the ticket; give its units back unless the status counts. */
export async function reportOutcome(
  ctx: ServiceContext,
  res: ServerResponse,
  query: URLSearchParams,
): Promise<void> {
  for (const name of query.keys())
    if (name !== 'ticket' && name !== 'status')
      throw new ClientError(
        'unknown_field',
        `unknown query parameter ${JSON.stringify(name)}; use ticket, status`,
      )
  const id = query.get('ticket') ?? ''
  if (!TICKET.test(id) || query.getAll('ticket').length !== 1)
    throw new ClientError(
      'invalid_ticket',
      'query: ticket must be the X-Sluice-Ticket value of a /v1/authz answer',
    )
  const statusText = query.get('status') ?? ''
  if (!STATUS.test(statusText) || query.getAll('status').length !== 1)
    throw new ClientError(
      'invalid_status',
      `query: status must be the response's HTTP status, 100 to 599, got ${JSON.stringify(statusText)}`,
    )
  const map = tickets(ctx)
  const ticket = map.get(id)
  const now = Date.now()
  if (ticket === undefined || ticket.expiresAt <= now)
    throw new ClientError('unknown_ticket', 'no such ticket: never issued, already used, or expired', 404)
  // Spent before any await: a second report of the same ticket finds nothing.
  map.delete(id)
  const counted = ticket.countIf(Number(statusText))
  // Units past their reset have expired already: giving back then would free units of a later window.
  if (counted || now >= ticket.unitsExpireAt) {
    send(ctx, res, 200, JSON.stringify({ counted, refunded: 0 }))
    return
  }
  await ctx.limiter.refund(ticket.policy, ticket.key, ticket.cost)
  send(ctx, res, 200, JSON.stringify({ counted: false, refunded: ticket.cost }))
}
