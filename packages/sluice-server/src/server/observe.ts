// Pieces of the service around a request: the client address of /v1/authz under the HTTP core's
// rules, whether its peer is trusted, and waiting for a streamed response to end.
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { ClientIpResolver } from 'sluice/internal'
import { clientIpResolver, groupIp, ipMatcher, parseIp } from 'sluice/internal'
import type { ServiceConfig } from './config.js'

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
