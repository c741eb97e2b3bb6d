// Pieces of the service around a request: configured policy names for observability, the client
// address of /v1/authz under the HTTP core's rules, and waiting for a streamed response to end.
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { ClientIpResolver } from '../http/ip.js'
import { clientIpResolver, groupIp, ipMatcher, parseIp } from '../http/ip.js'
import type { Decision, DecisionEvent, LayeredDecision } from '../limiter.js'
import type { ServiceConfig } from './config.js'

/** The event with configured policy names (one small copy per decision, only for observability). */
export function displayed(event: DecisionEvent, names: ReadonlyMap<string, string>): DecisionEvent {
  const d = event.decision
  const name = (internal: string) => names.get(internal) ?? internal
  let decision: Decision | LayeredDecision
  if (!('results' in d)) decision = { ...d, policy: name(d.policy) }
  else {
    const layered: LayeredDecision = {
      ...d,
      policy: name(d.policy),
      results: d.results.map((r) => ({ ...r, policy: name(r.policy) })),
    }
    if (d.deniedBy !== undefined) layered.deniedBy = name(d.deniedBy)
    decision = layered
  }
  return { ...event, decision }
}

/** Internal policy name -> the name operators configured: `api`, or `api.pro` for a tier. */
export function displayNamesOf(config: ServiceConfig): Map<string, string> {
  const out = new Map<string, string>()
  for (const entry of config.entries.values())
    out.set(entry.internalName, entry.tier === undefined ? entry.name : `${entry.name}.${entry.tier}`)
  return out
}

/**
 * The client address for /v1/authz with the HTTP core's rules: the forwarding header only from
 * trusted proxies (authz.trustProxy, authz.proxyHeader), IPv6 grouped by authz.ipv6Prefix.
 */
export function authzIpResolver(config: ServiceConfig): (req: IncomingMessage) => string | undefined {
  const { trustProxy, proxyHeader, ipv6Prefix } = config.authz
  const resolver: ClientIpResolver = clientIpResolver({ trustProxy, header: proxyHeader })
  return (req) => {
    const value = req.headers[proxyHeader]
    const forwarded = typeof value === 'string' ? value : Array.isArray(value) ? value.join(', ') : undefined
    const address = resolver.resolve(req.socket.remoteAddress, forwarded)
    const ip = address === undefined ? undefined : parseIp(address)
    return ip === undefined ? undefined : groupIp(ip.address, ip.family, ipv6Prefix)
  }
}

/**
 * Whether a /v1/authz peer may speak for the client through authz.keyHeader and authz.tierHeader:
 * only the socket peer counts (a forwarding header cannot vouch for itself).
 */
export function authzPeerTrusted(config: ServiceConfig): (req: IncomingMessage) => boolean {
  const matches = ipMatcher(config.authz.trustedPeers, 'authz.trustedPeers')
  return (req) => matches(req.socket.remoteAddress)
}

/** Resolves when the response is over (an SSE stream ends when the client leaves or on close). */
export function finished(res: ServerResponse): Promise<void> {
  if (res.writableEnded || res.destroyed) return Promise.resolve()
  return new Promise((resolve) => {
    res.once('close', () => resolve())
  })
}
