// Whom the gRPC listener answers: `grpc.trustedPeers` entries are addresses and networks (the
// library's ipMatcher) or, with mTLS, certificate subjects written `subject:CN=envoy,O=mesh`.
import type { PeerCertificate } from 'node:tls'
import { InvalidConfigError } from 'sluice'
import { ipMatcher } from 'sluice/internal'

const SUBJECT = 'subject:'
const ATTRIBUTE = /^([A-Za-z][A-Za-z0-9.]*)=(.+)$/
/** How many peer addresses a matcher remembers the answer for (Envoy fleets are far fewer). */
const KNOWN_ADDRESSES = 4096

/** The certificate subject a verified client presented (`{ CN: 'envoy', O: 'mesh' }`). */
export type PeerSubject = PeerCertificate['subject']

/** True when the call's peer (its address, and its verified certificate's subject if any) is trusted. */
export type PeerMatcher = (address: string | undefined, subject: PeerSubject | undefined) => boolean

/** The subject entries of `entries`, each as its attribute pairs. */
function subjectsOf(entries: readonly string[], where: string): [string, string][][] {
  return entries
    .filter((entry) => entry.startsWith(SUBJECT))
    .map((entry) => {
      const pairs = entry
        .slice(SUBJECT.length)
        .split(',')
        .map((part) => ATTRIBUTE.exec(part.trim()))
      if (pairs.length === 0 || pairs.some((pair) => pair === null))
        throw new InvalidConfigError(
          `${where}: ${JSON.stringify(entry)} is not a subject; write subject:CN=envoy or subject:CN=envoy,O=mesh`,
        )
      return pairs.map((pair) => [pair![1]!, pair![2]!.trim()] as [string, string])
    })
}

/** True when `entries` names a certificate subject (which only mTLS can vouch for). */
export function namesSubjects(entries: readonly string[]): boolean {
  return entries.some((entry) => entry.startsWith(SUBJECT))
}

/**
 * A matcher for `grpc.trustedPeers`: a peer is trusted when its address matches an address entry,
 * or its certificate's subject holds every attribute of a subject entry. Throws InvalidConfigError.
 * @example grpcPeerMatcher(['loopback', 'subject:CN=envoy'], 'grpc.trustedPeers')
 */
export function grpcPeerMatcher(entries: readonly string[], where: string): PeerMatcher {
  const subjects = subjectsOf(entries, where)
  const addressMatches = ipMatcher(
    entries.filter((entry) => !entry.startsWith(SUBJECT)),
    where,
  )
  // Every call asks about its connection's address, and a matcher lives until the next reload:
  // each address is matched once (parsing it is most of the cost), the answers kept for a bounded
  // number of addresses.
  const known = new Map<string, boolean>()
  const addressTrusted = (address: string | undefined) => {
    if (address === undefined) return addressMatches(address)
    let trusted = known.get(address)
    if (trusted === undefined) {
      trusted = addressMatches(address)
      if (known.size >= KNOWN_ADDRESSES) known.clear()
      known.set(address, trusted)
    }
    return trusted
  }
  return (address, subject) => {
    if (addressTrusted(address)) return true
    if (subject === undefined) return false
    return subjects.some((pairs) =>
      pairs.every(([name, value]) => {
        const held: unknown = subject[name as keyof PeerSubject]
        return Array.isArray(held) ? held.includes(value) : held === value
      }),
    )
  }
}
