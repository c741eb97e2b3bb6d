// Shared by the four examples: policies, layered rules and tiers for a small API.
// Imports the package by its name, as your app would (in this repository it resolves to dist/).

import type { HttpLimiterOptions, HttpRequestInfo } from 'sluice'
import { createLimiter } from 'sluice'

export const limiter = createLimiter({
  policies: {
    perIp: { algorithm: 'sliding-window-counter', limit: 300, window: '1m' }, // wide: users behind NAT
    userFree: { algorithm: 'token-bucket', limit: 60, window: '1m', burst: 20 },
    userPro: { algorithm: 'token-bucket', limit: 600, window: '1m', burst: 100 },
    reports: { algorithm: 'sliding-window-log', limit: 10, window: '1m' }, // tight, expensive route
  },
})

// A stand-in for a real account lookup (database, billing service).
const accounts = new Map([
  ['alice', 'free'],
  ['bob', 'pro'],
  ['carol', 'enterprise'],
])

/** Demo only: the user is the bearer token. Use your verified session instead. */
export function userOf(request: HttpRequestInfo): string | undefined {
  const auth = request.header('authorization')
  return auth?.startsWith('Bearer ') ? auth.slice(7) : undefined
}

export const options: HttpLimiterOptions = {
  limiter,
  user: userOf,
  trustProxy: ['loopback'], // e.g. nginx on the same host
  rules: [
    { policy: 'perIp', key: 'ip', cost: 1 },
    { policy: { free: 'userFree', pro: 'userPro', enterprise: null }, key: 'user' },
    { policy: 'reports', key: ['user', 'route'], routes: ['POST /reports'] },
  ],
  tiers: {
    default: 'free',
    cacheMs: 30_000,
    resolve: async (request) => accounts.get(userOf(request) ?? ''),
  },
  skip: { paths: ['/health'] },
}

export const port = Number(process.env.PORT ?? 3000)
